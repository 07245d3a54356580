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
//
// Steps count completed optimizer steps (step S = after S steps). Every fault fires once: on the
// job's first attempt only, so a restarted job runs clean. Before the worker dies it appends a
// {"type": "fault", ...} line to its records, which the supervisor uses to time detection.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/checkpoint/save.h"

namespace parlab::launch {

enum class FaultKind { kKill, kKillDuringCheckpoint, kCorruptCheckpoint, kLoseRank };

// "kill", "kill-during-checkpoint", "corrupt-checkpoint", "lose-rank".
const char* fault_kind_name(FaultKind kind);

struct FaultSpec {
  FaultKind kind = FaultKind::kKill;
  int rank = 0;
  int64_t step = 0;
  checkpoint::SavePhase phase = checkpoint::SavePhase::kBeforeManifest;  // kill-during-checkpoint
  int shard = 0;                                                          // corrupt-checkpoint

  // The canonical text, which parse_fault() reads back ("kill:rank=1,step=7").
  std::string to_string() const;
  // Whether this fault needs a checkpoint written at `step`.
  bool needs_checkpoint() const {
    return kind == FaultKind::kKillDuringCheckpoint || kind == FaultKind::kCorruptCheckpoint;
  }
};

// Parses one --fault value. Throws ConfigError naming the flag, the text and the offending key
// ("--fault = kill:rank=1: missing key 'step' (kill takes rank, step)").
FaultSpec parse_fault(std::string_view text);
std::vector<FaultSpec> parse_faults(const std::vector<std::string>& texts);

// Checks the faults against the job: ranks inside [0, nproc), steps inside [0, steps], a
// checkpoint written at every step a checkpoint fault names. Throws ConfigError.
void check_faults(const std::vector<FaultSpec>& faults, int nproc, int64_t steps, int64_t checkpoint_every);

// Whether `step` is a checkpoint step: a multiple of `every` (> 0), or the last step when
// checkpointing is on.
bool is_checkpoint_step(int64_t step, int64_t every, int64_t last_step);

}  // namespace parlab::launch
