#pragma once
// A small reader/writer for the safetensors format (https://github.com/huggingface/safetensors),
// used for checkpoint shards and for `parlab train --dump-step` files checked against PyTorch.
//
// Layout of a file:
//
//   [ u64 little-endian N ][ N bytes of JSON header, padded with ' ' ][ data section ]
//
//   header = { "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...],
//                                "data_offsets": [begin, end]},          // bytes, relative to data
//              ...,
//              "__metadata__": {"<key>": "<string value>", ...} }        // optional, strings only
//
// Rules we write and check (they match the reference implementation):
//   - N is a multiple of 8, so the data section starts 8-byte aligned (8 + N ≡ 0 mod 8);
//   - end - begin = prod(shape) * sizeof(dtype);
//   - sorted by begin, tensors tile the data section exactly: the first begins at 0, each begins
//     where the previous ended, the last ends at file_size - 8 - N (no holes, no overlap);
//   - values are row-major and little-endian.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "runtime/checkpoint/file_io.h"

namespace parlab::checkpoint {

// Element types of the format. F32 and I64 have typed accessors; the others travel as raw bytes.
enum class Dtype { kBool, kU8, kI8, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kI64, kU64, kF64 };

const char* dtype_name(Dtype dtype);             // "F32", "I64", ...
Dtype dtype_from_name(const std::string& name);  // throws SafetensorsError on unknown names
size_t dtype_size_bytes(Dtype dtype);

// A file is not valid safetensors, or does not hold what the caller asked for.
class SafetensorsError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// prod(shape); 1 for a scalar (shape []).
int64_t shape_numel(const std::vector<int64_t>& shape);
std::string shape_to_string(const std::vector<int64_t>& shape);  // "[4, 8]"

// One tensor to write: a non-owning view of its row-major bytes.
struct TensorView {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  std::span<const std::byte> bytes;  // prod(shape) * dtype_size_bytes(dtype) bytes

  static TensorView f32(std::string name, std::vector<int64_t> shape, std::span<const float> v);
  static TensorView i64(std::string name, std::vector<int64_t> shape, std::span<const int64_t> v);
};

struct SafetensorsWriteOptions {
  bool fsync = true;  // fsync the file before returning (the directory is the caller's business)
  // Data is written (and hashed) in pieces of at most this many bytes; after each piece
  // on_progress(bytes_written_so_far, file_bytes) runs. Checkpoint fault hooks use it to stop a
  // save half way through a shard.
  size_t max_chunk_bytes = size_t{16} << 20;
  std::function<void(uint64_t bytes_written, uint64_t file_bytes)> on_progress;
};

struct SafetensorsWriteResult {
  uint64_t file_bytes = 0;
  uint64_t xxh3_64 = 0;  // XXH3_64bits of the whole file, computed while writing
};

// The header bytes (JSON + space padding, without the u64 length prefix) for `tensors` laid out
// in the given order. Tensor names must be unique and must not be "__metadata__".
std::string encode_safetensors_header(std::span<const TensorView> tensors,
                                      const std::map<std::string, std::string>& metadata);

// Write a complete file. Throws SafetensorsError on bad input, CheckpointIoError on I/O failure.
SafetensorsWriteResult write_safetensors(const std::filesystem::path& path, std::span<const TensorView> tensors,
                                         const std::map<std::string, std::string>& metadata = {},
                                         const SafetensorsWriteOptions& options = {});

// Where one tensor lives in a file.
struct TensorInfo {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  uint64_t data_begin_bytes = 0;  // relative to the data section, as in the header
  uint64_t data_end_bytes = 0;
  int64_t numel() const { return shape_numel(shape); }
  uint64_t size_bytes() const { return data_end_bytes - data_begin_bytes; }
};

// An open, validated file. Opening reads and checks only the header; tensor data is read on
// demand with pread, so a reader can pull a slice of a large file without reading the rest.
class SafetensorsFile {
 public:
  static SafetensorsFile open(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return file_.path(); }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }  // sorted by data offset
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  uint64_t header_bytes() const { return header_bytes_; }  // N
  uint64_t data_start_bytes() const { return 8 + header_bytes_; }
  uint64_t file_bytes() const { return file_bytes_; }

  bool contains(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws SafetensorsError if absent

  // Whole tensors, checked against the dtype in the header.
  std::vector<float> read_f32(const std::string& name) const;
  std::vector<int64_t> read_i64(const std::string& name) const;
  // Elements [first_element, first_element + out.size()) of an F32 tensor's flat data.
  void read_f32_range(const std::string& name, int64_t first_element, std::span<float> out) const;
  // Raw bytes of any tensor.
  std::vector<std::byte> read_bytes(const std::string& name) const;

 private:
  explicit SafetensorsFile(File file) : file_(std::move(file)) {}
  void parse_header();
  const TensorInfo& typed(const std::string& name, Dtype want) const;

  File file_;
  uint64_t header_bytes_ = 0;
  uint64_t file_bytes_ = 0;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace parlab::checkpoint
