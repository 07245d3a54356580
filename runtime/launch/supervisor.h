#pragma once
// The supervisor: starts N worker processes on this machine, watches them, and tears all of them
// down when one fails. One Supervisor runs one attempt of a job; run_training (run_training.h)
// restarts the job from its latest checkpoint with a new Supervisor per attempt.
//
//   spawn     one ChildProcess per rank (posix_spawn of `argv`), each in its own process group,
//             stdout+stderr to run_dir/rank-<r>.log, environment as torchrun sets it:
//               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE   (this machine: local = global)
//               PARLAB_RENDEZVOUS_DIR = run_dir/rendezvous      (a file store: no port to pick)
//               PARLAB_RUN_DIR, PARLAB_SUPERVISOR_PID           (workers die with the supervisor)
//               PARLAB_ATTEMPT = attempt                         (rendezvous keys per attempt)
//               PARLAB_STORE_TOKEN = a fresh random token         (per launch; comm/store_token.h)
//               PARLAB_SHM_PREFIX = <ours, or parlab>.<pid>.<attempt>.<random>  (shared-memory names)
//               OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = 1      (one BLAS thread per rank)
//   monitor   every `poll`: waitpid(WNOHANG) on each worker, and tail the progress channel, the
//             JSON lines each worker appends to run_dir/rank-<r>.jsonl (one per step, see
//             runtime/train/telemetry.h), handing every new record to on_record.
//             Other lines ({"type": "checkpoint"|"resume"|"fault"|...}) go to on_message.
//   health    a worker can be unhealthy while still running (no heartbeat, a stuck collective):
//             with a heartbeat timeout, a running rank whose run_dir/rank-<r>.heartbeat is older
//             than it fails as a hang (liveness.h, detectors.h); the `unhealthy` hook is asked
//             every poll about each running worker, with the seconds since its last line; a
//             reason it returns fails that worker like an exit.
//   culprit   the root cause of a failure is a rank that failed by itself (not on communication);
//             else a running rank that went silent (no heartbeat for silent_after()) while the
//             others failed on communication: they waited for it; else the earliest to report.
//   teardown  a worker that exits non-zero or dies from a signal, an unhealthy one, or
//             request_stop() stops the rest: SIGTERM to each process group, SIGKILL after
//             `grace`, every child reaped, and any shared-memory segment still named under this
//             launch's PARLAB_SHM_PREFIX removed (a rank killed while connecting). Files in run_dir stay as the workers
//             wrote them; a later attempt moves them to run_dir/attempt-<k>/ before starting.
//
// RAII: destroying a Supervisor kills and reaps any worker still running, so even an exception
// in the launcher leaves no orphan; workers additionally ask the kernel to kill them if the
// supervisor dies (worker.h, follow_supervisor()).
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/launch/process.h"
#include "runtime/train/telemetry.h"

namespace parlab::launch {

struct SupervisorOptions {
  std::vector<std::string> argv;  // the worker command; argv[0] is a path
  int nproc = 1;
  std::filesystem::path run_dir;           // created if missing
  std::map<std::string, std::string> env;  // extra variables for every worker
  std::chrono::milliseconds grace{3000};   // SIGTERM -> SIGKILL
  std::chrono::milliseconds poll{50};
  // After the first failure, how long to let other workers that are already failing exit on
  // their own before tearing down: the worker that lost a peer often dies first, and the root
  // cause must not be mistaken for a rank "stopped" by the teardown.
  std::chrono::milliseconds settle{300};
  // Every step record as it arrives (ranks interleaved, each rank's in step order). Runs on the
  // thread that called wait().
  std::function<void(const train::StepRecord&)> on_record;
  // Called every poll with no new record (a progress line can refresh its clock).
  std::function<void()> on_tick;
  // Every other JSON line a worker writes (types other than "step"; "error" included), parsed.
  std::function<void(const nlohmann::json&)> on_message;
  // Health beyond the exit status: asked every poll for each running rank, with the seconds since
  // that rank's last line (or since it started). A non-empty reason fails the rank.
  std::function<std::string(int rank, double seconds_since_last_line)> unhealthy;
  // The heartbeat detector (0: off): a running rank whose heartbeat file is older than this fails
  // as a hang. Before its first beat a rank is allowed `first_beat` (0: heartbeat_timeout).
  std::chrono::milliseconds heartbeat_timeout{0};
  std::chrono::milliseconds first_beat{0};
  // Which attempt of the job this is (0 first): PARLAB_ATTEMPT for the workers' rendezvous; > 0
  // moves the previous attempt's per-rank files to run_dir/attempt-<attempt - 1>/.
  int attempt = 0;
};

struct WorkerExit {
  int rank = 0;
  ExitStatus status;
  bool stopped = false;   // ended by the teardown, not on its own
  std::string unhealthy;  // why the health hook or the heartbeat failed it (empty: they did not)
  bool silent = false;    // failed by the heartbeat detector, or named the culprit for its silence
  // Its {"type": "error", ...} record (null: none): a collective timeout's has "kind": "hang" and
  // the op, seq, group, tag, bytes and timeout_seconds.
  nlohmann::json error;
  // Seconds since its last heartbeat when the failure was noticed (negative: no heartbeat file).
  double heartbeat_age_seconds = -1;
};

struct SupervisorResult {
  bool ok = false;           // every worker exited with code 0
  bool interrupted = false;  // request_stop() ended the run
  // The root cause among the workers that ended abnormally (-1: none): one that did not fail
  // on communication (a peer's death makes the others fail too), else the earliest to report.
  int failed_rank = -1;
  std::vector<WorkerExit> exits;  // by rank
  // For people: "rank 1 exited with code 3: <its error>; stopped ranks 0, 2 (SIGTERM, then
  // SIGKILL after 3.0 s)", followed by the last lines of that rank's log.
  std::string message;
  // Wall clock (seconds since the Unix epoch, the workers' clock): workers spawned, the first
  // failure noticed, every worker reaped after the teardown (0 when there was none).
  double started_seconds = 0;
  double detected_seconds = 0;
  double stopped_seconds = 0;
};

// run_dir/rank-<r>.jsonl, .log and (traces) .events.jsonl.
std::filesystem::path rank_records_path(const std::filesystem::path& run_dir, int rank);
std::filesystem::path rank_log_path(const std::filesystem::path& run_dir, int rank);
std::filesystem::path rank_events_path(const std::filesystem::path& run_dir, int rank);

// Every event the workers of a run wrote to their rank-<r>.events.jsonl (ranks [0, world)).
// Throws ConfigError on a malformed line; a missing file contributes nothing.
std::vector<train::OpEvent> read_run_events(const std::filesystem::path& run_dir, int world);

// New complete JSON lines appended to a file since the last call (a partial last line waits for
// its newline). A missing file reads as empty.
class JsonlTail {
 public:
  explicit JsonlTail(std::filesystem::path path) : path_(std::move(path)) {}
  std::vector<std::string> read_new_lines();

 private:
  std::filesystem::path path_;
  std::uintmax_t offset_ = 0;
  std::string partial_;
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Prepares run_dir (removes the previous run's rendezvous keys and per-rank records) and spawns
  // every worker. Throws RuntimeError/ConfigError; workers already started are then killed.
  void start();
  // Monitors until every worker has ended, tearing the rest down after the first failure.
  SupervisorResult wait();
  SupervisorResult run() {
    start();
    return wait();
  }
  // Async-signal-safe: the next poll tears every worker down (a launcher's SIGINT handler).
  void request_stop() { stop_requested_.store(true); }

  const std::vector<pid_t>& pids() const { return pids_; }
  const SupervisorOptions& options() const { return options_; }

 private:
  void remove_shared_memory() noexcept;
  // What a worker reported before it failed: {"type": "error", "rank", "comm", "seconds",
  // "message"} in its records file (worker.h writes it).
  struct WorkerError {
    bool comm = false;  // a communication failure: probably a consequence of another's
    double seconds = 0;
    std::string message;
    nlohmann::json record;  // as the worker wrote it (null for the supervisor's own verdicts)
  };

  void pump_records();
  void check_health(std::vector<bool>& seen, std::vector<int>& failed);
  void check_heartbeats(const std::vector<bool>& seen, std::vector<int>& failed, double now);
  std::vector<double> heartbeat_ages(double now) const;  // per rank; negative: no file
  // A running rank silent long enough to be the cause of the others' communication failures.
  int silent_rank(const std::vector<bool>& seen, double now) const;
  void archive_previous_attempt() const;
  std::vector<int> teardown();
  int root_cause(const std::vector<int>& failed, int silent) const;
  std::string failure_message(const SupervisorResult& result, int failed, const std::vector<int>& stopped) const;

  SupervisorOptions options_;
  std::vector<ChildProcess> children_;
  std::vector<pid_t> pids_;
  std::string shm_prefix_;  // PARLAB_SHM_PREFIX of this launch
  std::vector<JsonlTail> tails_;
  std::map<int, WorkerError> errors_;
  double started_seconds_ = 0;
  std::vector<double> last_line_seconds_;  // per rank, wall clock
  std::map<int, std::string> unhealthy_;   // rank -> reason
  std::set<int> silent_;                   // ranks failed for their silence (heartbeat)
  std::atomic<bool> stop_requested_{false};
  static_assert(std::atomic<bool>::is_always_lock_free);
};

}  // namespace parlab::launch
