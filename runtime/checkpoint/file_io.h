#pragma once
// Durable file primitives for checkpoints: an owning file descriptor, whole-buffer write/pread
// loops, fsync of files and directories, atomic small-file replacement, and file hashing.
//
// Why raw POSIX and not std::ofstream: durability needs fsync(2) on the file AND on the directory
// that names it (a rename is only durable once the parent directory is synced), and iostreams
// expose neither. Every failure throws parlab::CheckpointIoError naming the path and errno text.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "base/errors.h"

namespace parlab::checkpoint {

// A file-system call failed; the message names the operation, the path and strerror(errno).
class CheckpointIoError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Owns one open file descriptor; closes it on destruction (errors on that close are ignored,
// which is why writers call fsync() explicitly before letting go).
class File {
 public:
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  File(File&& other) noexcept;
  File& operator=(File&& other) noexcept;
  ~File();

  // Create or truncate for writing (mode 0644).
  static File create(const std::filesystem::path& path);
  static File open_read(const std::filesystem::path& path);
  static File open_read_write(const std::filesystem::path& path);
  // A directory opened only so it can be fsync'ed.
  static File open_directory(const std::filesystem::path& path);

  int fd() const { return fd_; }
  const std::filesystem::path& path() const { return path_; }
  uint64_t size_bytes() const;

  // Write all of `bytes` at the current offset, looping over short writes and EINTR.
  void write_all(std::span<const std::byte> bytes);
  // Read exactly out.size() bytes at `offset`; a short file is an error.
  void pread_all(std::span<std::byte> out, uint64_t offset) const;
  // Read up to out.size() bytes at the current offset; returns 0 at end of file.
  size_t read_some(std::span<std::byte> out);
  void pwrite_all(std::span<const std::byte> bytes, uint64_t offset);
  void fsync();
  // Ask the kernel to drop this file's clean pages from the page cache, so the next read comes
  // from the device (benchmarks use it to measure cold loads without root).
  void drop_page_cache();

 private:
  File(int fd, std::filesystem::path path) : fd_(fd), path_(std::move(path)) {}
  int fd_ = -1;
  std::filesystem::path path_;
};

// fsync the directory so that entries created, renamed or removed in it survive a power loss.
void fsync_directory(const std::filesystem::path& dir);

// Replace `path` with `contents` atomically: write `path`.tmp, fsync it, rename over `path`,
// fsync the parent directory. A crash leaves either the old or the new contents.
void atomic_write_file(const std::filesystem::path& path, std::string_view contents);

// Whole small file as a string (manifests, pointers).
std::string read_small_file(const std::filesystem::path& path);

// Incremental XXH3_64bits: update() in any pieces gives the same digest as one-shot hashing of
// the concatenation. Owns the library's opaque state.
class Xxh3Stream {
 public:
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  void update(std::span<const std::byte> bytes);
  uint64_t digest() const;

 private:
  struct State;
  State* state_;
};

// A byte range of a file to copy out while the file is being hashed.
struct CopyOut {
  uint64_t file_offset = 0;
  std::span<std::byte> dst;  // receives bytes [file_offset, file_offset + dst.size())
};

// XXH3_64bits of a whole file, streamed in 16 MiB chunks. `copies` (sorted by file_offset) are
// filled from the same chunks, so verifying a file and loading from it read the device once.
uint64_t xxh3_64_of_file(const std::filesystem::path& path, std::span<const CopyOut> copies = {});
uint64_t xxh3_64_of(std::span<const std::byte> bytes);
// 16 lowercase hex digits, zero padded; and back (throws on anything else).
std::string hash_to_hex(uint64_t hash);
uint64_t hash_from_hex(std::string_view hex);

// Fault injection for tests and `--fault`: flip every bit of the byte at `offset` (default: the
// middle of the file) so any checksum over the file changes. Returns the offset it changed.
uint64_t corrupt_byte(const std::filesystem::path& path, int64_t offset = -1);

// Monotonic wall clock in seconds, for phase timings.
double now_seconds();

}  // namespace parlab::checkpoint
