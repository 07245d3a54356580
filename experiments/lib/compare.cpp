#include "experiments/lib/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "experiments/lib/fidelity.h"
#include "base/errors.h"
#include "base/key_values.h"
#include "strategy/measures.h"
#include "base/text_table.h"
#include "base/units.h"

namespace parlab::experiments {
namespace {

std::string ms(const std::optional<double>& s, const std::optional<double>& spread) {
  if (!s) return "-";
  return spread ? format_ms_spread(*s, *spread) : format_ms(*s);
}

// The error, marked "~" when the measurement's own spread covers it.
std::string rel(const std::optional<double>& pred, const std::optional<double>& error, const CompareRow& r) {
  if (!pred || !error) return "-";
  const bool noise = r.measured_spread && within_noise(*pred, *r.measured, *r.measured_spread);
  return format_relative(*error) + (noise ? " ~" : "");
}

// One prediction's error against the row's measurement, paired by round where both have rounds.
std::optional<double> error_of(const std::optional<double>& pred, const std::vector<double>& pred_rounds,
                               const CompareRow& r) {
  if (!pred || !r.measured || !(*r.measured > 0)) return std::nullopt;
  const auto rounds = [](const std::optional<double>& x, const std::vector<double>& v) {
    return v.empty() ? std::vector<double>{*x} : v;
  };
  const strategy::Measure m =
      strategy::relative_error(rounds(pred, pred_rounds), rounds(r.measured, r.measured_rounds));
  return m.n > 0 ? std::optional<double>(m.value) : std::nullopt;
}

std::string format_cores(double cores) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f cores", cores);
  return b;
}

// A prediction's speedup against the first row's: paired by round where both carry rounds.
std::string speedup_of(const std::optional<double>& t, const std::vector<double>& rounds,
                       const std::optional<double>& t1, const std::vector<double>& rounds1, double g, double g1) {
  if (!t || !t1) return "-";
  const auto or_one = [](const std::optional<double>& x, const std::vector<double>& v) {
    return v.empty() ? std::vector<double>{*x} : v;
  };
  const strategy::Measure m = strategy::speedup(or_one(t1, rounds1), or_one(t, rounds), g1, g);
  return m.n > 0 ? format_speedup(m.value) : "-";
}

int plan_int(const nlohmann::json& plan, const char* key, int fallback) {
  return plan.contains(key) && plan[key].is_number() ? plan[key].get<int>() : fallback;
}

}  // namespace

std::string split_label(const nlohmann::json& plan) {
  std::string s = plan.value("name", std::string("?"));
  if (plan_int(plan, "pp", 1) > 1) {
    s += " " + plan.value("schedule", std::string());
    if (plan_int(plan, "v", 1) > 1) s += " v" + std::to_string(plan_int(plan, "v", 1));
    s += " m" + std::to_string(plan_int(plan, "microbatches", 1));
  }
  if (plan.value("sp", std::string("off")) == "on") s += " sp";
  const std::string recompute = plan.value("recompute", std::string("none"));
  if (recompute != "none") s += " recompute " + recompute;
  if (plan.value("precision", std::string("fp32")) == "mixed") s += " mixed";
  return s;
}

namespace {

// A plan's text ("dp=2,tp=1,...") as key -> value.
std::map<std::string, std::string> plan_keys(const std::string& text) {
  std::map<std::string, std::string> out;
  for (const KeyValue& kv : split_key_values(text))
    if (kv.has_equals) out[kv.key] = kv.value;
  return out;
}

// Rows whose label is the same on the same worker count (microbatch size, bucket size, ...) gain
// the plan keys whose values differ among them, "DDP x2 (bucket_mb=1)": every row told apart by
// what sets it apart, not by its whole plan.
void tell_apart(std::map<std::pair<int, int>, CompareRow>& rows) {
  std::map<std::string, std::vector<CompareRow*>> same;
  for (auto& [key, r] : rows) same[std::to_string(r.world) + " " + r.split].push_back(&r);
  for (auto& [label, group] : same) {
    if (group.size() < 2) continue;
    std::vector<std::map<std::string, std::string>> keys;
    std::set<std::string> names;
    for (const CompareRow* r : group) {
      keys.push_back(plan_keys(r->plan));
      for (const auto& [k, v] : keys.back()) names.insert(k);
    }
    const auto value = [](const std::map<std::string, std::string>& m, const std::string& k) {
      const auto it = m.find(k);
      return it == m.end() ? std::string("-") : it->second;
    };
    std::vector<std::string> differing;
    for (const std::string& k : names)
      if (std::any_of(keys.begin(), keys.end(), [&](const auto& m) { return value(m, k) != value(keys.front(), k); }))
        differing.push_back(k);
    for (size_t i = 0; i < group.size(); ++i) {
      std::string extra;
      for (const std::string& k : differing) extra += (extra.empty() ? "" : ",") + k + "=" + value(keys[i], k);
      group[i]->split += extra.empty() ? " (" + group[i]->plan + ")" : " (" + extra + ")";
    }
  }
}

}  // namespace

std::optional<double> CompareRow::simulated_error() const { return error_of(simulated, simulated_rounds, *this); }
std::optional<double> CompareRow::analytic_error() const { return error_of(analytic, analytic_rounds, *this); }

std::optional<double> Comparison::measured_speedup(size_t i) const {
  if (i >= rows.size() || rows.empty()) return std::nullopt;
  const CompareRow &r = rows[i], &r1 = rows.front();
  if (!r.measured || !r1.measured) return std::nullopt;
  // An older database kept only the paired figure, against the experiment's first worker count.
  if (r.measured_rounds.empty() && r.recorded_speedup) return r.recorded_speedup;
  const auto rounds = [](const CompareRow& x) {
    return x.measured_rounds.empty() ? std::vector<double>{*x.measured} : x.measured_rounds;
  };
  const strategy::Measure m = strategy::speedup(rounds(r1), rounds(r), r1.global_batch, r.global_batch);
  return m.n > 0 ? std::optional<double>(m.value) : std::nullopt;
}

std::string Comparison::table() const {
  bool splits = false;
  for (const auto& r : rows) splits = splits || r.split != rows.front().split;
  std::vector<std::string> head = {"workers", "gbs",      "measured", "speedup", "simulated", "speedup",
                                   "error",   "analytic", "speedup",  "error",   "load"};
  if (splits) {
    head.insert(head.begin() + 1, "split");
    head.push_back("peak mem/rank");
  }
  TextTable t(head);
  if (rows.empty()) return t.str();
  const CompareRow& r1 = rows.front();
  for (size_t i = 0; i < rows.size(); ++i) {
    const CompareRow& r = rows[i];
    char gbs[32];
    std::snprintf(gbs, sizeof gbs, "%.0f", r.global_batch);
    const auto measured_x = measured_speedup(i);
    std::vector<std::string> line = {
        std::to_string(r.world),
        gbs,
        ms(r.measured, r.measured_spread),
        measured_x ? format_speedup(*measured_x) : "-",
        ms(r.simulated, {}),
        speedup_of(r.simulated, r.simulated_rounds, r1.simulated, r1.simulated_rounds, r.global_batch, r1.global_batch),
        rel(r.simulated, r.simulated_error(), r),
        ms(r.analytic, {}),
        speedup_of(r.analytic, r.analytic_rounds, r1.analytic, r1.analytic_rounds, r.global_batch, r1.global_batch),
        rel(r.analytic, r.analytic_error(), r),
        r.measured_others_cores ? format_cores(*r.measured_others_cores) : "-"};
    if (splits) {
      line.insert(line.begin() + 1, r.split);
      line.push_back(r.measured_peak_bytes ? units::format_bytes(*r.measured_peak_bytes) : "-");
    }
    t.add(line);
  }
  return t.str() +
         "measured: median step +- half its interquartile range (or of its rounds); speedup against the first row,\n"
         "the median of paired per-round ratios where rounds were recorded; error: the median of paired per-round\n"
         "errors where each round predicted afresh (scaling and splits in rounds); ~ marks an error within\n"
         "the measurement's +-, which cannot be told from noise; load: cores other jobs (or, on a VM, the\n"
         "hypervisor: steal) took during the last measured run (above 0.3 the measurement is not of this machine "
         "alone)\n";
}

Comparison compare_experiment(db::ResultsStore& store, const std::string& name) {
  const auto exp = store.find_experiment(name);
  if (!exp) throw ConfigError("--experiment", name, "not in the database (parlab experiment list shows what is)");
  Comparison c;
  c.experiment = name;
  // Keyed by (world, the whole plan); plans of one world keep the order they were first run in.
  std::map<std::pair<int, int>, CompareRow> rows;              // (world, first appearance) -> row
  std::map<std::string, int> appearance;                       // plan text -> first appearance
  for (const auto& run : store.runs_of_experiment(exp->id)) {  // oldest first: later runs win
    if (run.status != db::RunStatus::kCompleted) continue;
    const auto metrics = store.run_metrics(run.id);
    const auto it = metrics.find("step_seconds");
    if (it == metrics.end()) continue;
    const std::string plan = run.plan.value("text", run.plan.dump());
    const int order = appearance.emplace(plan, int(appearance.size())).first->second;
    CompareRow& r = rows[{run.world_size, order}];
    r.plan = plan;
    r.split = split_label(run.plan);
    r.world = run.world_size;
    r.zero = plan_int(run.plan, "zero", 0);
    if (const auto peak = metrics.find("memory.max.total.peak_bytes");
        peak != metrics.end() && run.kind == db::RunKind::kMeasured)
      r.measured_peak_bytes = peak->second;
    if (run.plan.contains("gbs")) r.global_batch = run.plan["gbs"].get<double>();
    auto metric = [&](const char* key) -> std::optional<double> {
      const auto m = metrics.find(key);
      return m == metrics.end() ? std::nullopt : std::optional<double>(m->second);
    };
    switch (run.kind) {
      case db::RunKind::kMeasured:
        // Over its rounds when the run closed a series of order-alternated rounds.
        r.measured = metric("rounds.step_seconds").value_or(it->second), r.measured_run = run.id;
        r.measured_spread = metric("rounds.step_seconds_spread");
        if (!r.measured_spread) r.measured_spread = metric("step_seconds_spread");
        r.measured_rounds = strategy::round_steps(metrics);
        r.recorded_speedup = metric("rounds.speedup_paired");
        r.measured_others_cores = metric("machine.others_busy_cores");
        break;
      // Predictions made round by round beside the measurements (the splits experiment's
      // rounds): the median of the rounds', recorded on the last.
      case db::RunKind::kSimulated:
        r.simulated = metric("rounds.step_seconds").value_or(it->second), r.simulated_run = run.id;
        r.simulated_rounds = strategy::round_steps(metrics);
        break;
      case db::RunKind::kAnalytic:
        r.analytic = metric("rounds.step_seconds").value_or(it->second), r.analytic_run = run.id;
        r.analytic_rounds = strategy::round_steps(metrics);
        break;
    }
  }
  if (rows.empty()) throw ConfigError("--experiment", name, "has no completed runs with a step time");
  tell_apart(rows);
  for (auto& [key, r] : rows) {
    c.rows.push_back(r);
    if (r.measured && r.simulated) {
      const double e = std::fabs(r.simulated_error().value_or(0));
      c.worst_simulated_error = std::max(c.worst_simulated_error.value_or(0), e);
    }
    if (r.measured && r.analytic) {
      const double e = std::fabs(r.analytic_error().value_or(0));
      c.worst_analytic_error = std::max(c.worst_analytic_error.value_or(0), e);
    }
  }
  return c;
}

}  // namespace parlab::experiments
