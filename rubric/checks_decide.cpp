// The decision-utility check: the planner's first choice among splits against the fastest
// measured candidate, and how well its ranking orders what was measured. Recomputed here from the
// decide experiment's recorded rows (strategy/measures.h), never taken from the writer's line.
#include <fmt/core.h>

#include <set>

#include "rubric/check_util.h"
#include "rubric/checks.h"
#include "strategy/measures.h"

namespace parlab::rubric::detail {

using nlohmann::json;

void judge_decision(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const json rows = p->evidence.value("candidates", json::array());
  const size_t chosen = p->evidence.value("chosen", size_t{0});
  std::vector<double> predicted, measured;
  std::set<std::string> families;
  std::optional<size_t> fastest;
  for (size_t i = 0; i < rows.size(); ++i) {
    const json& row = rows[i];
    const std::string name = row.value("name", std::string("?"));
    Part part{fmt::format("{} ({})", name, row.value("origin", std::string())), false, "", {p->row.id}};
    if (!row.contains("measured_step_seconds")) {
      part.detail = "not measured: " + row.value("not_run", std::string("no measurement"));
      r.parts.push_back(part);
      continue;
    }
    const double pred = num(row, "predicted_step_seconds"), meas = num(row, "measured_step_seconds");
    part.passed = true;
    part.detail = fmt::format("predicted {:.1f} ms, measured {:.1f} ms ({:+.1f}%)", pred * 1e3, meas * 1e3,
                              100 * strategy::relative_error(pred, meas));
    r.parts.push_back(part);
    if (row.contains("measured_run")) r.runs.push_back(row["measured_run"].get<int64_t>());
    predicted.push_back(pred);
    measured.push_back(meas);
    families.insert(row.value("family", std::string()));
    if (!fastest || meas < num(rows[*fastest], "measured_step_seconds")) fastest = i;
  }
  r.measurements.push_back(at_least("measured candidates", double(measured.size()), c.threshold("min_candidates"), ""));
  r.measurements.push_back(at_least("families measured (DDP, ZeRO, tensor, pipeline)", double(families.size()),
                                    c.threshold("min_families"), ""));
  if (chosen >= rows.size() || !rows[chosen].contains("measured_step_seconds") || !fastest) {
    r.status = Status::kFailed;
    r.detail = "the planner's first choice has no measurement: its regret cannot be computed";
    return;
  }
  const double t_choice = num(rows[chosen], "measured_step_seconds"),
               t_best = num(rows[*fastest], "measured_step_seconds");
  r.measurements.push_back(
      at_most("regret of the first choice", strategy::regret(t_choice, t_best), c.threshold("max_regret"),
              fmt::format("{} at {:.1f} ms against the fastest, {} at {:.1f} ms; 1 - t_fastest / t_choice",
                          rows[chosen].value("name", std::string()), t_choice * 1e3,
                          rows[*fastest].value("name", std::string()), t_best * 1e3)));
  if (measured.size() >= 2)
    r.measurements.push_back(at_least("Spearman rank correlation, predicted vs measured",
                                      strategy::spearman(predicted, measured), c.threshold("min_spearman"),
                                      fmt::format("over {} candidates", measured.size())));
  conclude(r, fmt::format("the planner's choice among {} splits on {} workers, measured", rows.size(),
                          p->inputs.value("workers", 0)));
}

}  // namespace parlab::rubric::detail
