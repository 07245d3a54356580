#pragma once
// What the launcher makes of the workers' step records: one line per completed step (every
// rank reported it) and, at the end, the per-rank time table.
//
//   loss of step s          = (sum over ranks of loss_sum) / global_batch    (the global mean)
//   step seconds            = the slowest rank's step_seconds (ranks wait for each other)
//   samples/s               = global_batch / step seconds
//   ETA                     = steps left x the mean step seconds so far
//   per-rank table columns  = mean over steps of each StepTimes field, leaving out step 0 when
//                             there are more (it pays for first-touch allocation and connection
//                             warm-up, as nccl-tests leaves out its warm-up iterations)
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/train/telemetry.h"

namespace parlab::launch {

struct StepSummary {
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t global_batch = 0;
  double loss = 0;
  double step_seconds = 0;  // the slowest rank's own step time
  double end_seconds = 0;   // wall clock when the last rank finished the step (the job's cadence)
  double samples_per_s = 0;
  double eta_seconds = 0;
};

struct RankSummary {
  int rank = 0;
  int64_t steps = 0;  // steps averaged
  train::StepTimes mean;
};

class RunProgress {
 public:
  RunProgress(int world, int64_t steps);

  // Takes one record; returns the summary of its step once every rank has reported it.
  std::optional<StepSummary> add(const train::StepRecord& record);

  int64_t completed_steps() const { return static_cast<int64_t>(done_.size()); }
  const std::vector<StepSummary>& completed() const { return done_; }
  // One row per rank that reported anything (see the header for the averaging rule).
  std::vector<RankSummary> rank_table() const;

 private:
  int world_;
  int64_t steps_;
  std::map<int64_t, std::vector<train::StepRecord>> pending_;  // step -> records so far
  std::map<int, std::vector<train::StepRecord>> by_rank_;
  std::vector<StepSummary> done_;
  double seconds_sum_ = 0;
};

// "step 12/100  loss 1.2345  812.3 samples/s  0.158 s/step  ETA 14 s"
std::string format_progress(const StepSummary& s, int64_t steps);

}  // namespace parlab::launch
