#include "experiments/lib/decide.h"

#include <algorithm>

#include "base/errors.h"
#include "experiments/lib/compare.h"
#include "experiments/lib/predict_cluster.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/measures.h"

namespace parlab::experiments {
namespace {

// The fastest plan of one family as the planner prices it: a search per degree of the family's
// own axis (the planner searches whatever a fixed plan leaves open); nullopt when none fits.
std::optional<strategy::Candidate> best_of_family(const strategy::ModelSpec& model,
                                                  const strategy::ClusterSpec& cluster,
                                                  const strategy::PlannerOptions& base, const std::string& family,
                                                  int workers, const std::string& keep) {
  std::vector<std::string> fixes;
  if (family == "DDP") fixes = {"tp=1,pp=1,zero=0"};
  if (family == "ZeRO") fixes = {"tp=1,pp=1,zero=1", "tp=1,pp=1,zero=2", "tp=1,pp=1,zero=3"};
  for (int d = 2; d <= workers; ++d)
    if (workers % d == 0) {
      if (family == "tensor") fixes.push_back("pp=1,tp=" + std::to_string(d));
      if (family == "pipeline") fixes.push_back("pp=" + std::to_string(d));
    }
  if (!keep.empty())
    for (std::string& fix : fixes) fix += "," + keep;
  std::optional<strategy::Candidate> best;
  for (const std::string& fix : fixes) {
    strategy::PlannerOptions o = base;
    o.fixed = strategy::parse_plan(fix);
    o.top = 8;  // the fastest among its walked best, not its simplest-within-the-margin choice
    try {
      const strategy::PlanReport r = strategy::search_plans(model, cluster, o);
      for (const strategy::Candidate& c : r.top)
        if (plan_family(c.plan) == family && (!best || c.step_seconds() < best->step_seconds())) best = c;
    } catch (const ConfigError&) {
      // this degree has no valid plan at this global batch: the family's others may
    }
  }
  return best;
}

DecideCandidate candidate_of(const strategy::Candidate& c, const std::string& origin) {
  DecideCandidate d;
  d.plan = c.plan.to_string();
  d.name = split_label(strategy::to_json(c.plan));  // as compare names its row
  d.family = plan_family(c.plan);
  d.origin = origin;
  d.predicted_step_seconds = d.planner_step_seconds = c.step_seconds();
  d.global_batch = double(c.plan.global_batch);
  return d;
}

}  // namespace

DecideCandidates gather_candidates(const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                                   strategy::PlannerOptions po, const strategy::PlanReport& rep, int workers,
                                   const std::string& keep) {
  DecideCandidates c;
  for (size_t i = 0; i < rep.top.size(); ++i) {
    c.cands.push_back(candidate_of(rep.top[i], "top " + std::to_string(i + 1)));
    c.plans.push_back(rep.top[i].plan);
  }
  for (const char* family : kPlanFamilies) {
    bool present = false;
    for (const DecideCandidate& d : c.cands) present = present || d.family == family;
    if (present) continue;
    po.global_batch = rep.global_batch;  // the top's, so every candidate trains the same samples
    if (const auto best = best_of_family(model, cluster, po, family, workers, keep)) {
      c.cands.push_back(candidate_of(*best, std::string("best ") + family));
      c.plans.push_back(best->plan);
    }
  }
  return c;
}

void price_on_profiles(DecideCandidates& c, WorkloadRates& rates, const strategy::ModelSpec& model, int workers,
                       int steps) {
  for (size_t i = 0; i < c.cands.size(); ++i) {
    const PredictionCluster pc = rates.for_plan(c.plans[i], workers);
    c.clusters.push_back(pc.cluster);
    c.simulated.emplace_back();
    if (rates.profiles()) {
      // The simulator, as the scaling and splits experiments predict: on shared cores it shares
      // them out op by op, where the cost model's walk gives every rank its share for the whole
      // step and priced 4-worker pipelines 19-44% slow (a fresh mixed model, stop 58), enough to
      // rank TP 4 over a TP 2 x PP 2 that ran 21% faster.
      sim::SimOptions so;
      so.steps = steps;
      c.simulated.back() = sim::simulate_plan(model, c.plans[i], pc.cluster, so);
      c.cands[i].predicted_step_seconds = c.simulated.back()->step_seconds;
      if (std::find(c.notes.begin(), c.notes.end(), pc.note) == c.notes.end()) c.notes.push_back(pc.note);
    }
  }
  std::vector<size_t> order(c.cands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return c.cands[a].predicted_step_seconds < c.cands[b].predicted_step_seconds;
  });
  DecideCandidates sorted;
  for (size_t i : order) {
    sorted.cands.push_back(c.cands[i]), sorted.plans.push_back(c.plans[i]), sorted.clusters.push_back(c.clusters[i]);
    sorted.simulated.push_back(std::move(c.simulated[i]));
  }
  sorted.notes = std::move(c.notes);
  c = std::move(sorted);
}

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
