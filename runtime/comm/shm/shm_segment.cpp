#include "runtime/comm/shm/shm_segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <new>
#include <utility>

#include "base/errors.h"

namespace parlab::comm::shm {
namespace {

constexpr std::size_t kLine = 64;
constexpr std::size_t kPage = 4096;

std::size_t round_up(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

[[noreturn]] void fail(const std::string& what, const std::string& name, int err) {
  throw RuntimeError("shared memory: " + what + " " + name + " failed: " + std::strerror(err));
}

// Opens (or creates) `name` and maps `length` bytes of it; creating sizes it owner-only.
std::byte* map_named(const std::string& name, std::size_t length, bool create) {
  const int fd =
      create ? ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) fail(create ? "creating" : "opening", name, errno);
  if (create && (::fchmod(fd, 0600) != 0 || ::ftruncate(fd, static_cast<off_t>(length)) != 0)) {
    const int err = errno;
    ::close(fd);
    ::shm_unlink(name.c_str());
    fail("sizing", name, err);
  }
  struct stat st {};
  if (!create && (::fstat(fd, &st) != 0 || st.st_size != static_cast<off_t>(length))) {
    ::close(fd);
    throw RuntimeError("shared memory: " + name + " has an unexpected size (" + std::to_string(length) +
                       " B expected)");
  }
  void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (create) ::shm_unlink(name.c_str());
    fail("mapping", name, err);
  }
  return static_cast<std::byte*>(p);
}

}  // namespace

void Segment::compute_layout(int size, std::size_t slot_bytes, std::size_t channel_bytes) {
  const auto n = static_cast<std::size_t>(size);
  size_ = size;
  slot_bytes_ = slot_bytes;
  channel_bytes_ = channel_bytes;
  ranks_at_ = round_up(sizeof(Header), kLine);
  channels_at_ = round_up(ranks_at_ + n * sizeof(RankSlot), kLine);
  // Staging and channel data start on pages: the copies into them are the hot path.
  staging_at_ = round_up(channels_at_ + n * n * sizeof(Channel), kPage);
  channel_data_at_ = staging_at_ + n * kStagingSlots * slot_bytes;
  length_ = channel_data_at_ + n * n * kChannelSlots * channel_bytes;
}

RankSlot& Segment::rank(int r) const { return reinterpret_cast<RankSlot*>(base_ + ranks_at_)[r]; }

Channel& Segment::channel(int from, int to) const {
  return reinterpret_cast<Channel*>(base_ + channels_at_)[from * size_ + to];
}

float* Segment::staging(int r, int slot) const {
  return reinterpret_cast<float*>(base_ + staging_at_ +
                                  (static_cast<std::size_t>(r) * kStagingSlots + slot) * slot_bytes_);
}

std::byte* Segment::channel_data(int from, int to, int slot) const {
  const auto pair = static_cast<std::size_t>(from * size_ + to);
  return base_ + channel_data_at_ + (pair * kChannelSlots + static_cast<std::size_t>(slot)) * channel_bytes_;
}

Segment Segment::create(const std::string& name, int size, std::size_t slot_bytes, std::size_t channel_bytes) {
  Segment s;
  s.compute_layout(size, slot_bytes, channel_bytes);
  s.base_ = map_named(name, s.length_, true);  // owner-only whatever the umask: it carries gradients
  // The file is zero-filled; construct the control blocks in place over it.
  auto* h = new (s.base_) Header();
  h->size = static_cast<std::uint32_t>(size);
  h->slot_bytes = slot_bytes;
  h->channel_bytes = channel_bytes;
  for (int r = 0; r < size; ++r) new (&s.rank(r)) RankSlot();
  for (int a = 0; a < size; ++a)
    for (int b = 0; b < size; ++b) new (&s.channel(a, b)) Channel();
  h->magic.store(kMagic, std::memory_order_release);
  return s;
}

Arena Arena::create(const std::string& name, int size, std::size_t block_bytes) {
  return Arena(name, size, block_bytes, true);
}

Arena Arena::attach(const std::string& name, int size, std::size_t block_bytes) {
  return Arena(name, size, block_bytes, false);
}

Arena::Arena(const std::string& name, int size, std::size_t block_bytes, bool create)
    : length_(static_cast<std::size_t>(size) * block_bytes), block_bytes_(block_bytes), size_(size) {
  base_ = map_named(name, length_, create);
}

Arena::Arena(Arena&& o) noexcept
    : base_(std::exchange(o.base_, nullptr)),
      length_(std::exchange(o.length_, 0)),
      block_bytes_(o.block_bytes_),
      size_(o.size_) {}

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, length_);
    base_ = std::exchange(o.base_, nullptr);
    length_ = std::exchange(o.length_, 0);
    block_bytes_ = o.block_bytes_;
    size_ = o.size_;
  }
  return *this;
}

Arena::~Arena() {
  if (base_) ::munmap(base_, length_);
}

Segment Segment::attach(const std::string& name, int size) {
  const int fd = ::shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) fail("opening", name, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Header))) {
    ::close(fd);
    throw RuntimeError("shared memory: " + name + " is not a parlab segment (too small)");
  }
  void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) fail("mapping", name, err);
  Segment s;
  s.base_ = static_cast<std::byte*>(p);
  s.length_ = static_cast<std::size_t>(st.st_size);
  const Header& h = s.header();
  if (h.magic.load(std::memory_order_acquire) != kMagic || h.size != static_cast<std::uint32_t>(size)) {
    throw RuntimeError("shared memory: " + name + " was not made for a group of " + std::to_string(size) + " ranks");
  }
  const std::size_t mapped = s.length_;
  s.compute_layout(size, h.slot_bytes, h.channel_bytes);
  if (s.length_ != mapped) throw RuntimeError("shared memory: " + name + " has an unexpected size");
  return s;
}

void Segment::unlink(const std::string& name) noexcept { ::shm_unlink(name.c_str()); }

Segment::Segment(Segment&& o) noexcept { *this = std::move(o); }

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this == &o) return *this;
  if (base_) ::munmap(base_, length_);
  base_ = std::exchange(o.base_, nullptr);
  length_ = o.length_;
  size_ = o.size_;
  slot_bytes_ = o.slot_bytes_;
  channel_bytes_ = o.channel_bytes_;
  ranks_at_ = o.ranks_at_;
  channels_at_ = o.channels_at_;
  staging_at_ = o.staging_at_;
  channel_data_at_ = o.channel_data_at_;
  return *this;
}

Segment::~Segment() {
  if (base_) ::munmap(base_, length_);
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (timeout.count() <= 0) return;
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
  // Not FUTEX_PRIVATE: the word lives in memory other processes map. EAGAIN (the word changed),
  // EINTR and ETIMEDOUT all mean "look again", which the caller does.
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

std::string segment_prefix() {
  const char* env = std::getenv("PARLAB_SHM_PREFIX");
  if (!env || !*env) return "parlab";
  const std::string p = env;
  for (char c : p) {
    const bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok || p.size() > 100)
      throw ConfigError("PARLAB_SHM_PREFIX", p, "letters, digits, '.', '_' or '-', at most 100");
  }
  return p;
}

std::string new_segment_name() {
  std::random_device rd;
  const std::uint64_t r = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  return "/" + segment_prefix() + "." + hex;
}

int remove_segments(const std::string& prefix) noexcept {
  if (prefix.empty()) return 0;
  int removed = 0;
  DIR* dir = ::opendir("/dev/shm");
  if (!dir) return 0;
  const std::string want = prefix + ".";
  while (const dirent* e = ::readdir(dir)) {
    const std::string name = e->d_name;
    if (name.rfind(want, 0) != 0) continue;
    struct stat st {};
    if (::fstatat(::dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != ::getuid()) continue;
    if (::shm_unlink(("/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace parlab::comm::shm
