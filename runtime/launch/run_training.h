#pragma once
// run_training: a training job under a restarting supervisor (torchrun's elastic-agent
// semantics). The library entry point of `parlab train` and of the experiments runner.
//
//   attempt k   a Supervisor starts `world` workers (rendezvous attempt k) that read the job from
//               <run_dir>/job.json, resume from the newest good checkpoint in
//               <run_dir>/checkpoints (if any) and train until job.steps steps in total.
//   failure     a worker exits abnormally or is reported unhealthy: every worker is stopped
//               (SIGTERM, SIGKILL after the grace period), the incident is recorded (rank, exit
//               code or signal, step, times) and, while restarts are left, attempt k+1 starts
//               from the latest good checkpoint. A worker whose device is lost (the lose-rank
//               fault) cannot be restarted: the job continues with fewer workers, down to
//               min_nproc, with the global batch fixed (accumulation adjusts) and the sample
//               order kept by the elastic sampler.
//   hang        a rank's collective timed out, or a rank went silent (heartbeat): the incident
//               (kind hang) names the culprit found by the detectors, never by the injected fault:
//               the silent rank, else the rank the flight-recorder analyzer names (its sentence
//               goes into the incident and on the console), else the supervisor's root cause.
//   same again  the same failure (kind and culprit device) more than max_same_failure times:
//               the job degrades to spec.fallback (detectors.h) once: stop at the last known-good
//               checkpoint, DDP on the surviving ranks (the culprit dropped), or a single-worker
//               baseline; announced (on_note) and recorded (TrainOutcome::fallback, run params).
//   straggler   every straggler.window completed steps, detect_stragglers over the window names
//               a slow rank (on_note, once per rank); at the end of each attempt, over all its
//               steps, each straggler becomes an incident of kind straggler with its cost.
//   give up     after max_restarts restarts, on a configuration error (a restart cannot fix it),
//               or below min_nproc: the outcome's message names the last incident and where the
//               last good checkpoint is.
//
// Devices: ranks of the first attempt. After a rank is dropped (a lost device, the survivors
// fallback) the remaining devices are renumbered 0..n-1 and the --fault texts move with them.
//
// Restart latency of an incident, on the wall clock the workers and the supervisor share:
//   detection   the fault (the worker's "fault" line) -> the supervisor notices
//   teardown    noticed -> every worker reaped (includes the settle period)
//   restart     reaped -> every new worker connected (spawn + rendezvous + model build)
//   state load  connected -> every rank resumed from the checkpoint (verify + read)
//   first step  resumed -> every rank completed its first step
//   total       fault (detection when the fault time is unknown) -> first step completed
// Steps lost = steps completed when it failed - the step resumed from.
//
// Young/Daly: with checkpoint cost C (rank 0's SaveTimings total, mean over the run's saves) and
// cluster MTBF M = device MTBF / devices, the recommended interval is sqrt(2 C M)
// (runtime/checkpoint/young_daly.h), also given in steps at the run's mean step time.
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/diagnose/straggler.h"
#include "runtime/launch/detectors.h"
#include "runtime/launch/process.h"
#include "runtime/launch/progress.h"
#include "runtime/launch/run_sink.h"
#include "runtime/launch/worker.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer_checkpoint.h"

namespace parlab::launch {

struct TrainJobSpec {
  TrainJob job;          // what every worker trains; job.run_dir is the run directory
  int nproc = 1;         // workers of the first attempt
  int min_nproc = 0;     // fewest workers to continue with after a lost device (0: nproc)
  int max_restarts = 0;  // restarts after failures before giving up
  bool fresh = false;    // remove <run_dir>/checkpoints first instead of resuming from them
  // How a worker is started: this prefix plus "--job=<run_dir>/job.json". Empty: parlab-worker
  // beside this program when it is there (cli/worker_main.cpp: starts without the simulator),
  // else this program with "train --worker" (a library caller passes the path of parlab).
  std::vector<std::string> worker_command;
  std::chrono::milliseconds grace{3000};  // SIGTERM -> SIGKILL
  std::chrono::milliseconds poll{50};
  // Per-device mean time between failures for the Young/Daly interval. 50,000 h is about what
  // Meta reports for its 16,384-GPU Llama 3 training (419 interruptions in 54 days).
  double mtbf_hours = 50'000;
  // Optional health check beyond the exit status and the heartbeat (SupervisorOptions::unhealthy).
  std::function<std::string(int rank, double seconds_since_last_line)> unhealthy;
  // Restarts after the same failure (kind, culprit device) before degrading to `fallback`.
  int max_same_failure = kDefaultMaxSameFailure;
  Fallback fallback = kDefaultFallback;
  // Straggler detection over each attempt's per-rank compute (window 0: off).
  diagnose::StragglerOptions straggler;
};

struct RestartLatency {
  std::optional<double> detection_seconds, teardown_seconds, restart_seconds, state_load_seconds, first_step_seconds,
      total_seconds;
};

struct IncidentReport {
  int attempt = 0;  // the attempt that failed
  int rank = -1;    // the root cause (-1: unknown)
  // "killed" (injected), "lost" (device gone), "crash", "unhealthy", "hang" (a collective timed
  // out or a rank went silent), "straggler" (not a failure: the job went on)
  std::string kind;
  std::string detector;                 // hang/straggler: kCollectiveTimeoutDetector, kHeartbeatDetector, ...
  double detector_timeout_seconds = 0;  // the threshold of the detector that fired (hang)
  std::string collective;               // hang: the collective the others waited in, when known
  std::string analysis;                 // hang: the analyzer's sentence; straggler: detect_stragglers' one
  ExitStatus status;                    // how the rank ended
  std::string fault;                    // the injected fault's text, if any ("kill:rank=1,step=7")
  std::string phase;                    // kill-during-checkpoint: the save phase
  std::string message;                  // the supervisor's account (first line)
  int64_t failed_at_step = 0;           // steps completed when it failed
  double fault_seconds = 0;             // wall clock of the fault (0: unknown)
  double detected_seconds = 0;
  bool restarted = false;
  int new_world = 0;                    // workers after the restart
  std::optional<int64_t> resumed_step;  // the step the restart resumed from
  std::optional<int64_t> steps_lost;
  std::string resume_summary;  // the restart's "resumed from step ..." line
  RestartLatency latency;

  // "rank 1 was killed by signal 9 (SIGKILL) at step 7 (injected: kill:rank=1,step=7)";
  // "hang of rank 2 at step 5, detected by the collective timeout (2.00 s): <analysis>"
  std::string what() const;
  // what(), then "; resumed from step 5 with 2 worker(s), 2 step(s) lost; restart latency 1.2 s =
  // detection ... + teardown ... + restart ... + state load ... + first step ..." as far as known.
  std::string describe() const;
};

struct CheckpointReport {
  int attempt = 0;
  int64_t step = 0;
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::string checksum;  // "xxh3_64:<hash of manifest.json>"
  double save_seconds = 0;
  nlohmann::json timings = nlohmann::json::object();  // SaveTimings of rank 0
  bool verified = false;                              // a full verification (or a resume) read it back
};

struct YoungDaly {
  double checkpoint_seconds = 0;  // C
  double mtbf_seconds = 0;        // M = device MTBF / devices
  double interval_seconds = 0;    // sqrt(2 C M)
  double interval_steps = 0;      // at the mean step time
};

// The degradation after a repeated failure (detectors.h: fallback plans).
struct FallbackReport {
  Fallback plan = Fallback::kStop;
  std::string reason;  // "hang of rank 1 happened 3 times (more than --max-same-failure 2)"
  int culprit_rank = -1;
  int world_before = 0, world_after = 0;  // world_after 0: stopped
  // The announcement: reason, plan, what happens (the checkpoint when it stops), e.g. "hang of
  // rank 1 happened 3 times (more than --max-same-failure 2): stopping (--fallback stop) at the
  // last known-good checkpoint runs/x/checkpoints/step-000003 (step 3); run the same command ..."
  std::string message;
};

struct TrainOutcome {
  bool ok = false;
  bool interrupted = false;  // stopped on request (TrainCallbacks::stop)
  std::string message;       // why it failed, the last incident, the last good checkpoint
  int attempts = 0;
  int final_world = 0;
  int64_t start_step = 0;               // where the first attempt resumed from (0: fresh)
  std::string resume_summary;           // the first attempt's resume line (empty when it started fresh)
  int64_t steps_completed = 0;          // steps every rank completed (job.steps on success)
  std::vector<StepSummary> steps;       // by step; a replayed step's last run
  std::vector<RankSummary> rank_table;  // of the last attempt
  std::vector<IncidentReport> incidents;
  std::vector<CheckpointReport> checkpoints;
  std::optional<std::filesystem::path> last_good_checkpoint;
  std::optional<train::StateFingerprint> final_state;
  std::optional<YoungDaly> young_daly;            // when a checkpoint was written
  std::optional<FallbackReport> fallback;         // when the job degraded (or stopped) after repeats
  std::vector<train::MemoryReport> memory;        // per rank of the last attempt, by rank (when it ended)
  std::optional<std::filesystem::path> exported;  // --export's file, once written
  uint64_t exported_bytes = 0;
  double wall_seconds = 0;  // first spawn to the end
};

struct TrainCallbacks {
  std::function<void(const train::StepRecord&)> on_record;         // every rank's record
  std::function<void(const StepSummary&, int64_t steps)> on_step;  // a step every rank did
  std::function<void(const std::string&)> on_note;                 // lines for people
  std::function<void(const IncidentReport&)> on_incident;          // once its restart is timed
  std::function<void(const CheckpointReport&)> on_checkpoint;
  std::function<void()> on_tick;
  RunSink* recorder = nullptr;              // borrowed: told everything, from this thread
  const std::atomic<bool>* stop = nullptr;  // set (a signal handler may) to stop the run
};

// Runs the job to the end (see above). Throws ConfigError for a bad job before any worker starts;
// failures of the workers are outcomes, never exceptions.
TrainOutcome run_training(const TrainJobSpec& spec, const TrainCallbacks& callbacks = {});

// The job as the workers will run it for `world` workers: the plan's global batch pinned (gbs
// added when the plan fixes neither gbs nor microbatches) so a smaller world trains the same
// batch, and the data size made explicit.
TrainJob pinned_job(const TrainJob& job, int world);

}  // namespace parlab::launch
