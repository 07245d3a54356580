#pragma once
// The planner: "parallelize the resource that actually exceeds its budget, and stop when the
// added communication costs more than the split saves".
//
// It enumerates every valid (dp, tp, pp, zero, microbatch, schedule, recompute, sequence
// parallel) plan for a model, a cluster and a world size at a fixed global batch, drops those
// whose ledger does not fit, ranks the rest by a closed-form step-time estimate (thousands of
// plans per second), re-ranks the best few by walking their step programs (the analytic cost
// model's critical path), and explains the choice in the seed's terms.
#include <optional>
#include <string>
#include <vector>

#include "strategy/cost_model.h"
#include "strategy/ledger.h"
#include "strategy/plan_split.h"

namespace parlab::strategy {

struct PlannerOptions {
  int64_t global_batch = 0;  // 0: the plan policy's for dp = world (strategy::default_global_batch)
  Plan fixed;                // keys named in fixed.given are not searched
  int top = 5;               // candidates reported
  int walk = 24;             // best closed-form candidates re-estimated by walking programs
  int max_tp = 0;            // 0: twice the devices of a node, so the report can show why TP stops at a node
  std::vector<int64_t> microbatch_sizes = {1, 2, 4, 8};
  // "Choose the smallest split": a plan that splits less is preferred unless a bigger split is
  // faster by more than this fraction — the cost model's own uncertainty is larger than that,
  // and a smaller split is cheaper to run and to debug.
  double simplicity_margin = 0.03;
};

// The closed-form estimate, by component (seconds).
struct QuickEstimate {
  double step_seconds = 0;
  double compute_seconds = 0;     // m (t_f + t_b) on the slowest stage
  double tp_comm_seconds = 0;     // tensor-parallel collectives (on the critical path)
  double bubble_seconds = 0;      // (p - 1)/v of one microbatch slot, plus p2p fill latency
  double dp_exposed_seconds = 0;  // data-parallel sync not hidden under the backward pass
  double optimizer_seconds = 0;
};
// Pipeline of m microbatch slots of T = t_f + t_b + TP collectives on the slowest stage:
//   m T + (p - 1) T / v + 2 (p - 1) t_p2p
// plus the data-parallel collectives of that stage not hidden under its last backward (bucket
// b of n starts when its layers are done, so all but ~1/n can overlap), ZeRO-1/2's parameter
// all-gather, ZeRO-3's per-layer gathers beyond the compute they overlap, and the optimizer.
QuickEstimate quick_estimate(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan,
                             const ClusterSpec& cluster);

struct Candidate {
  Plan plan;
  MemoryLedger worst;  // the fullest stage
  QuickEstimate quick;
  std::optional<StepEstimate> walked;
  double step_seconds() const { return walked ? walked->step_seconds : quick.step_seconds; }
};

// One step bigger (or smaller) than the chosen plan along one axis, and what it would cost.
struct SplitComparison {
  std::string label;                 // "TP 8->16"
  bool possible = false;             // a valid plan that fits
  std::string why_not;               // when not possible
  double comm_added_seconds = 0;     // exposed communication, next minus chosen
  double compute_saved_seconds = 0;  // compute + bubble, chosen minus next
  double step_seconds = 0;
  std::string sentence;  // "TP 8->16 adds 3.1 s of ... : stop at 8"
};

struct PlanReport {
  int world = 0;
  int64_t global_batch = 0;
  int64_t evaluated = 0, valid = 0, fitting = 0;
  double search_seconds = 0;
  std::vector<Candidate> top;        // the choice first, then the fastest fitting plans
  std::optional<Candidate> fastest;  // set when the choice is not the fastest (within the margin)
  // What exceeded its budget: the seed's rule on one replica, and plain DDP's ledger.
  RuleInputs rule_inputs;
  RuleVerdict rule;
  std::optional<MemoryLedger> ddp_ledger;
  // The rule baseline's own choice, estimated the same way.
  std::string rule_choice_name;
  std::optional<Candidate> rule_choice;
  std::string rule_choice_problem;          // why it has no estimate (does not fit, invalid)
  std::optional<Candidate> smallest_split;  // the fitting plan that splits least
  std::vector<SplitComparison> neighbours;  // next larger / smaller splits of the choice
  std::vector<std::string> explanation;     // the choice in the seed's words
};

// `cluster` must be sized to the world (with_world). Throws ConfigError when nothing can be
// searched (e.g. a global batch no plan divides).
PlanReport search_plans(const ModelSpec& model, const ClusterSpec& cluster, const PlannerOptions& options);

}  // namespace parlab::strategy
