#pragma once
// The chapter's three measures, in every report:
//   decision utility   the model's choice against the best plan measured on this machine among
//                      the same candidates: the decide experiment's splits (the planner's first
//                      choice), else the worker counts of the latest scaling report (the one the
//                      simulated, else analytic, step time puts first); regret = 1 -
//                      throughput(choice) / throughput(best), in percent (strategy/measures.h)
//   slice reliability  pass rate of proofs per slice: proof kind x split x worker count
//   system latency     measured step time per worker count; restart latency (fault -> training
//                      again) p50 and max over recorded incidents; detection time p50 and max
#include <optional>
#include <string>
#include <vector>

#include "rubric/evidence.h"
#include "base/stats.h"

namespace parlab::rubric {

struct DecisionUtility {
  std::string experiment;
  std::string chosen, best;  // candidate labels ("2 workers")
  std::string chosen_by;     // "simulated" | "analytic"
  double chosen_samples_per_s = 0, best_samples_per_s = 0;
  double regret_percent = 0;
  int candidates = 0;
  std::int64_t proof = 0;
};

struct SliceRow {
  std::string proof_kind, split;
  int workers = 0;
  int passed = 0, total = 0;
  double rate() const { return total ? double(passed) / total : 0; }
};

struct LatencyRow {
  int workers = 0;
  double step_seconds = 0;
};

struct Measures {
  std::optional<DecisionUtility> decision;
  std::vector<SliceRow> slices;
  std::vector<LatencyRow> step_times;  // measured, per worker count
  int restarts = 0;
  std::optional<double> restart_p50_seconds, restart_max_seconds;
  int detections = 0;
  std::optional<double> detection_p50_seconds, detection_max_seconds;
};

Measures compute_measures(const Evidence& evidence);

// Median of a list (mean of the middle two for an even count): the tree's one definition.
using parlab::median;

}  // namespace parlab::rubric
