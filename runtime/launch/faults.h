#pragma once
// Fault injection for tests and teaching: `parlab train --fault KIND:key=value,...` (repeatable).
//
//   kill:rank=R,step=S                       rank R SIGKILLs itself before training step S
//   kill-during-checkpoint:rank=R,step=S,phase=P
//                                            rank R SIGKILLs itself inside the save of the
//                                            checkpoint at step S, at save phase P (the names of
//                                            checkpoint::save_phase_name: mid-shard-write,
//                                            after-shard-write run on every rank; before-manifest,
//                                            before-rename, before-pointer-update,
//                                            after-pointer-update on rank 0 only)
//   corrupt-checkpoint:step=S[,shard=K]      once the checkpoint at step S is committed, rank 0
//                                            flips one byte of its shard file K (default 0)
//   lose-rank:rank=R,step=S                  rank R dies before step S and its device counts as
//                                            lost: the job may only continue with fewer workers
//                                            (parlab train --min-nproc)
//   skip-allreduce:rank=R,step=S             rank R skips batch S's collectives: forward and
//                                            backward run, it issues none of step S's bucket
//                                            all-reduces and carries on with step S+1, so its
//                                            all-reduce #k is the next step's while every other
//                                            rank's is step S's: they hang until the collective
//                                            timeout (the chapter's failure mode)
//   skip-send:rank=R,step=S                  pipeline stage R issues none of batch S's sends
//                                            (activations forward, gradients backward) and
//                                            computes on: the stage that waits for them times out
//                                            in its receive, and the hang analysis names R
//   hang:rank=R,step=S                       rank R stops responding before step S without dying:
//                                            it sleeps outside any collective and its heartbeat
//                                            stops (caught by the supervisor's heartbeat check)
//   slow:rank=R,factor=F[,step=S]            rank R is a straggler from step S (default 0): every
//                                            compute op takes F times its measured time (F > 1)
//   exit:rank=R,step=S[,code=C]              rank R fails before step S as a crashing worker does:
//                                            an error record, then exit code C (default 3, 1..125)
// Every kind also takes attempts=K: the fault fires on the job's first K attempts (0: on every
// attempt, a persistent fault such as a bad node; what --max-same-failure is for).
//
// Steps count completed optimizer steps (step S = after S steps). By default every fault fires
// on the job's first attempt only, so a restarted job runs clean. Before the worker dies, skips or
// hangs it appends a {"type": "fault", ...} line to its records, which the supervisor uses to
// time detection (never to name the culprit of a hang: the detectors must find it themselves).
//
// Ranks are those of the first attempt. When a restart drops a rank (a lost device, the
// survivors fallback), the faults move with the devices: renumber_faults().
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/save.h"

namespace parlab::launch {

enum class FaultKind {
  kKill,
  kKillDuringCheckpoint,
  kCorruptCheckpoint,
  kLoseRank,
  kSkipAllReduce,
  kHang,
  kSlow,
  kSkipSend,
  kExit
};

// "kill", "kill-during-checkpoint", "corrupt-checkpoint", "lose-rank", "skip-allreduce", "hang",
// "slow", "skip-send", "exit".
const char* fault_kind_name(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kKill;
  int rank = 0;
  int64_t step = 0;
  checkpoint::SavePhase phase = checkpoint::SavePhase::kBeforeManifest;  // kill-during-checkpoint
  int shard = 0;                                                         // corrupt-checkpoint
  double factor = 1;                                                     // slow
  int code = 3;                                                          // exit
  int attempts = 1;  // fires on attempts [0, attempts); 0: every attempt

  // The canonical text, which parse_fault() reads back ("kill:rank=1,step=7").
  std::string to_string() const;
  // Whether this fault needs a checkpoint written at `step`.
  bool needs_checkpoint() const {
    return kind == FaultKind::kKillDuringCheckpoint || kind == FaultKind::kCorruptCheckpoint;
  }
  bool fires_on(int attempt) const { return attempts == 0 || attempt < attempts; }
  // Whether it names a rank (corrupt-checkpoint names a shard).
  bool has_rank() const { return kind != FaultKind::kCorruptCheckpoint; }
};

// Parses one --fault value. Throws ConfigError naming the flag, the text and the offending key
// ("--fault = kill:rank=1: missing key 'step' (kill takes rank, step)").
FaultSpec parse_fault(std::string_view text);
std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts);
// The faults of `texts` that fire on `attempt`.
std::vector<FaultSpec> faults_for_attempt(const std::vector<std::string>& texts, int attempt);

// The fault texts for a restart whose rank k runs on device devices[k] (devices are first-attempt
// ranks): a fault naming a device that is no longer used is dropped, the others name its new
// rank. Faults without a rank are kept as they are.
std::vector<std::string> renumber_faults(const std::vector<std::string>& texts, const std::vector<int>& devices);

// Checks the faults against the job: ranks inside [0, nproc), steps inside [0, steps], a
// checkpoint written at every step a checkpoint fault names. Throws ConfigError.
void check_faults(const std::vector<FaultSpec>& faults, int nproc, int64_t steps, int64_t checkpoint_every);

// Whether `step` is a checkpoint step: a multiple of `every` (> 0), or the last step when
// checkpointing is on.
bool is_checkpoint_step(int64_t step, int64_t every, int64_t last_step);

}  // namespace parlab::launch
