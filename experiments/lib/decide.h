#pragma once
// The decide experiment's arithmetic, apart from the runs it needs: which family a plan is of,
// and from the candidates' predicted and measured step times the planner's regret and the rank
// correlation (both from strategy/measures.h).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/simulate.h"
#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"
#include "strategy/plan_split.h"
#include "strategy/planner.h"

namespace parlab::experiments {

// "pipeline" (pp > 1), else "tensor" (tp > 1), else "ZeRO" (stage > 0), else "DDP".
using strategy::plan_family;  // strategy/plan_split.h
inline const char* const kPlanFamilies[] = {"DDP", "ZeRO", "tensor", "pipeline"};

struct DecideCandidate {
  std::string plan;    // strategy::Plan::to_string
  std::string name;    // short name
  std::string family;  // plan_family
  std::string origin;  // "top 1".."top K", or "best <family>"
  // The price the choice is made on: the cost model's walk on this workload's profile where the
  // machine is a calibrated cpu-local (predict_cluster.h), else the planner's own.
  double predicted_step_seconds = 0;
  double planner_step_seconds = 0;  // the planner's price (its walked estimate on the cluster as loaded)
  double global_batch = 0;
  std::optional<double> measured_step_seconds;
  double measured_spread_seconds = 0;
  std::optional<long long> measured_run;
  std::string not_run;  // why it has no measurement (the runtime refused it, the run failed)
};

class WorkloadRates;  // experiments/lib/predict_cluster.h

// The candidates a choice is made among, each with its plan and the cluster it is priced on.
struct DecideCandidates {
  std::vector<DecideCandidate> cands;
  std::vector<strategy::Plan> plans;
  std::vector<strategy::ClusterSpec> clusters;  // each priced on its own profile (price_on_profiles)
  // Each candidate's simulation on that profile (price_on_profiles; empty without profiles): its
  // prediction, which the decide experiment records as the candidate's simulated run.
  std::vector<std::optional<sim::SimResult>> simulated;
  std::vector<std::string> notes;  // the compute models used, one sentence each
};

// The planner's top (`rep`, searched with `po`), then the plan of each family the top lacks
// (DDP, ZeRO, tensor, pipeline) that the planner prices fastest, at the top's global batch.
// `keep`: plan keys every family's search keeps fixed besides its own axis ("" for none).
DecideCandidates gather_candidates(const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                                   strategy::PlannerOptions po, const strategy::PlanReport& rep, int workers,
                                   const std::string& keep);

// The seed's "benchmark a small topology before scaling": on a calibrated cpu-local each
// candidate is simulated again on a profile of its own rank shape run by as many processes as it
// has workers (predict_cluster.h) -- the planner's cluster knows one compute rate for every
// shape and no waits at the meetings of ranks that share cores -- and the candidates are sorted
// by that prediction (stable: ties keep the planner's order), so candidate 0 is the choice so
// priced. Each is simulated for `steps` steps (after the warm-up).
// Without profiles (another cluster, another model) the planner's prices stay.
void price_on_profiles(DecideCandidates& c, WorkloadRates& rates, const strategy::ModelSpec& model, int workers,
                       int steps = 3);

// Candidate 0 is the planner's first choice.
struct Decision {
  int measured = 0;                // candidates with a measurement
  std::optional<size_t> fastest;   // the fastest measured candidate
  std::optional<double> regret;    // of candidate 0 against the fastest (needs candidate 0 measured)
  std::optional<double> spearman;  // predicted vs measured step times over the measured (needs 2)
};

Decision decide(const std::vector<DecideCandidate>& candidates);

// The proof's evidence rows and back (the grader reads the same keys, rubric/checks_decide.cpp).
nlohmann::json to_json(const DecideCandidate& c);

}  // namespace parlab::experiments
