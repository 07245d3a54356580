#pragma once
// Loading: find the newest checkpoint that verifies, say why newer ones were skipped, and read
// any element range of any tensor from it, whatever the number of ranks that wrote it.
//
// Which checkpoint: committed directories (step-N, with a manifest), newest first, at or below
// LoadOptions::max_step. The first one whose every file has the manifest's size and XXH3_64bits
// checksum, and whose shard headers agree with the manifest, is used. A complete checkpoint
// newer than `latest` (a crash between rename and pointer update) is used too: its manifest
// was durable before the rename, so it is as complete as any other; a note records the lag.
//
// With W ranks, loading is collective: rank 0 lists the candidates for everyone, rank r hashes
// files r, r+W, r+2W, ..., and all ranks decide from the union of their findings, so every rank
// resumes from the same step.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/checkpoint/coordinator.h"
#include "runtime/checkpoint/manifest.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/checkpoint/state.h"

namespace parlab::checkpoint {

struct LoadOptions {
  LoadOptions() = default;
  LoadOptions(std::filesystem::path root_dir, std::optional<int64_t> max = std::nullopt)
      : root(std::move(root_dir)), max_step(max) {}

  std::filesystem::path root;          // e.g. RUN/checkpoints
  std::optional<int64_t> max_step;     // ignore checkpoints after this step (deliberate rollback)
  bool record_last_known_good = true;  // rank 0 points last-known-good at what verified
};

struct SkippedCheckpoint {
  int64_t step = 0;
  std::filesystem::path path;
  std::string reason;  // "checksum mismatch in rank-00001.safetensors: expected xxh3_64 ..., actual ..."
};

// Where a rank wants part of a tensor to land: elements [first_element, first_element + out.size())
// of `name`'s flat data. Given to load_checkpoint, the parts inside files this rank verifies are
// copied out during the verification pass (one read of the device), the rest read afterwards.
struct ReadRequest {
  std::string name;
  int64_t first_element = 0;
  std::span<float> out;
};

struct LoadTimings {
  double list_seconds = 0;    // listing the root and agreeing on candidates
  double verify_seconds = 0;  // manifests + hashing this rank's share of files, all candidates
  double read_seconds = 0;    // ReadRequest parts in files other ranks verified
  double total_seconds = 0;
  uint64_t bytes_verified = 0;  // by this rank
};

// A verified checkpoint open for reading. Reads are local (not collective) and use pread, so each
// rank pulls only the ranges it owns. Not thread-safe: one object per rank/thread.
class Checkpoint {
 public:
  Checkpoint(std::filesystem::path dir, Manifest manifest);

  const std::filesystem::path& path() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }
  int64_t step() const { return manifest_.step; }
  const nlohmann::json& metadata() const { return manifest_.metadata; }

  // Elements [first_element, first_element + out.size()) of tensor `name`'s flat data, gathered
  // from whichever shard files hold them. Throws if the tensor is unknown or the range too long.
  void read(const std::string& name, int64_t first_element, std::span<float> out) const;
  std::vector<float> read_tensor(const std::string& name) const;
  // Everything, whole tensors in manifest order: what a single process resumes from.
  TrainingState read_all() const;

  // Elements [element_in_file, ...) of the piece of `name` stored in shard file `file_index`.
  void read_piece(size_t file_index, const std::string& name, int64_t element_in_file, std::span<float> out) const;

  uint64_t bytes_read() const { return bytes_read_; }
  double read_seconds() const { return read_seconds_; }

 private:
  const SafetensorsFile& file(size_t index) const;

  std::filesystem::path dir_;
  Manifest manifest_;
  mutable std::vector<std::optional<SafetensorsFile>> files_;  // opened on first use
  mutable uint64_t bytes_read_ = 0;
  mutable double read_seconds_ = 0;
};

struct LoadResult {
  std::optional<Checkpoint> checkpoint;    // nullopt: nothing usable, start fresh
  std::vector<SkippedCheckpoint> skipped;  // newest first, with the reason
  std::vector<std::string> notes;          // things worth printing that are not failures
  LoadTimings timings;

  // One line for the trainer's log, e.g.
  //   "resumed from step 120 (runs/a/checkpoints/step-000120); skipped step 140: checksum
  //    mismatch in rank-00001.safetensors: expected xxh3_64 0123..., actual 4567..."
  std::string summary() const;
};

// Collective over `coord` (see above). Never throws for a bad checkpoint; only for bad options
// or a failure to list the root. With `into`, the chosen checkpoint's data is already in the
// requested spans on return (their contents are unspecified when no checkpoint is found); a
// checkpoint lacking a requested tensor or range is skipped with that reason.
LoadResult load_checkpoint(const LoadOptions& options, Coordinator& coord, std::span<const ReadRequest> into = {});
LoadResult load_checkpoint(const LoadOptions& options);  // one process

// Problems found in a committed checkpoint directory by a full, single-process verification;
// empty when it is good. `rank`/`world_size` restrict the hashing to files rank,
// rank + world_size, ... (the manifest is always read), so W ranks can share the work.
std::vector<std::string> verify_checkpoint(const std::filesystem::path& dir, int rank = 0, int world_size = 1,
                                           uint64_t* bytes_hashed = nullptr);

}  // namespace parlab::checkpoint
