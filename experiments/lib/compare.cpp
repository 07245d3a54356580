#include "experiments/lib/compare.h"

#include <cmath>
#include <cstdio>
#include <map>

#include "experiments/lib/fidelity.h"
#include "strategy/errors.h"
#include "strategy/text_table.h"
#include "strategy/units.h"

namespace parlab::experiments {
namespace {

std::string ms(const std::optional<double>& s, const std::optional<double>& spread) {
  if (!s) return "-";
  return spread ? format_ms_spread(*s, *spread) : format_ms(*s);
}

// The error, marked "~" when the measurement's own spread covers it.
std::string rel(const std::optional<double>& pred, const CompareRow& r) {
  if (!pred || !r.measured) return "-";
  const bool noise = r.measured_spread && within_noise(*pred, *r.measured, *r.measured_spread);
  return format_error(*pred, *r.measured) + (noise ? " ~" : "");
}

std::string format_cores(double cores) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f cores", cores);
  return b;
}

std::string speedup_of(const std::optional<double>& t, const std::optional<double>& t1, double g, double g1) {
  if (!t || !t1) return "-";
  return format_speedup(speedup(*t1, *t, g1, g));
}

}  // namespace

std::string Comparison::table() const {
  bool splits = false;
  for (const auto& r : rows) splits = splits || r.zero != rows.front().zero;
  std::vector<std::string> head = {"workers", "gbs", "measured", "speedup", "simulated", "speedup", "error", "analytic", "speedup", "error", "load"};
  if (splits) {
    head.insert(head.begin() + 1, "split");
    head.push_back("peak mem/rank");
  }
  TextTable t(head);
  if (rows.empty()) return t.str();
  const CompareRow& r1 = rows.front();
  for (const auto& r : rows) {
    char gbs[32];
    std::snprintf(gbs, sizeof gbs, "%.0f", r.global_batch);
    std::vector<std::string> line = {
        std::to_string(r.world), gbs, ms(r.measured, r.measured_spread),
        r.measured_speedup ? format_speedup(*r.measured_speedup) : speedup_of(r.measured, r1.measured, r.global_batch, r1.global_batch),
        ms(r.simulated, {}), speedup_of(r.simulated, r1.simulated, r.global_batch, r1.global_batch), rel(r.simulated, r),
        ms(r.analytic, {}), speedup_of(r.analytic, r1.analytic, r.global_batch, r1.global_batch), rel(r.analytic, r),
        r.measured_others_cores ? format_cores(*r.measured_others_cores) : "-"};
    if (splits) {
      line.insert(line.begin() + 1, r.zero == 0 ? "DDP" : "ZeRO-" + std::to_string(r.zero));
      line.push_back(r.measured_peak_bytes ? units::format_bytes(*r.measured_peak_bytes) : "-");
    }
    t.add(line);
  }
  return t.str() + "measured: median step +- half its interquartile range (or of its rounds); ~ marks an error within\n"
                   "the measurement's +-, which cannot be told from noise; load: cores other jobs used during the\n"
                   "last measured run (above 0.3 the measurement is not of this machine alone)\n";
}

Comparison compare_experiment(db::ResultsStore& store, const std::string& name) {
  const auto exp = store.find_experiment(name);
  if (!exp) throw ConfigError("--experiment", name, "not in the database (parlab experiment list shows what is)");
  Comparison c;
  c.experiment = name;
  std::map<std::pair<int, int>, CompareRow> rows;  // (world, zero)
  for (const auto& run : store.runs_of_experiment(exp->id)) {  // oldest first: later runs win
    if (run.status != db::RunStatus::kCompleted) continue;
    const auto metrics = store.run_metrics(run.id);
    const auto it = metrics.find("step_seconds");
    if (it == metrics.end()) continue;
    const int zero = run.plan.contains("zero") ? run.plan["zero"].get<int>() : 0;
    CompareRow& r = rows[{run.world_size, zero}];
    r.world = run.world_size;
    r.zero = zero;
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
        r.measured_speedup = metric("rounds.speedup_paired");
        r.measured_others_cores = metric("machine.others_busy_cores");
        break;
      case db::RunKind::kSimulated: r.simulated = it->second, r.simulated_run = run.id; break;
      case db::RunKind::kAnalytic: r.analytic = it->second, r.analytic_run = run.id; break;
    }
  }
  if (rows.empty()) throw ConfigError("--experiment", name, "has no completed runs with a step time");
  for (auto& [w, r] : rows) {
    c.rows.push_back(r);
    if (r.measured && r.simulated) {
      const double e = std::fabs(relative_error(*r.simulated, *r.measured));
      c.worst_simulated_error = std::max(c.worst_simulated_error.value_or(0), e);
    }
    if (r.measured && r.analytic) {
      const double e = std::fabs(relative_error(*r.analytic, *r.measured));
      c.worst_analytic_error = std::max(c.worst_analytic_error.value_or(0), e);
    }
  }
  return c;
}

}  // namespace parlab::experiments
