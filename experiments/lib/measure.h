#pragma once
// Measured runs for experiments: a plan trained for real by Gloo worker processes, its timings
// recorded in the results database.
#include <filesystem>
#include <string>
#include <vector>

#include "experiments/lib/runner.h"
#include "runtime/launch/progress.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/telemetry.h"
#include "strategy/plan.h"
#include "base/stats.h"

namespace parlab::experiments {

// Steps trained before the measured ones (page faults, rendezvous, cold caches), and the fewest
// steps a measured step time is the median of.
inline constexpr int kWarmupSteps = 1;
inline constexpr int kMinMeasuredSteps = 5;

struct MeasureRequest {
  std::string model;
  strategy::Plan plan;  // resolved; dp x tp x pp workers
  int steps = 10;       // measured steps (at least kMinMeasuredSteps), after kWarmupSteps
  uint64_t seed = 1;
  std::filesystem::path work_dir;
  std::string parlab_bin;
};

struct MeasureResult {
  double step_seconds = 0;         // median over the measured steps (warm-up left out)
  double step_spread_seconds = 0;  // half their interquartile range
  int steps_measured = 0;
  db::RunId run = 0;
  double exposed_comm_seconds = 0;  // per step, the mean over ranks (step 0 left out)
  // Per rank, the bytes its collectives put on the wire per step: each recorded call's bytes
  // (nccl-tests convention) times its bus-bandwidth factor (strategy/collectives.h), so an
  // all-reduce of S counts 2(n-1)/n S, a reduce-scatter or all-gather (n-1)/n S.
  std::vector<double> wire_bytes_per_step;
  std::vector<train::MemoryReport> memory;  // per rank: peaks by category beside the ledger
  // Pipelines: the idle share of each step's pipeline span (train::measured_bubble).
  train::MeasuredBubble bubble;
};

MeasureResult measure_plan(Context& ctx, const MeasureRequest& request);

// The k-th of n plans a round runs: first to last in even rounds, last to first in odd ones, so a
// stretch in which the machine slowed lands on different plans in different rounds.
inline size_t in_round_order(size_t k, size_t n, int round) { return round % 2 == 1 ? n - 1 - k : k; }

// A plan measured in rounds (scaling, splits, decide; the splits' per-round predictions too): its
// step is the median of the rounds' steps, its spread the larger of the rounds' own (their median) and the rounds'
// range / 2 (the machine's drift between them). Recorded on `run`, the last round's, as rounds.* metrics
// (strategy::round_step_metric each, rounds.step_seconds, rounds.step_seconds_spread), where
// compare and the CPU table read them.
parlab::Spread record_measured_rounds(db::ResultsStore& store, db::RunId run, const std::vector<double>& steps,
                                      const std::vector<double>& spreads);

// Any source's rounds of one plan (scaling and splits predict afresh in each round): a
// measurement's as record_measured_rounds, with each round's own spread; a prediction's spread is
// its rounds' range / 2 alone (it has no steps of its own; `spreads` is not read).
parlab::Spread record_source_rounds(db::ResultsStore& store, Source source, db::RunId run,
                                    const std::vector<double>& steps, const std::vector<double>& spreads);

// The measured step time of a run: per step after the warm-up, the time from the moment the last
// rank finished the step before to the moment the last rank finished this one -- the job's
// cadence, what its throughput is -- and the median and spread of those. Not the slowest rank's
// own step time: ranks that share cores finish a step at different moments (whoever the
// scheduler runs first), and each rank's next step starts when its own last one ended, so the
// largest of their step times is larger than the period the job keeps (by 4-5% on 3 and 4
// workers of 2 cores). A step whose predecessor is missing, or a run without end times, counts
// its slowest rank's step time.
parlab::Spread measured_step_seconds(const std::vector<launch::StepSummary>& steps);

}  // namespace parlab::experiments
