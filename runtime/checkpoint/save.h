#pragma once
// Saving complete training state: sharded, checksummed, atomically committed.
//
// Protocol (collective over the Coordinator; rank 0 commits):
//
//   1. prepare   rank 0 creates ROOT/step-N.tmp/ (removing a stale one); all wait for it.
//   2. shards    every rank writes rank-r.safetensors (its TensorSlices), hashing while writing,
//                and fsyncs it.                               hooks: kMidShardWrite, kAfterShardWrite
//   3. gather    every rank sends (file, bytes, xxh3_64, slices) to all.
//   4. manifest  rank 0 fsyncs the directory, writes manifest.json, fsyncs it and the directory.
//                                                                            hook: kBeforeManifest
//   5. rename    step-N.tmp -> step-N, fsync ROOT. This is the commit.        hook: kBeforeRename
//   6. pointer   ROOT/latest := "step-N" (atomic replace).            hook: kBeforePointerUpdate
//   7. retention keep the newest K, latest's and last-known-good's targets. hook: kAfterPointerUpdate
//   8. agree     rank 0 tells every rank the outcome.
//
// A crash at any instant leaves the previous checkpoints intact and either no new one (before
// step 5: step-N.tmp is ignored by loads and later removed) or a complete new one (after it).
// If any rank fails, every rank throws: the failing rank its own exception, the others
// CheckpointSaveError naming it.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "runtime/checkpoint/coordinator.h"
#include "runtime/checkpoint/state.h"
#include "base/errors.h"

namespace parlab::checkpoint {

class CheckpointSaveError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Points between the phases of a save where a fault hook runs. kMidShardWrite and
// kAfterShardWrite run on every rank; the others on rank 0 only.
enum class SavePhase {
  kMidShardWrite,        // shard torn: header and at least half of the file written (at the
                         // first write chunk that reaches half), not fsynced
  kAfterShardWrite,      // this rank's shard durable; other ranks may still be writing
  kBeforeManifest,       // every shard durable; no manifest yet
  kBeforeRename,         // manifest durable inside step-N.tmp
  kBeforePointerUpdate,  // step-N committed; latest still names the previous checkpoint
  kAfterPointerUpdate,   // latest names step-N; retention not yet run
};
const char* save_phase_name(SavePhase phase);  // "mid-shard-write", "after-shard-write", ...

// A test or `--fault` hook simulates a crash by throwing, by _exit(), or by raise(SIGKILL).
using SaveHook = std::function<void(SavePhase phase, int rank)>;

struct SaveOptions {
  SaveOptions() = default;
  SaveOptions(std::filesystem::path root_dir, int keep = 3, SaveHook fault_hook = {})
      : root(std::move(root_dir)), keep_last(keep), hook(std::move(fault_hook)) {}

  std::filesystem::path root;                 // e.g. RUN/checkpoints; created if missing
  int keep_last = 3;                          // retention: newest K (plus latest's and last-known-good's targets)
  SaveHook hook;                              // empty: no fault injection
  size_t max_chunk_bytes = size_t{16} << 20;  // write/hash granularity of a shard
};

// Seconds per phase. Shard phases are this rank's; the rest are rank 0's, copied to every rank.
struct SaveTimings {
  double prepare_seconds = 0;      // creating step-N.tmp and waiting for it
  double shard_write_seconds = 0;  // writing + hashing this rank's shard
  double shard_fsync_seconds = 0;  // fsync of this rank's shard
  double gather_seconds = 0;       // waiting for the slowest rank's shard
  double manifest_seconds = 0;     // fsync dir + write/fsync manifest
  double commit_seconds = 0;       // rename + fsync root + latest pointer
  double retention_seconds = 0;
  double total_seconds = 0;  // this rank, start to return
};

struct SaveResult {
  std::filesystem::path path;  // ROOT/step-N
  int64_t step = 0;
  uint64_t shard_bytes = 0;  // this rank's file
  uint64_t total_bytes = 0;  // all shard files + manifest
  SaveTimings timings;
  std::vector<std::filesystem::path> deleted;  // removed by retention
  std::vector<std::string> warnings;           // e.g. retention failed (the save itself succeeded)
};

// Collective: every rank of `coord` calls it with its own slices. Only rank 0's `metadata` is
// stored. Slices borrow memory that must stay alive until the call returns.
SaveResult save_checkpoint(const SaveOptions& options, int64_t step, std::span<const TensorSlice> my_slices,
                           const nlohmann::json& metadata, Coordinator& coord);

// One process, whole tensors: save_checkpoint(options, state.step, whole_tensors(state), ...).
SaveResult save_checkpoint(const SaveOptions& options, const TrainingState& state);

}  // namespace parlab::checkpoint
