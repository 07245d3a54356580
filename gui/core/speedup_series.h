#pragma once
// The speedup view's numbers, each from the library that owns it: analytic step times from
// strategy::estimate_step, simulated ones from sim::simulate_plan (filled in later, off the UI
// thread), measured ones from the results DB, and the scaling lab's closed form.
//
//   speedup(W)    = throughput_W / throughput_W1 = (gbs_W / t_W) / (gbs_1 / t_1)
//   efficiency(W) = speedup(W) / (W / W1)
// computed by strategy/measures.h, as `parlab compare`, the batch runner and the grader do: a
// measured speedup is the median of paired per-round ratios where both points carry rounds.
// A row is one plan: the setup's split at W workers, keyed by the whole plan's text.
#include <optional>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"
#include "strategy/scaling_lab.h"

namespace parlab::gui {

enum class SeriesSource { kAnalytic = 0, kSimulated = 1, kMeasured = 2 };
inline constexpr int kSeriesSources = 3;

struct SpeedupPoint {
  std::string plan;  // the whole plan at this row (strategy::Plan::to_string): the row's key
  int workers = 1;
  double global_batch = 0;
  std::optional<double> step_seconds[kSeriesSources];
  std::optional<long long> measured_run;    // the DB run a measured point came from
  std::optional<double> measured_spread;    // the measurement's +- (seconds), beside each error
  std::vector<double> measured_rounds;      // per-round step times when the run closed a series
  std::optional<double> predicted_speedup;  // the learner's latest prediction at this W
};

// Speedup and efficiency of `source` at row `i`, against the first row that has that source.
std::optional<double> speedup_of(const std::vector<SpeedupPoint>& rows, size_t i, SeriesSource source);
std::optional<double> efficiency_of(const std::vector<SpeedupPoint>& rows, size_t i, SeriesSource source);
// A prediction's relative error against the measured step (pred / measured - 1).
std::optional<double> step_error(const SpeedupPoint& row, SeriesSource prediction);

// One row per series_workers() count, with the analytic step time filled in.
std::vector<SpeedupPoint> analytic_series(const LabSetup& setup);

// The scaling lab's rows (the chapter's 120 ms example with the defaults), as the same points:
// its step time is the analytic source.
std::vector<SpeedupPoint> scaling_lab_series(const strategy::ScalingLabInputs& inputs);

}  // namespace parlab::gui
