#pragma once
// The checkpoint root directory (usually RUN/checkpoints) and how it is kept tidy.
//
//   RUN/checkpoints/
//     step-000100/             committed: renamed from .tmp after its manifest was durable
//       manifest.json
//       rank-00000.safetensors ... rank-0000{W-1}.safetensors
//     step-000120/
//     step-000140.tmp/         a save in progress, or torn by a crash: never loaded
//     step-000080.deleting/    retention renamed it away; removal was interrupted
//     latest                   "step-000120\n": the newest checkpoint whose save finished
//     last-known-good          "step-000100\n": the newest one that passed a full verification
//
// Both pointer files are replaced atomically (write .tmp, fsync, rename, fsync the directory).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace parlab::checkpoint {

inline constexpr const char* kLatestPointer = "latest";
inline constexpr const char* kLastKnownGoodPointer = "last-known-good";

// "step-000120" (at least six digits; larger steps take more).
std::string step_dir_name(int64_t step);

enum class EntryState {
  kCommitted,   // "step-N": final name (it should hold a manifest)
  kIncomplete,  // "step-N.tmp": the save never reached its rename
  kDeleting,    // "step-N.deleting": retention's leftovers
};

struct CheckpointEntry {
  int64_t step = 0;
  EntryState state = EntryState::kCommitted;
  std::filesystem::path path;
};

// Every entry under `root` whose name matches one of the three patterns, newest step first
// (committed before incomplete at equal steps). A missing root is an empty list.
std::vector<CheckpointEntry> list_checkpoints(const std::filesystem::path& root);

// Directory name a pointer file holds, or nullopt when the file is absent or malformed.
std::optional<std::string> read_pointer(const std::filesystem::path& root, const char* pointer);
void write_pointer(const std::filesystem::path& root, const char* pointer, const std::string& dir_name);

struct RetentionPolicy {
  int keep_last = 3;  // >= 1: the newest K committed checkpoints survive
};

struct RetentionResult {
  std::vector<std::filesystem::path> deleted;
};

// Keep the newest `keep_last` committed checkpoints, the target of `latest` and the target of
// `last-known-good`; delete every other committed checkpoint and every .tmp/.deleting leftover.
// Only the process that saves may call it, and never while a save is in progress (a .tmp
// directory of an ongoing save would be removed). A committed checkpoint is first renamed to
// .deleting, so a crash during removal never leaves a half-deleted directory under a final name.
RetentionResult apply_retention(const std::filesystem::path& root, const RetentionPolicy& policy);

// Rename a committed checkpoint to .deleting (durably) and remove it.
void remove_checkpoint_dir(const std::filesystem::path& dir);

}  // namespace parlab::checkpoint
