#include "gui/core/lab_store.h"

#include <filesystem>

#include "db/results_store.h"
#include "strategy/io.h"
#include "strategy/measures.h"

namespace parlab::gui {

namespace {
int plan_int(const nlohmann::json& plan, const char* key) {
  return plan.contains(key) && plan[key].is_number() ? plan[key].get<int>() : -1;
}
}  // namespace

std::map<int, MeasuredPoint> measured_points(const std::string& db_path, const LabSetup& setup) {
  std::map<int, MeasuredPoint> out;
  if (!std::filesystem::exists(db_path)) return out;
  auto store = db::ResultsStore::open(db_path);
  for (const db::RunRecord& r : store.list_runs(db::RunStatus::kCompleted)) {
    if (r.kind != db::RunKind::kMeasured || r.model != setup.inputs.model_label() || r.cluster != setup.inputs.cluster)
      continue;
    strategy::Plan at;
    try {
      at = plan_at_workers(setup, r.world_size);
    } catch (const std::exception&) {
      continue;  // this split does not apply at that world
    }
    const nlohmann::json& p = r.plan;
    if (plan_int(p, "tp") != at.tp || plan_int(p, "pp") != at.pp || plan_int(p, "zero") != at.zero ||
        plan_int(p, "mb") != at.microbatch || plan_int(p, "gbs") != at.global_batch)
      continue;
    const auto metrics = store.run_metrics(r.id);
    auto metric = [&](const char* key) -> std::optional<double> {
      const auto it = metrics.find(key);
      return it == metrics.end() ? std::nullopt : std::optional<double>(it->second);
    };
    // As `parlab compare` reads it: over its rounds when the run closed a series of rounds.
    const auto step = metric("rounds.step_seconds") ? metric("rounds.step_seconds") : metric("step_seconds");
    if (!step) continue;
    const auto spread =
        metric("rounds.step_seconds") ? metric("rounds.step_seconds_spread") : metric("step_seconds_spread");
    out[r.world_size] = {r.id, *step, spread, double(at.global_batch),
                         strategy::round_steps(metrics)};  // oldest first: the newest wins
  }
  return out;
}

std::optional<db::RunRecord> run_with_run_dir(const std::string& db_path, const std::string& run_dir) {
  if (!std::filesystem::exists(db_path)) return std::nullopt;
  auto store = db::ResultsStore::open(db_path);
  const auto runs = store.list_runs();
  for (auto it = runs.rbegin(); it != runs.rend(); ++it)
    for (const auto& [k, v] : store.run_params(it->id))
      if (k == "run_dir" && v == run_dir) return *it;
  return std::nullopt;
}

db::NewPrediction prediction_for(const LabSetup& setup, int workers, double predicted, const std::string& reason,
                                 db::RunKind source) {
  db::NewPrediction p;
  p.quantity = "speedup";
  p.source = source;
  p.model = setup.inputs.model_label();
  p.cluster = setup.inputs.cluster;
  p.plan = strategy::to_json(plan_at_workers(setup, workers));
  p.world_size = workers;
  p.predicted = predicted;
  p.reason = reason;
  const char* user = std::getenv("USER");
  p.learner = user ? user : "";
  return p;
}

}  // namespace parlab::gui
