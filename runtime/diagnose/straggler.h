#pragma once
// Naming a straggler from per-rank timings. In synchronous data parallelism every step waits for
// the slowest rank at the gradient all-reduce, so one slow rank costs every other rank its extra
// compute time, every step.
//
// The statistic (robust to noise and to the straggler itself): over a window of steps, each
// rank's median compute time m_r; for rank r, the median M and median absolute deviation MAD of
// the OTHER ranks' medians; the modified z-score z = (m_r - M) / (1.4826 MAD) (Iglewicz and
// Hoaglin 1993; 1.4826 makes MAD estimate a normal standard deviation), with the scale floored
// at 5% of M so a very tight cluster does not turn a 1% wobble into an alarm. A rank is flagged
// in a window when z > 3.5 AND m_r > 1.5 M: both an outlier and materially slower. With two
// ranks there is one "other", MAD is 0 and the floor applies — the ratio test carries the
// decision. It is a straggler when it is flagged persistently: in at least 2 windows and at
// least half of them (a rank descheduled for one window on a shared machine is not one).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace parlab::diagnose {

struct RankTiming {
  int64_t step = 0;
  int rank = 0;
  double compute_seconds = 0;  // forward + backward (+ optimizer): the rank's own work
  double step_seconds = 0;
};

struct StragglerOptions {
  int window = 20;  // steps per window (a last window under half of it joins the previous)
  double z_threshold = 3.5;
  double ratio_threshold = 1.5;
  double scale_floor = 0.05;         // of M
  int min_windows = 2;               // flagged in at least this many windows
  double min_window_fraction = 0.5;  // and at least this fraction of the windows
  // And only where it costs the others something: its extra compute at least this fraction of
  // the window's median step. A rank that another process on its core slowed for a moment (a
  // 1.55x wobble on a 50 us compute, 5% of a 0.8 ms step) is not named; the slow fault of the
  // tests (3x, 19-22% of the step) is.
  double min_cost_fraction = 0.10;
};

struct Straggler {
  int rank = 0;
  int windows_flagged = 0;
  double compute_seconds = 0;        // the rank's median compute in its worst window
  double others_median_seconds = 0;  // M
  double ratio = 0;                  // m_r / M
  double z = 0;
  double cost_seconds_per_step = 0;  // what every other rank waits per step: m_r - M
  double cost_fraction = 0;          // of the median step time
  std::string sentence;
};

struct StragglerReport {
  int64_t steps = 0;
  int ranks = 0;
  int windows = 0;
  std::vector<Straggler> stragglers;  // empty: no straggler
  std::string method;                 // the statistic, in one line
  std::string summary() const;
};

StragglerReport detect_stragglers(const std::vector<RankTiming>& timings, const StragglerOptions& options = {});

// Per-rank timings from a run directory's rank-<r>.jsonl records ({"type": "step", "rank",
// "step", "forward_seconds", "backward_seconds", "optimizer_seconds", "step_seconds", ...}, as
// the training workers write them). A step replayed after a restart keeps its last record.
std::vector<RankTiming> timings_from_run_dir(const std::filesystem::path& dir);

}  // namespace parlab::diagnose
