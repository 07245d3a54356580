#pragma once
// The shared-memory segment of one group of ranks on one host, and the futex waits over it.
//
// Layout (every part cache-line aligned):
//   Header       magic, size, slot/channel bytes, the barrier's arrival counter (a futex word)
//   RankSlot[n]  per rank: its pid, whether it left, the stamp of the collective it entered
//   Channel[n*n] per ordered pair (from, to): the point-to-point slice counters (futex words)
//   staging      per rank, 2 slots of slot_bytes: what the rank publishes for one round
//   channel data per ordered pair, kChannelSlots slices of channel_bytes
//
// Lifetime: rank 0 creates "/dev/shm/<prefix>.<random>" owner-only (0600) and unlinks the name
// as soon as every rank mapped it, so from then on the memory lives only in the mappings and a
// `kill -9` leaves nothing behind. Before that, the supervisor removes "<prefix>.*" of its job.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace parlab::comm::shm {

inline constexpr std::uint64_t kMagic = 0x31687362616c7270ull;  // "prlabsh1"
inline constexpr int kStagingSlots = 2;                         // double buffering: a round needs one barrier, not two
inline constexpr int kChannelSlots = 2;
inline constexpr std::size_t kTagChars = 48;

// What a rank says about the collective it is entering, so its peers can tell a desync (ranks
// disagreeing on what collective #k is) from a slow rank.
struct OpStamp {
  std::uint64_t seq = 0;
  std::uint64_t fingerprint = 0;  // op, tag, counts, root
  double bytes = 0;
  std::uint32_t op = 0;
  char tag[kTagChars] = {};
  std::uint64_t offset = 0;  // a registered all-gather's input: elements from the start of the rank's block
};

struct alignas(64) RankSlot {
  std::atomic<std::int32_t> pid{0};
  std::atomic<std::uint32_t> left{0};  // 1 once the rank destroyed its communicator
  OpStamp stamp[2];                    // indexed by the op's seq parity
};

struct alignas(64) Channel {
  alignas(64) std::atomic<std::uint32_t> posted{0};    // slices the sender wrote (futex word)
  alignas(64) std::atomic<std::uint32_t> consumed{0};  // slices the receiver read (futex word)
  std::atomic<std::uint32_t> waiters{0};
  std::uint64_t message[kChannelSlots] = {};  // send number of the message each slot carries
  std::uint64_t bytes[kChannelSlots] = {};    // its total size, to refuse a mismatched recv
};

struct alignas(64) Header {
  std::atomic<std::uint64_t> magic{0};  // written last by the creator
  std::uint32_t size = 0;
  std::uint64_t slot_bytes = 0, channel_bytes = 0;
  alignas(64) std::atomic<std::uint32_t> arrivals{0};  // barrier arrivals, ever (futex word)
  alignas(64) std::atomic<std::uint32_t> waiters{0};   // ranks asleep on `arrivals`
};

// A mapping of one segment. Movable, not copyable; unmaps on destruction.
class Segment {
 public:
  // Creates `name` (e.g. "/parlab.123.9f2c...") exclusively, mode 0600, sized for `size` ranks.
  // Throws RuntimeError naming the name and errno.
  static Segment create(const std::string& name, int size, std::size_t slot_bytes, std::size_t channel_bytes);
  // Maps an existing segment and checks it was made for `size` ranks.
  static Segment attach(const std::string& name, int size);
  // Removes the name (the mappings stay valid). Never throws; a missing name is fine.
  static void unlink(const std::string& name) noexcept;

  Segment() = default;
  Segment(Segment&& o) noexcept;
  Segment& operator=(Segment&& o) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  Header& header() const { return *reinterpret_cast<Header*>(base_); }
  RankSlot& rank(int r) const;
  Channel& channel(int from, int to) const;
  float* staging(int r, int slot) const;
  std::byte* channel_data(int from, int to, int slot) const;
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::size_t channel_bytes() const { return channel_bytes_; }
  int size() const { return size_; }

 private:
  void compute_layout(int size, std::size_t slot_bytes, std::size_t channel_bytes);
  std::byte* base_ = nullptr;
  std::size_t length_ = 0;
  int size_ = 0;
  std::size_t slot_bytes_ = 0, channel_bytes_ = 0;
  std::size_t ranks_at_ = 0, channels_at_ = 0, staging_at_ = 0, channel_data_at_ = 0;
};

// Registered memory of one group (Communicator::allocate_registered): one block per rank, each
// page-aligned, every rank mapping all of them, so a collective over a rank's block reads the
// peers' blocks where they lie. Created and unlinked as a Segment is; unmaps on destruction.
class Arena {
 public:
  // Creates `name` exclusively (0600) with `size` blocks of `block_bytes` (a multiple of 4096).
  static Arena create(const std::string& name, int size, std::size_t block_bytes);
  // Maps an existing arena and checks its length.
  static Arena attach(const std::string& name, int size, std::size_t block_bytes);

  Arena() = default;
  Arena(Arena&& o) noexcept;
  Arena& operator=(Arena&& o) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  float* block(int r) const { return reinterpret_cast<float*>(base_ + static_cast<std::size_t>(r) * block_bytes_); }
  std::size_t block_bytes() const { return block_bytes_; }
  int size() const { return size_; }

 private:
  Arena(const std::string& name, int size, std::size_t block_bytes, bool create);
  std::byte* base_ = nullptr;
  std::size_t length_ = 0, block_bytes_ = 0;
  int size_ = 0;
};

// Sleeps until *word != expected, a wake, or `timeout` (FUTEX_WAIT on a shared mapping).
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout);
void futex_wake_all(std::atomic<std::uint32_t>& word);

// A name for a new segment: "/<prefix>.<16 random hex digits>". The prefix is
// $PARLAB_SHM_PREFIX (the supervisor sets one per job, so it can remove what a killed rank left)
// or "parlab".
std::string new_segment_name();
// The prefix new_segment_name() uses; a ConfigError if $PARLAB_SHM_PREFIX is not [A-Za-z0-9._-]+.
std::string segment_prefix();
// Removes every /dev/shm entry whose name starts with "<prefix>." and belongs to this user;
// returns how many. For the supervisor's teardown.
int remove_segments(const std::string& prefix) noexcept;

}  // namespace parlab::comm::shm
