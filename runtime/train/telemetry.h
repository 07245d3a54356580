#pragma once
// What a training rank measures, and where it goes.
//
// Per rank and optimizer step the executor and the trainer measure, on the rank's main thread:
//
//   step_seconds = data + forward + backward + exposed_comm + optimizer + idle
//
//   data          filling the microbatches (sampler indices -> SyntheticDataset)
//   forward       forward ops of the step program
//   backward      backward ops (gradient accumulation included)
//   exposed_comm  the main thread blocked on communication: waiting for a comm op a compute op
//                 depends on (the optimizer waits for every bucket), for compute-stream
//                 collectives, and for the comm stream to drain at the end of the step
//   optimizer     the optimizer op(s)
//   idle          everything else (bookkeeping; pipeline bubbles once PP runs here)
//
// comm_seconds is the communication stream's busy time (every collective's duration, overlapped
// or not), so  hidden fraction = 1 - exposed_comm / comm  says how much of the gradient
// all-reduce ran under the backward pass.
//
// Events use the simulator's event schema (rank, stream, op, tag, start, end): they become the
// same Chrome trace (trace/trace.h) a simulated timeline does. Times are wall-clock seconds since
// the Unix epoch, the clock the communicator's flight recorder uses, so ranks on one host line up.
//
// A TelemetrySink receives every step record. JsonlSink is the supervisor's progress channel; the
// results database plugs in later as another sink (db/ needs nothing else from the trainer).
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "trace/trace.h"

namespace parlab::train {

// One op's measured interval on one rank.
struct OpEvent {
  int rank = 0;
  int64_t step = 0;
  int op_id = -1;                             // index in the rank's StepProgram; -1 for work outside it ("data")
  std::string stream;                         // "compute" | "comm"
  std::string op;                             // "forward", "backward", "optimizer", "all-reduce", "data", ...
  std::string tag;                            // "fwd.mb0.c0", "grad.bucket3", ...
  std::string group;                          // collectives: "dp.0"
  double bytes = 0;                           // collectives: bytes per call (nccl-tests convention)
  double start_seconds = 0, end_seconds = 0;  // wall clock, seconds since the Unix epoch
  std::string phase;                          // pipeline compute: "warmup", "steady" or "cooldown" (empty otherwise)
};

struct StepTimes {
  double data_seconds = 0;
  double forward_seconds = 0;
  double backward_seconds = 0;
  double exposed_comm_seconds = 0;
  double optimizer_seconds = 0;
  double idle_seconds = 0;
  double step_seconds = 0;
  double comm_seconds = 0;  // busy time of the collectives (not part of the sum above)
};

struct StepRecord {
  int rank = 0;
  int world = 1;
  int64_t step = 0;  // 0-based optimizer step
  int64_t epoch = 0;
  int64_t global_batch = 0;  // samples of this step over all ranks (short at an epoch's end)
  int64_t samples = 0;       // this rank's share
  double loss_sum = 0;       // sum of this rank's per-sample losses; global mean loss =
                             // (sum over ranks of loss_sum) / global_batch
  StepTimes times;
  // Wall clock (seconds since the Unix epoch) when the step ended: a supervisor measures restart
  // latency up to the first step completed after a restart with it.
  double end_seconds = 0;
  // Dataset indices this rank trained on, in batch order (TrainerOptions::record_samples): lets a
  // test or an audit check that no sample is skipped or repeated across a restart.
  std::vector<int64_t> sample_indices;
  std::vector<OpEvent> events;
};

class TelemetrySink {
 public:
  virtual ~TelemetrySink() = default;
  virtual void on_step(const StepRecord& record) = 0;
};

// Keeps every record (tests, benchmarks). Thread-safe, so threads-as-ranks may share one.
class MemorySink final : public TelemetrySink {
 public:
  void on_step(const StepRecord& record) override;
  std::vector<StepRecord> records() const;
  // Records of one rank, in step order.
  std::vector<StepRecord> records_of(int rank) const;

 private:
  mutable std::mutex mu_;
  std::vector<StepRecord> records_;
};

// One JSON line per step (to_json without events), flushed at once, to `path` (truncated on
// open); when `events_path` is set, the step's events go there, one JSON line per step.
// Throws RuntimeError when a file cannot be opened.
class JsonlSink final : public TelemetrySink {
 public:
  explicit JsonlSink(const std::filesystem::path& path, const std::filesystem::path& events_path = {});
  void on_step(const StepRecord& record) override;
  // Any other record ({"type": "checkpoint", ...}) into the same file, flushed at once: one
  // writer per file, so lines never overwrite each other.
  void write_line(const nlohmann::json& line);

 private:
  std::ofstream out_, events_;
};

// Several sinks as one.
class FanoutSink final : public TelemetrySink {
 public:
  void add(TelemetrySink* sink) { sinks_.push_back(sink); }
  void on_step(const StepRecord& record) override;

 private:
  std::vector<TelemetrySink*> sinks_;
};

// {"type": "step", "rank", "world", "step", "epoch", "global_batch", "samples", "loss_sum",
//  "data_seconds", ..., "comm_seconds", "end_seconds" [, "sample_indices": [...]]
//  [, "events": [{...}]]}
nlohmann::json to_json(const StepRecord& record, bool with_events);
nlohmann::json to_json(const OpEvent& event);
// Inverse of to_json; missing "events" leaves them empty. Throws ConfigError on a malformed record.
StepRecord step_record_from_json(const nlohmann::json& j);
OpEvent op_event_from_json(const nlohmann::json& j);

// Events as Chrome-trace events, times shifted so that `origin_seconds` is 0.
// Names are "<op> <tag>", as the simulator names its events.
std::vector<trace::Event> to_trace_events(std::span<const OpEvent> events, double origin_seconds);
// Writes the measured timeline of `events` (any ranks, any steps) as a Chrome trace, time 0 at
// the earliest event. Throws RuntimeError when the file cannot be written.
void write_measured_trace(const std::string& path, std::span<const OpEvent> events,
                          const std::string& title = "parlab train (measured)");

// The pipeline bubble as measured: per step (step 0 left out when there are more), the pipeline
// span T runs from the first forward of any rank to the last backward's end; a rank's bubble is
// 1 - (its forward and backward time) / T, the idle share of the span. With equal stages that
// is the formula's (p - 1)/(v m + p - 1) (Narayanan et al. 2021). Averaged over ranks and steps;
// `max_rank` is the largest rank's mean. Zero when the events hold no forward or backward.
struct MeasuredBubble {
  double mean = 0;
  double max_rank = 0;
  int steps = 0;
};
MeasuredBubble measured_bubble(std::span<const OpEvent> events);

}  // namespace parlab::train
