#pragma once
// What the job runner (run_training.h) makes of a failed attempt and of the ranks' timings: the
// culprit of a hang, and stragglers. Separate from the runner so each rule reads on its own.
//
// A hang's culprit, in this order (detectors.h):
//   1. a rank the supervisor failed for its silence (heartbeat): it stopped, the others waited;
//   2. the rank the flight-recorder analyzer names: the first collective where the ranks'
//      records disagree (diagnose/hang_analysis.h), from the dumps in <run_dir>/flight;
//   3. the supervisor's root cause (the earliest to report).
// The injected fault, if any, is only quoted and used to time detection: naming the culprit is
// the detectors' job, and a test that compares their answer with the injected rank checks them.
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/diagnose/straggler.h"
#include "runtime/launch/run_training.h"
#include "runtime/launch/supervisor.h"

namespace parlab::launch {

// Whether the attempt ended in a hang: a rank's collective timed out (its error record says
// "kind": "hang") or a rank was failed for its silence.
bool is_hang(const SupervisorResult& result);

// Fills kind "hang", rank, detector, detector_timeout_seconds, collective and analysis of an
// incident from the attempt's result and the flight-recorder dumps under `run_dir` (see above).
void classify_hang(IncidentReport& incident, const SupervisorResult& result, const std::filesystem::path& run_dir,
                   const TrainJob& job);

// Per-rank compute of one attempt, checked every `window` completed steps.
class StragglerWatch {
 public:
  explicit StragglerWatch(diagnose::StragglerOptions options) : options_(options) {}
  void add(const train::StepRecord& record);
  // After a step every rank completed (`completed` steps in this attempt, `step` its number):
  // at each window's end, the sentences of ranks that newly became stragglers over the latest
  // kStragglerRecentWindows windows (detectors.h).
  std::vector<std::string> on_step(int64_t completed, int64_t step);
  // Over every step of the attempt: one incident (kind straggler) per straggler, at the step it
  // was first flagged (or the attempt's last). Empty with fewer than one window of steps.
  std::vector<IncidentReport> incidents(int attempt) const;

 private:
  diagnose::StragglerOptions options_;
  std::vector<diagnose::RankTiming> timings_;
  std::map<int, int64_t> flagged_at_;  // rank -> step first flagged
};

}  // namespace parlab::launch
