#pragma once
// The decide experiment's arithmetic, apart from the runs it needs: which family a plan is of,
// and from the candidates' predicted and measured step times the planner's regret and the rank
// correlation (both from strategy/measures.h).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "strategy/plan.h"
#include "strategy/plan_split.h"

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
