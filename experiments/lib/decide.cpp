#include "experiments/lib/decide.h"

#include "strategy/measures.h"

namespace parlab::experiments {

Decision decide(const std::vector<DecideCandidate>& c) {
  Decision d;
  std::vector<double> predicted, measured;
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].measured_step_seconds) continue;
    ++d.measured;
    predicted.push_back(c[i].predicted_step_seconds);
    measured.push_back(*c[i].measured_step_seconds);
    if (!d.fastest || *c[i].measured_step_seconds < *c[*d.fastest].measured_step_seconds) d.fastest = i;
  }
  if (!c.empty() && c.front().measured_step_seconds)
    d.regret = strategy::regret(*c.front().measured_step_seconds, *c[*d.fastest].measured_step_seconds);
  if (measured.size() >= 2) d.spearman = strategy::spearman(predicted, measured);
  return d;
}

nlohmann::json to_json(const DecideCandidate& c) {
  nlohmann::json j{{"plan", c.plan},
                   {"name", c.name},
                   {"family", c.family},
                   {"origin", c.origin},
                   {"predicted_step_seconds", c.predicted_step_seconds},
                   {"planner_step_seconds", c.planner_step_seconds},
                   {"global_batch", c.global_batch}};
  if (c.measured_step_seconds)
    j["measured_step_seconds"] = *c.measured_step_seconds, j["measured_spread_seconds"] = c.measured_spread_seconds;
  if (c.measured_run) j["measured_run"] = *c.measured_run;
  if (!c.not_run.empty()) j["not_run"] = c.not_run;
  return j;
}

}  // namespace parlab::experiments
