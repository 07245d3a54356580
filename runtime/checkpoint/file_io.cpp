#include "runtime/checkpoint/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

namespace parlab::checkpoint {
namespace {

[[noreturn]] void fail(const char* what, const std::filesystem::path& path) {
  throw CheckpointIoError(std::string(what) + " " + path.string() + ": " + std::strerror(errno));
}

int open_or_throw(const std::filesystem::path& path, int flags, const char* what) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_CLOEXEC, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail(what, path);
  return fd;
}

}  // namespace

// XXH3 state is an opaque, 64-byte aligned blob that the library allocates.
struct Xxh3Stream::State {
  XXH3_state_t* s;
};

Xxh3Stream::Xxh3Stream() : state_(new State{XXH3_createState()}) {
  if (state_->s == nullptr || XXH3_64bits_reset(state_->s) != XXH_OK) {
    XXH3_freeState(state_->s);
    delete state_;
    throw RuntimeError("XXH3: cannot allocate hash state");
  }
}

Xxh3Stream::~Xxh3Stream() {
  XXH3_freeState(state_->s);
  delete state_;
}

void Xxh3Stream::update(std::span<const std::byte> bytes) { XXH3_64bits_update(state_->s, bytes.data(), bytes.size()); }

uint64_t Xxh3Stream::digest() const { return XXH3_64bits_digest(state_->s); }

File::File(File&& other) noexcept : fd_(other.fd_), path_(std::move(other.path_)) { other.fd_ = -1; }

File& File::operator=(File&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File File::create(const std::filesystem::path& path) {
  return File(open_or_throw(path, O_WRONLY | O_CREAT | O_TRUNC, "cannot create"), path);
}

File File::open_read(const std::filesystem::path& path) {
  return File(open_or_throw(path, O_RDONLY, "cannot open"), path);
}

File File::open_read_write(const std::filesystem::path& path) {
  return File(open_or_throw(path, O_RDWR, "cannot open for writing"), path);
}

File File::open_directory(const std::filesystem::path& path) {
  return File(open_or_throw(path, O_RDONLY | O_DIRECTORY, "cannot open directory"), path);
}

uint64_t File::size_bytes() const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("cannot stat", path_);
  return static_cast<uint64_t>(st.st_size);
}

void File::write_all(std::span<const std::byte> bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path_);
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
  }
}

void File::pwrite_all(std::span<const std::byte> bytes, uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_, bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write", path_);
    }
    bytes = bytes.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

void File::pread_all(std::span<std::byte> out, uint64_t offset) const {
  while (!out.empty()) {
    const ssize_t n = ::pread(fd_, out.data(), out.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read", path_);
    }
    if (n == 0) {
      throw CheckpointIoError("cannot read " + path_.string() + ": file ends at byte " + std::to_string(offset) + ", " +
                              std::to_string(out.size()) + " more bytes expected");
    }
    out = out.subspan(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

size_t File::read_some(std::span<std::byte> out) {
  for (;;) {
    const ssize_t n = ::read(fd_, out.data(), out.size());
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR) fail("cannot read", path_);
  }
}

void File::fsync() {
  if (::fsync(fd_) != 0) fail("cannot fsync", path_);
}

void File::drop_page_cache() {
  // Advisory: dirty pages are not dropped, so callers fsync first. Failure only means a warm cache.
  (void)::posix_fadvise(fd_, 0, 0, POSIX_FADV_DONTNEED);
}

void fsync_directory(const std::filesystem::path& dir) { File::open_directory(dir).fsync(); }

void atomic_write_file(const std::filesystem::path& path, std::string_view contents) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    File f = File::create(tmp);
    f.write_all(std::as_bytes(std::span(contents.data(), contents.size())));
    f.fsync();
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("cannot rename into", path);
  fsync_directory(path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path());
}

std::string read_small_file(const std::filesystem::path& path) {
  File f = File::open_read(path);
  std::string s(f.size_bytes(), '\0');
  f.pread_all(std::as_writable_bytes(std::span(s.data(), s.size())), 0);
  return s;
}

uint64_t xxh3_64_of_file(const std::filesystem::path& path, std::span<const CopyOut> copies) {
  constexpr size_t kChunkBytes = 16u << 20;
  File f = File::open_read(path);
  // A larger readahead window keeps the device busy while we hash the previous chunk.
  (void)::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
  Xxh3Stream hash;
  std::vector<std::byte> buf(kChunkBytes);
  uint64_t at = 0;  // file offset of buf[0]
  size_t next = 0;  // first copy not yet finished
  for (;;) {
    const size_t n = f.read_some(buf);
    if (n == 0) break;
    hash.update(std::span(buf.data(), n));
    const uint64_t end = at + n;
    for (size_t i = next; i < copies.size() && copies[i].file_offset < end; ++i) {
      const CopyOut& c = copies[i];
      const uint64_t lo = std::max(at, c.file_offset);
      const uint64_t hi = std::min<uint64_t>(end, c.file_offset + c.dst.size());
      if (lo < hi) std::memcpy(c.dst.data() + (lo - c.file_offset), buf.data() + (lo - at), hi - lo);
      if (c.file_offset + c.dst.size() <= end && i == next) ++next;
    }
    at = end;
  }
  return hash.digest();
}

uint64_t xxh3_64_of(std::span<const std::byte> bytes) { return XXH3_64bits(bytes.data(), bytes.size()); }

std::string hash_to_hex(uint64_t hash) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(hash));
  return buf;
}

uint64_t hash_from_hex(std::string_view hex) {
  if (hex.size() != 16) throw RuntimeError("bad hash '" + std::string(hex) + "': want 16 hex digits");
  uint64_t v = 0;
  for (char c : hex) {
    int d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else
      throw RuntimeError("bad hash '" + std::string(hex) + "': want lowercase hex digits");
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  return v;
}

uint64_t corrupt_byte(const std::filesystem::path& path, int64_t offset) {
  File f = File::open_read_write(path);
  const uint64_t size = f.size_bytes();
  if (size == 0) throw ConfigError("corrupt_byte.path", path.string(), "file is empty");
  const uint64_t at = offset < 0 ? size / 2 : static_cast<uint64_t>(offset);
  if (at >= size) {
    throw ConfigError("corrupt_byte.offset", std::to_string(offset), "must be < file size " + std::to_string(size));
  }
  std::byte b{};
  f.pread_all(std::span(&b, 1), at);
  b = ~b;
  f.pwrite_all(std::span(&b, 1), at);
  f.fsync();
  return at;
}

double now_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

}  // namespace parlab::checkpoint
