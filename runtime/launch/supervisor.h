#pragma once
// The supervisor: starts N worker processes on this machine, watches them, and tears all of them
// down when one fails. The first cut of what the fault-tolerance work completes (restarts,
// heartbeats, a watchdog); the pieces are already where those go:
//
//   spawn     one ChildProcess per rank (posix_spawn of `argv`), each in its own process group,
//             stdout+stderr to run_dir/rank-<r>.log, environment as torchrun sets it:
//               RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE   (this machine: local = global)
//               PARLAB_RENDEZVOUS_DIR = run_dir/rendezvous      (a file store: no port to pick)
//               PARLAB_RUN_DIR, PARLAB_SUPERVISOR_PID           (workers die with the supervisor)
//               OPENBLAS_NUM_THREADS = OMP_NUM_THREADS = 1      (one BLAS thread per rank)
//   monitor   every `poll`: waitpid(WNOHANG) on each worker, and tail the progress channel, the
//             JSON lines each worker appends to run_dir/rank-<r>.jsonl (one per step, see
//             runtime/train/telemetry.h), handing every new record to on_record.
//   teardown  a worker that exits non-zero or dies from a signal (or request_stop()) stops the
//             rest: SIGTERM to each process group, SIGKILL after `grace`, every child reaped.
//             Files in run_dir stay as the workers wrote them.
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
#include <string>
#include <vector>

#include "runtime/launch/process.h"
#include "runtime/train/telemetry.h"

namespace parlab::launch {

struct SupervisorOptions {
  std::vector<std::string> argv;           // the worker command; argv[0] is a path
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
};

struct WorkerExit {
  int rank = 0;
  ExitStatus status;
  bool stopped = false;  // ended by the teardown, not on its own
};

struct SupervisorResult {
  bool ok = false;             // every worker exited with code 0
  bool interrupted = false;    // request_stop() ended the run
  // The root cause among the workers that ended abnormally (-1: none): one that did not fail
  // on communication (a peer's death makes the others fail too), else the earliest to report.
  int failed_rank = -1;
  std::vector<WorkerExit> exits;  // by rank
  // For people: "rank 1 exited with code 3: <its error>; stopped ranks 0, 2 (SIGTERM, then
  // SIGKILL after 3.0 s)", followed by the last lines of that rank's log.
  std::string message;
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
  // What a worker reported before it failed: {"type": "error", "rank", "comm", "seconds",
  // "message"} in its records file (worker.h writes it).
  struct WorkerError {
    bool comm = false;  // a communication failure: probably a consequence of another's
    double seconds = 0;
    std::string message;
  };

  void pump_records();
  std::vector<int> teardown();
  int root_cause(const std::vector<int>& failed) const;
  std::string failure_message(const SupervisorResult& result, int failed,
                              const std::vector<int>& stopped) const;

  SupervisorOptions options_;
  std::vector<ChildProcess> children_;
  std::vector<pid_t> pids_;
  std::vector<JsonlTail> tails_;
  std::map<int, WorkerError> errors_;
  std::atomic<bool> stop_requested_{false};
  static_assert(std::atomic<bool>::is_always_lock_free);
};

}  // namespace parlab::launch
