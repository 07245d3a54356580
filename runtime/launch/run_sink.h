#pragma once
// RunSink: where run_training reports what a run did as it goes, so the runtime records a run
// without knowing how it is stored. The results database's recorder (record/run_recorder.h)
// is one; tests may implement it to watch a run. Every call comes from the thread that runs
// run_training, in the order things happened.
#include <cstdint>
#include <optional>
#include <string>

#include "runtime/train/telemetry.h"

namespace parlab::launch {

struct CheckpointReport;
struct IncidentReport;
struct FallbackReport;
struct TrainOutcome;

class RunSink {
 public:
  virtual ~RunSink() = default;
  // Every rank's record of every step (a replayed step reports again).
  virtual void add_step(const train::StepRecord& record) = 0;
  // Written out what add_step buffered (called when an attempt ends).
  virtual void flush() = 0;
  virtual void add_checkpoint(const CheckpointReport& checkpoint) = 0;
  // A resume or the end-of-run verification read the checkpoint back (or failed to).
  virtual void checkpoint_verified(int64_t step, const std::string& path, bool verified) = 0;
  // A resume skipped the checkpoint as unreadable or corrupt.
  virtual void checkpoint_skipped(int64_t step, const std::string& path, const std::string& reason) = 0;
  virtual void add_incident(const IncidentReport& incident) = 0;
  // The fallback plan a repeated failure led to.
  virtual void add_fallback(const FallbackReport& fallback) = 0;
  // The run ended (ok, failed or stopped): its outcome, once.
  virtual void finish(const TrainOutcome& outcome) = 0;
  // The id the run is stored under, when the sink stores it somewhere that has ids.
  virtual std::optional<int64_t> run_id() const { return std::nullopt; }
};

}  // namespace parlab::launch
