#pragma once
// The kill-and-resume proof: a job killed at a random moment and resumed from its checkpoint ends
// in exactly the training state of the same job run without interruption.
//
//   reference   the job runs uninterrupted: work_dir/reference
//   trial k     the same job with one fault chosen at random from `fault_seed`: SIGKILL to a
//               random rank before a random step, or (half of the trials) inside the save of a
//               random checkpoint at a random save phase; the supervisor restarts it from the
//               latest good checkpoint (run_training, max_restarts 1): work_dir/trial-<k>
//   compare     same world size: the final parameters AND optimizer state (an XXH3_64 of every
//               tensor, plus step counters and sampler position, combined into one hash) must be
//               bit-identical. With `shrink`, each trial loses a rank instead (lose-rank, the job
//               continues with nproc - 1 workers): a different summation order, so the final
//               tensors must agree within `tolerance` (max |a - b| / max |reference| per tensor,
//               from the final checkpoints).
//
// Every trial prints the --fault text that replays it: `parlab train ... --fault <text>`.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "runtime/launch/faults.h"
#include "runtime/launch/run_sink.h"
#include "runtime/launch/run_training.h"

namespace parlab::launch {

struct ProofReport;

// Where a proof's runs and the proof itself are kept (record/proof_recorder.h keeps them in the
// results database). Called from the thread that runs the proof.
class ProofSink {
 public:
  virtual ~ProofSink() = default;
  // The sink one run of the proof (the reference or a trial) reports to, made before it starts.
  virtual std::unique_ptr<RunSink> begin_run(const TrainJobSpec& spec) = 0;
  // The finished proof, once every trial ran; the id it is kept under.
  virtual std::optional<int64_t> add_proof(const ProofReport& report) = 0;
};

struct ProofOptions {
  TrainJob job;  // model, plan, steps, seed, optimizer...; run_dir is replaced
  int nproc = 2;
  int trials = 3;
  int64_t checkpoint_every = 5;
  uint64_t fault_seed = 1;  // the trials' randomness (printed; the same seed replays them)
  bool shrink = false;      // lose a rank instead of killing one
  double tolerance = 1e-4;  // shrink only
  std::filesystem::path work_dir = "runs/proof";
  std::vector<std::string> worker_command;  // as TrainJobSpec::worker_command
  std::function<void(const std::string&)> on_note;
  // When set, every run (reference and trials) reports to a sink it makes, and the proof is
  // handed to it at the end (borrowed).
  ProofSink* sink = nullptr;
};

struct TrialReport {
  std::optional<int64_t> run;  // the sink's id of the trial's run, when recorded
  int trial = 0;
  std::string fault;  // the --fault text that replays it
  int rank = 0;
  int64_t step = 0;
  bool during_checkpoint = false;
  std::string phase;                      // save phase when during_checkpoint
  bool completed = false;                 // the job finished after its restart
  std::optional<double> restart_seconds;  // fault -> first step completed after the restart
  RestartLatency latency;
  std::optional<int64_t> steps_lost;
  std::string final_hash;        // combined state hash (16 hex digits)
  bool identical = false;        // bit-identical to the reference (same world size)
  double max_relative_diff = 0;  // shrink: largest per-tensor difference
  std::string worst_tensor;      // shrink: where it is
  bool passed = false;
  std::string message;  // why it failed
};

struct ProofReport {
  bool passed = false;
  int nproc = 0;
  int64_t steps = 0;
  std::string device = "cpu";  // where the runs trained (TrainJob::device)
  uint64_t fault_seed = 0;
  bool shrink = false;
  double tolerance = 0;
  std::string reference_hash;
  std::vector<TrialReport> trials;
  std::filesystem::path work_dir;
  std::optional<int64_t> reference_run;  // the sink's ids, when recorded
  std::optional<int64_t> proof_id;

  // trial | rank killed | step | during checkpoint? | restart latency | steps lost | final-state
  // hash | identical?
  std::string table() const;
  // "kill-and-resume: 3/3 trials bit-identical to the uninterrupted run (hash 1f0c...)"
  std::string headline() const;
  nlohmann::json inputs() const;
  nlohmann::json evidence() const;
};

// Runs the reference and every trial (see above). Throws ConfigError on bad options; a trial that
// fails is reported, not thrown.
// Throws ConfigError naming the first bad option (run_kill_resume_proof calls it first too), so a
// front end can refuse bad input before it prints or starts anything.
void check_proof_options(const ProofOptions& options);
ProofReport run_kill_resume_proof(const ProofOptions& options);

// The trial's fault, drawn from (fault_seed, trial) alone: the same inputs draw the same faults.
FaultSpec draw_trial_fault(uint64_t fault_seed, int trial, int nproc, int64_t steps, int64_t checkpoint_every,
                           bool shrink);

}  // namespace parlab::launch
