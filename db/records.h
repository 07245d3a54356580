#pragma once
// The rows of the results database as plain values. Names follow the columns of db/schema.sql;
// durations are seconds, sizes bytes, rates bytes_per_s. Timestamps are UTC ISO-8601 text
// ("2026-11-29T08:50:42.123Z"); an empty timestamp in a New* struct means "now".
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace parlab::db {

using ExperimentId = std::int64_t;
using RunId = std::int64_t;

// How a run's numbers came about: a closed-form estimate, a SimGrid simulation, or a real job.
enum class RunKind { kAnalytic, kSimulated, kMeasured };
enum class RunStatus { kRunning, kCompleted, kFailed, kKilled };
// What went wrong in an incident. kCrash: a rank exited on its own (signal, abort, non-zero
// status); kKilled: a rank was killed on purpose (fault injection, operator); kHang: the
// watchdog or a heartbeat timed out; kStraggler: a rank fell persistently behind; kNan: the loss
// or a gradient became non-finite; kCheckpointCorrupt: a checkpoint failed verification.
enum class IncidentKind { kCrash, kKilled, kHang, kStraggler, kNan, kOom, kNetwork, kCheckpointCorrupt, kOther };

// The spellings stored in the database ("analytic", "completed", "checkpoint_corrupt", ...).
std::string_view to_string(RunKind kind);
std::string_view to_string(RunStatus status);
std::string_view to_string(IncidentKind kind);
// Inverse of to_string; throws ConfigError naming `field`, the text and the allowed spellings.
RunKind parse_run_kind(std::string_view text, std::string_view field = "run.kind");
RunStatus parse_run_status(std::string_view text, std::string_view field = "run.status");
IncidentKind parse_incident_kind(std::string_view text, std::string_view field = "incident.kind");

struct NewExperiment {
  std::string name{};         // unique; the key experiments are found by
  std::string file{};         // the *.toml it came from, as the user named it
  std::string description{};  // its header: what a learner should notice
};

struct ExperimentRecord {
  ExperimentId id = 0;
  std::string name{}, file{}, description{}, created_at{};
};

struct NewRun {
  std::optional<ExperimentId> experiment{};
  RunKind kind = RunKind::kAnalytic;
  std::string model{};                             // preset name or model file
  std::string cluster{};                           // preset name or cluster file
  nlohmann::json plan = nlohmann::json::object();  // the strategy::Plan as JSON
  int world_size = 1;
  std::uint64_t seed = 0;
  std::string software_version{};  // empty: this build's parlab::kVersion
  std::string notes{};
  // The process that owns the run and will mark it finished; if it dies first, the stale-run
  // sweep marks the run killed. Unset: the calling process (with this host's name).
  std::optional<std::int64_t> owner_pid{};
  std::optional<std::int64_t> owner_pid_start_ticks{};  // from /proc/<pid>/stat; guards pid reuse
  std::optional<std::string> host{};
};

struct RunRecord {
  RunId id = 0;
  std::optional<ExperimentId> experiment{};
  RunKind kind = RunKind::kAnalytic;
  std::string model{}, cluster{};
  nlohmann::json plan{};
  int world_size = 1;
  std::uint64_t seed = 0;
  std::string software_version{};
  RunStatus status = RunStatus::kRunning;
  std::string started_at{};
  std::optional<std::string> ended_at{};
  std::string host{};
  std::optional<std::int64_t> pid{}, pid_start_ticks{};
  std::string notes{};
};

// One rank's optimizer step. step_seconds is the step's wall time; the parts need not add up to
// it because overlapped communication is not exposed. loss is absent where none exists.
struct StepTiming {
  std::int64_t step = 0;
  int rank = 0;
  double data_seconds = 0, forward_seconds = 0, backward_seconds = 0, exposed_comm_seconds = 0, optimizer_seconds = 0,
         idle_seconds = 0;
  double step_seconds = 0;
  std::optional<double> loss{};
  std::int64_t samples = 0;
  std::optional<double> end_seconds{};  // when the rank finished the step (measured runs)
};

// One collective or point-to-point op as one rank saw it. op uses strategy::to_string spellings
// ("all-reduce", "reduce-scatter", "all-gather", "broadcast") plus "reduce", "all-to-all",
// "send", "recv", "barrier". bytes follows nccl-tests (strategy/collectives.h); group_ranks is
// the n of the bus-bandwidth factor.
struct CollectiveRecord {
  int rank = 0;
  std::int64_t seq = 0;  // this rank's call counter within the run
  std::string op{};
  std::string group_name = "world";
  std::int64_t bytes = 0;
  int group_ranks = 1;
  std::optional<double> start_seconds{};  // since the run's clock origin, when known
  double seconds = 0;
  std::optional<double> algbw_bytes_per_s{}, busbw_bytes_per_s{};
  std::string tag{};  // the tensor or bucket it moved
};

struct CheckpointRecord {
  std::int64_t id = 0;  // filled by queries; ignored on insert
  std::int64_t step = 0;
  std::string path{};
  std::string checksum{};  // e.g. "xxh3:0123abcd..."
  std::int64_t bytes = 0;
  double save_seconds = 0;
  bool verified = false;
  std::string created_at{};
};

struct IncidentRecord {
  std::int64_t id = 0;  // filled by queries and add_incident; ignored on insert
  IncidentKind kind = IncidentKind::kOther;
  std::optional<int> rank{};           // absent: the whole job
  std::optional<std::int64_t> step{};  // the step it happened in, when known
  std::string detail{};
  std::string detected_at{};                  // empty on insert: now
  std::optional<double> detection_seconds{};  // fault -> detected
  std::optional<double> restart_seconds{};    // detected -> training again
  std::optional<std::int64_t> steps_lost{};   // steps redone after resuming
};

// A checked claim with what it was checked on and the evidence, for the rubric grader.
struct ProofRecord {
  std::int64_t id = 0;         // filled by queries and add_proof; ignored on insert
  std::optional<RunId> run{};  // at least one of run and experiment is set
  std::optional<ExperimentId> experiment{};
  std::string kind{};  // e.g. "kill_resume_bitwise", "sim_matches_measured_bytes"
  nlohmann::json inputs = nlohmann::json::object();
  std::string result{};  // one line a person reads
  bool passed = false;
  nlohmann::json evidence = nlohmann::json::object();
  std::string created_at{};
};

struct CalibrationRecord {
  std::int64_t id = 0;
  std::string machine{};
  std::string created_at{};
  nlohmann::json json{};
};

// A learner's prediction made before a result was revealed (the desktop lab's "predict, then
// reveal"; the rubric credits rows whose predicted_at precedes revealed_at).
struct NewPrediction {
  std::optional<RunId> run{};
  std::optional<ExperimentId> experiment{};
  std::string learner{};
  std::string quantity = "speedup";      // what was predicted: "speedup", "step_seconds", ...
  RunKind source = RunKind::kSimulated;  // what will reveal it
  std::string model{}, cluster{};
  nlohmann::json plan = nlohmann::json::object();
  int world_size = 1;
  double predicted = 0;
  std::string reason{};  // the learner's sentence why
};

struct PredictionRecord {
  std::int64_t id = 0;
  std::optional<RunId> run{};
  std::optional<ExperimentId> experiment{};
  std::string learner{}, quantity{};
  RunKind source = RunKind::kSimulated;
  std::string model{}, cluster{};
  nlohmann::json plan{};
  int world_size = 1;
  double predicted = 0;
  std::string reason{}, predicted_at{};
  std::optional<double> revealed{};
  std::optional<std::string> revealed_at{};
};

}  // namespace parlab::db
