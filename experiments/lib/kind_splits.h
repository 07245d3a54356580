#pragma once
// How one split is run for the splits experiment, shared with the decide experiment
// (kind_decide.cpp): the plan at a worker count, and its analytic, simulated and measured runs
// recorded with what the splits table shows of them.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "experiments/lib/runner.h"
#include "runtime/train/memory_report.h"
#include "sim/simulate.h"
#include "strategy/cluster_spec.h"
#include "strategy/ledger.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::experiments {

struct SplitRequest {
  std::string label;                   // progress lines: the plan as the experiment names it
  std::string model_ref, cluster_ref;  // as the experiment file names them (recorded on the runs)
  const strategy::ModelSpec& model;
  const strategy::ClusterSpec& cluster;  // sized to the plan's world
  strategy::Plan plan;                   // resolved and validated
  std::vector<Source> sources;
  int steps = 4;
  uint64_t seed = 1;
  // The simulated source's run where it already ran (on `cluster`, for simulated_steps(steps)
  // steps: the decide experiment's ranking): recorded as it is, not simulated again.
  const sim::SimResult* simulated = nullptr;
};

// How many steps a split's simulated run covers (after its warm-up): the measured steps, at most 3.
inline int simulated_steps(int steps) { return std::min(steps, 3); }

struct SplitRow {
  std::map<Source, double> step, exposed;
  double measured_spread = 0;  // half the interquartile range of the measured steps
  db::RunId measured_run = 0;
  std::map<Source, db::RunId> runs;              // each source's run (the last round's, with rounds)
  std::map<Source, std::vector<double>> rounds;  // each source's step per round (empty: one round)
  double program_wire = 0, measured_wire = -1;
  strategy::MemoryLedger ledger;
  std::optional<train::MemoryReport> measured;  // the rank with the largest measured total
  // Pipelines: bubble fraction by the formula (p-1)/(v m + p-1), simulated (the largest rank's,
  // walked over the step) and measured (mean over ranks, and the largest rank's).
  double bubble_formula = -1, bubble_simulated = -1, bubble_measured = -1, bubble_measured_max = -1;
};

// A plan text at `workers`: dp follows the worker count unless given, the rest resolved.
strategy::Plan split_at(const std::string& text, const strategy::ModelSpec& model, int workers);

// Runs (and records) each of the request's sources for its plan.
SplitRow run_split(Context& ctx, const SplitRequest& request);

}  // namespace parlab::experiments
