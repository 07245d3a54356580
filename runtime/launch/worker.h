#pragma once
// The worker side of a launch: one process per rank, started by parlab's Supervisor, torchrun,
// srun or by hand.
//
//   who am I      comm::from_env(): RANK / WORLD_SIZE / LOCAL_RANK (torchrun) or SLURM_PROCID /
//                 SLURM_NTASKS / SLURM_LOCALID (Slurm)
//   rendezvous    $PARLAB_RENDEZVOUS_DIR set (parlab's launcher): a file store there; otherwise
//                 the TCP store rank 0 hosts at MASTER_ADDR:MASTER_PORT (torchrun, srun, manual).
//                 With a MASTER_ADDR other than loopback, rank 0 serves every interface and Gloo
//                 listens on the host name; GLOO_SOCKET_IFNAME picks an interface (as PyTorch).
//   supervisor    $PARLAB_SUPERVISOR_PID set: the kernel kills this worker if the supervisor dies
//                 (PR_SET_PDEATHSIG), so a killed launcher leaves no orphans
//   resume        when <run_dir>/checkpoints holds a checkpoint, every rank loads the newest one
//                 that verifies (train/trainer_checkpoint.h), whatever worker count wrote it
//   train         TrainJob -> Trainer until job.steps steps in total; a checkpoint every
//                 job.checkpoint_every steps and at the last step; faults (faults.h) on the
//                 attempts they name (the first by default); --dump-step files; the rank's
//                 events when a trace is wanted
//   report        JSON lines in <run_dir>/rank-<r>.jsonl, the supervisor's channel:
//                   {"type": "started", "rank", "world", "attempt", "seconds", "comms"}  connected,
//                    built; "comms" maps each group to its backend ({"world": "shm", ...})
//                   {"type": "resume", "rank", "step", "resumed", "summary", "skipped", "seconds",
//                    "load_seconds", "path"}                                     state loaded
//                   {"type": "step", ...}                    one per step (train/telemetry.h)
//                   {"type": "checkpoint", "step", "path", "bytes", "checksum", "save_seconds",
//                    "timings", "seconds"}                   rank 0, each committed checkpoint
//                   {"type": "fault", "kind", "rank", "step", "seconds", ...}  just before a fault
//                   {"type": "final", "state": StateFingerprint}   rank 0, at the end
//                   {"type": "memory", "report": MemoryReport}      every rank, at the end: peak
//                    bytes by category beside the ledger (train/memory_report.h)
//                   {"type": "export", "path", "bytes"}             rank 0, after --export
//                   {"type": "error", "rank", "comm", "seconds", "message"}    on failure, last;
//                    a collective timeout adds "kind": "hang", "detector", "op", "seq", "group",
//                    "tag", "bytes", "collective", "timeout_seconds"
//   liveness      a heartbeat file the supervisor watches, and every communicator's flight
//                 recorder dumped to <run_dir>/flight/ on a failure or on SIGTERM (liveness.h)
//                 "seconds" are wall-clock seconds since the Unix epoch (the supervisor's clock).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/comm/backend_choice.h"
#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/comm/tcp_store.h"
#include "runtime/launch/detectors.h"
#include "runtime/train/trainer.h"

namespace parlab::launch {

// Whether this process was started as one rank of a job (RANK or SLURM_PROCID is set).
bool launched_as_worker();

// When $PARLAB_SUPERVISOR_PID is set: die (SIGKILL) with the supervisor; if it is already gone,
// throws RuntimeError so the worker does not train alone.
void follow_supervisor();

// This rank's world communicator and what keeps its rendezvous alive.
struct WorkerWorld {
  comm::RendezvousEnv env;
  comm::TcpRendezvous tcp;  // the TCP store (rank 0 also hosts its server); empty for a file store
  std::unique_ptr<comm::Communicator> comm;
  std::shared_ptr<comm::Store> store;  // the rendezvous store (a --device cuda rank shares its NCCL id there)
};
// Reads the launcher variables and connects every rank (see above). Under torchrun/srun the TCP
// store's job token comes from PARLAB_STORE_TOKEN, PARLAB_STORE_TOKEN_FILE or
// `<run_dir>/store_token` (comm/store_token.h). Throws ConfigError on missing/malformed variables,
// RendezvousError when ranks do not all arrive within the timeout.
// `choice` picks the backend (comm/backend_choice.h); $PARLAB_HOST_ID replaces the detected host.
WorkerWorld connect_worker(const comm::GlooOptions& options, const std::filesystem::path& run_dir,
                           comm::CommChoice choice = comm::CommChoice::kAuto);

// What `parlab train` was asked: everything a worker needs, so the launcher can hand it over on
// the command line.
struct TrainJob {
  std::string model = "lab-mlp";  // preset name or TOML file
  std::string cluster = "cpu-local";
  std::string plan;  // key=value list (strategy/plan.h), as the user gave it
  // Samples per optimizer step for the whole job, fixed by its first attempt (pin_global_batch)
  // when the plan sets neither gbs nor microbatches, so a shrunken world trains the same batch.
  // 0: the plan policy's for the world at hand (strategy::resolve).
  int64_t global_batch = 0;
  int64_t steps = 10;
  uint64_t seed = 0;
  int64_t data_size = 0;     // 0: 64 global batches
  std::string optimizer;     // "" (the plan's), "adam" or "sgd": overrides plan.optimizer
  double lr = 0;             // 0: the optimizer's default
  double momentum = 0;       // SGD only
  double weight_decay = -1;  // < 0: the optimizer's default
  std::filesystem::path run_dir = "runs/train";
  std::filesystem::path dump_dir;  // --dump-step
  bool trace = false;              // write the rank's events (for --trace)
  std::chrono::milliseconds comm_timeout = comm::kDefaultTimeout;
  // Heartbeat detector (detectors.h): the rank beats every heartbeat_interval() of it; 0: no
  // heartbeat (the supervisor then cannot tell a frozen rank from a waiting one).
  std::chrono::milliseconds heartbeat_timeout = kLabHeartbeatTimeout;
  // Checkpoints: every K steps and at the last step (0: none; a run dir that already holds
  // checkpoints is resumed either way). Retention keeps the newest keep_last + last known good.
  int64_t checkpoint_every = 0;
  int keep_last = 3;
  std::vector<std::string> faults;  // --fault values (faults.h), ranks of the current attempt
  bool record_samples = false;      // dataset indices in every step record
  // --export: the final full model (gathered from every shard) as safetensors; empty: none.
  std::filesystem::path export_file;
  // --device: "cpu" (host LabMlp; groups on --comm) or "cuda" (LOCAL_RANK's GPU, NCCL; runtime/device).
  std::string device = "cpu";
  // --comm: auto (shared memory for the groups of one host, Gloo across hosts), shm or gloo
  // (comm/backend_choice.h). --device cuda keeps NCCL for the program's collectives either way.
  std::string comm = "auto";
};

// The job as JSON and back (the supervisor hands it to its workers as <run_dir>/job.json).
nlohmann::json to_json(const TrainJob& job);
TrainJob train_job_from_json(const nlohmann::json& j);  // throws ConfigError naming the key
TrainJob read_train_job(const std::filesystem::path& file);
void write_train_job(const std::filesystem::path& file, const TrainJob& job);

// Where a run directory keeps its checkpoints, and the final state fingerprint rank 0 writes.
std::filesystem::path checkpoint_root(const std::filesystem::path& run_dir);
std::filesystem::path final_state_path(const std::filesystem::path& run_dir);

// $PARLAB_ATTEMPT: which attempt of a restarted job this process belongs to (0 when unset).
int attempt_from_env();

// The trainer's configuration for `world` ranks: model, resolved plan (the global batch stays
// fixed across worker counts unless the plan fixes microbatches), optimizer, data size.
train::TrainConfig make_train_config(const TrainJob& job, int world);
// The job's plan as given (its text, then --optimizer and the pinned global batch on top), for
// strategy::resolve to complete: nothing edits plan text.
strategy::Plan given_plan(const TrainJob& job);
// The job with its global batch fixed to what `world` workers resolve (unless the plan sets gbs or
// microbatches): a restart on fewer workers then trains the same samples per step.
TrainJob pin_global_batch(const TrainJob& job, int world);

// A failure injected by an exit fault (faults.h): the worker's exit code is `code`.
class InjectedFailure : public RuntimeError {
 public:
  InjectedFailure(int rank, int64_t step, int code);
  int code() const { return code_; }

 private:
  int code_;
};

// The whole worker: follow_supervisor, connect_worker (rendezvous attempt $PARLAB_ATTEMPT),
// resume, train up to job.steps steps with checkpoints and faults, write the final fingerprint, a
// final barrier so no rank tears its connections down while a peer still reads them. On failure
// writes the error line to its records file and rethrows.
void run_train_worker(const TrainJob& job);

}  // namespace parlab::launch
