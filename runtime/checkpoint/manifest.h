#pragma once
// The manifest: the one file that makes a checkpoint directory a checkpoint. It is written last,
// after every shard is durable, so its presence (in a directory with its final name) is the
// commit marker. It lists every shard file with its size and XXH3_64bits checksum, and for every
// tensor its global shape and which file holds which element range, so a checkpoint written by
// N ranks can be read by M ranks or by one process.
//
//   {
//     "format": "parlab-checkpoint", "format_version": 1, "parlab_version": "0.1.0",
//     "step": 120, "world_size": 2, "hash": "xxh3_64",
//     "files":   [{"name": "rank-00000.safetensors", "bytes": 4096, "xxh3_64": "1f0c..."}, ...],
//     "tensors": [{"name": "fc1.weight", "shape": [1024, 4096],
//                  "pieces": [{"file": 0, "begin": 0, "end": 2097152},
//                             {"file": 1, "begin": 2097152, "end": 4194304}]}, ...],
//     "metadata": { ...the trainer's object, verbatim... }
//   }
//
// Inside shard file i, the piece of tensor T is stored under the key T: with T's global shape
// when the piece is the whole tensor (so a one-rank shard is an ordinary safetensors file), as a
// 1-D tensor of end - begin elements otherwise.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/checkpoint/state.h"
#include "base/errors.h"

namespace parlab::checkpoint {

inline constexpr int kManifestFormatVersion = 1;
inline constexpr const char* kManifestFileName = "manifest.json";
inline constexpr const char* kHashAlgorithm = "xxh3_64";  // XXH3_64bits, seed 0, whole file

// A manifest is missing fields, has the wrong types, or describes tensors inconsistently.
class ManifestError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

struct ManifestFile {
  std::string name;  // relative to the checkpoint directory
  uint64_t bytes = 0;
  uint64_t xxh3_64 = 0;
};

struct TensorPiece {
  size_t file = 0;     // index into Manifest::files
  ElementRange range;  // elements of the global tensor's flat data held by that file
};

struct ManifestTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<TensorPiece> pieces;  // sorted by range.begin; they tile [0, numel()) exactly
  int64_t numel() const;
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  std::string parlab_version;
  int64_t step = 0;
  int world_size = 1;  // ranks that wrote it (one file each)
  std::vector<ManifestFile> files;
  std::vector<ManifestTensor> tensors;
  nlohmann::json metadata = nlohmann::json::object();

  const ManifestTensor* find(const std::string& name) const;
  uint64_t total_file_bytes() const;

  nlohmann::json to_json() const;
  // Parses and validate()s; throws ManifestError naming the first problem.
  static Manifest from_json(const nlohmann::json& j);
  // Pieces of every tensor tile it exactly, file indices exist, names are unique.
  void validate() const;
};

// Shard file name of a rank: "rank-00003.safetensors".
std::string shard_file_name(int rank);

}  // namespace parlab::checkpoint
