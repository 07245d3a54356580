#include "runtime/comm/shm/shm_group.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace parlab::comm::shm {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kSleepSlice = std::chrono::milliseconds(50);
constexpr auto kSpin = std::chrono::microseconds(20);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// a >= b for counters that wrap (they never drift apart by 2^31).
bool reached(std::uint32_t a, std::uint32_t b) { return static_cast<std::int32_t>(a - b) >= 0; }

std::size_t clamp_part(int64_t count, std::size_t lo, std::size_t width) {
  const auto c = static_cast<std::size_t>(count);
  return c <= lo ? 0 : std::min(width, c - lo);
}

void copy(float* to, const float* from, std::size_t elements) {
  if (elements != 0 && to != from) std::memmove(to, from, elements * sizeof(float));
}

// The two-rank sums, the hot loop of every shared-memory all-reduce and reduce-scatter. Pointers
// are restrict so the loops vectorise without run-time alias checks (GCC's check fails, and falls
// back to scalar code, exactly when a sum goes in place); cloned for AVX-512 and AVX2, chosen once
// by the loader, since the build targets baseline x86-64.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define PARLAB_SHM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PARLAB_SHM_CLONES
#endif
// acc[j] += other[j]; copy[j] = acc[j] when copy is set.
PARLAB_SHM_CLONES void add_into(float* __restrict acc, const float* __restrict other, float* __restrict copy,
                                std::size_t count) {
  if (copy) {
    for (std::size_t j = 0; j < count; ++j) copy[j] = acc[j] = acc[j] + other[j];
  } else {
    for (std::size_t j = 0; j < count; ++j) acc[j] = acc[j] + other[j];
  }
}
// out[j] = a[j] + b[j] into a buffer that is neither source; copy[j] too when set.
PARLAB_SHM_CLONES void add_to(const float* __restrict a, const float* __restrict b, float* __restrict out,
                              float* __restrict copy, std::size_t count) {
  if (copy) {
    for (std::size_t j = 0; j < count; ++j) copy[j] = out[j] = a[j] + b[j];
  } else {
    for (std::size_t j = 0; j < count; ++j) out[j] = a[j] + b[j];
  }
}

// out[i] = src[0][i] + src[1][i] + ... + src[n-1][i], added in that order; also to out2 when
// set. Blocked so the partial sums stay in L1 and the adds vectorise; `out` may be one of the
// sources at the same index (each element is read before it is written).
void sum_in_rank_order(const float* const* src, int n, std::size_t count, float* out, float* out2) {
  if (n == 2) {  // the common case in one pass: each element read once, written where it goes
    // One IEEE addition is commutative bit for bit, so x0 + x1 may run as out += other in place.
    if (out == src[0]) {
      add_into(out, src[1], out2, count);
    } else if (out == src[1]) {
      add_into(out, src[0], out2, count);
    } else {
      add_to(src[0], src[1], out, out2, count);
    }
    return;
  }
  constexpr std::size_t kBlock = 1024;
  alignas(64) float acc[kBlock];
  for (std::size_t at = 0; at < count; at += kBlock) {
    const std::size_t len = std::min(kBlock, count - at);
    std::memcpy(acc, src[0] + at, len * sizeof(float));
    for (int p = 1; p < n; ++p) add_into(acc, src[p] + at, nullptr, len);
    std::memcpy(out + at, acc, len * sizeof(float));
    if (out2) std::memcpy(out2 + at, acc, len * sizeof(float));
  }
}

std::vector<std::size_t> offsets(std::span<const int64_t> counts) {
  std::vector<std::size_t> off(counts.size() + 1, 0);
  for (std::size_t q = 0; q < counts.size(); ++q) off[q + 1] = off[q] + static_cast<std::size_t>(counts[q]);
  return off;
}

std::size_t rounds_for(std::size_t elements, std::size_t per_round) {
  return std::max<std::size_t>(1, (elements + per_round - 1) / per_round);
}

}  // namespace

Group::Group(Segment segment, int rank)
    : segment_(std::move(segment)),
      rank_(rank),
      spin_(static_cast<unsigned>(segment_.size()) <= std::max(1u, std::thread::hardware_concurrency())),
      sent_(static_cast<std::size_t>(segment_.size()), 0),
      received_(static_cast<std::size_t>(segment_.size()), 0) {
  segment_.rank(rank_).pid.store(static_cast<std::int32_t>(::getpid()), std::memory_order_release);
}

Group::~Group() {
  segment_.rank(rank_).left.store(1, std::memory_order_seq_cst);
  // Wake whoever waits on us, so they see that we left instead of waiting out a timeout.
  futex_wake_all(segment_.header().arrivals);
  for (int q = 0; q < size(); ++q) {
    futex_wake_all(segment_.channel(rank_, q).consumed);
    futex_wake_all(segment_.channel(q, rank_).posted);
  }
}

void Group::notify(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& waiters) const {
  // Pairs with the waiter's increment of `waiters` before it re-reads `word` (both seq_cst):
  // either we see it waiting, or it sees our new value and does not sleep.
  if (waiters.load(std::memory_order_seq_cst) != 0) futex_wake_all(word);
}

void Group::check_peer(int q, const OpInfo& info) const {
  const RankSlot& slot = segment_.rank(q);
  if (slot.left.load(std::memory_order_acquire) != 0) {
    throw CollectiveError(info, info.describe() + " failed: rank " + std::to_string(q) +
                                    " of the group left (destroyed its communicator)");
  }
  const pid_t pid = slot.pid.load(std::memory_order_acquire);
  if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) {
    throw CollectiveError(info, info.describe() + " failed: rank " + std::to_string(q) + " of the group (pid " +
                                    std::to_string(pid) + ") is gone");
  }
}

template <typename Ready>
void Group::wait(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& waiters, Ready ready, int peer,
                 const OpInfo& info) {
  if (ready()) return;
  const auto start = Clock::now();
  if (spin_) {
    for (int i = 1;; ++i) {
      cpu_relax();
      if (ready()) return;
      if (i % 64 == 0) {
        if (Clock::now() - start > kSpin) break;
        sched_yield();  // a peer (or our own compute) waiting for this core runs first
      }
    }
  }
  const auto deadline = start + info.timeout;
  for (;;) {
    const std::uint32_t seen = word.load(std::memory_order_seq_cst);
    if (ready()) return;
    const auto now = Clock::now();
    if (now - start >= kSleepSlice) {
      try {
        if (peer >= 0) {
          check_peer(peer, info);
        } else {
          for (int q = 0; q < size(); ++q)
            if (q != rank_) check_peer(q, info);
        }
      } catch (const CollectiveError&) {
        if (ready()) return;  // it finished its part, then left
        throw;
      }
    }
    if (now >= deadline) throw CollectiveTimeout(info, std::chrono::duration<double>(info.timeout).count());
    waiters.fetch_add(1, std::memory_order_seq_cst);
    if (word.load(std::memory_order_seq_cst) == seen && !ready()) {
      futex_wait(word, seen, std::min<Clock::duration>(deadline - now, kSleepSlice));
    }
    waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void Group::arrive_and_wait(const OpInfo& info) {
  Header& h = segment_.header();
  const std::uint32_t target = ++barriers_ * static_cast<std::uint32_t>(size());
  if (h.arrivals.fetch_add(1, std::memory_order_seq_cst) + 1 == target) notify(h.arrivals, h.waiters);
  wait(
      h.arrivals, h.waiters, [&] { return reached(h.arrivals.load(std::memory_order_acquire), target); }, -1, info);
}

void Group::enter(const OpInfo& info, std::uint64_t fingerprint, std::uint64_t offset) {
  op_start_ = Clock::now();
  OpStamp& s = segment_.rank(rank_).stamp[info.seq & 1];
  s.seq = info.seq;
  s.offset = offset;
  s.fingerprint = fingerprint;
  s.bytes = info.bytes;
  s.op = static_cast<std::uint32_t>(info.op);
  std::memset(s.tag, 0, sizeof s.tag);
  std::memcpy(s.tag, info.tag.data(), std::min(info.tag.size(), sizeof s.tag - 1));
  // Published by the barrier that follows (its fetch_add releases these writes).
}

void Group::check_stamps(const OpInfo& info, std::uint64_t fingerprint) {
  std::string disagree;
  for (int q = 0; q < size(); ++q) {
    const OpStamp& s = segment_.rank(q).stamp[info.seq & 1];
    if (s.seq == info.seq && s.fingerprint == fingerprint) continue;
    OpInfo theirs{static_cast<OpKind>(s.op), s.seq, info.group, s.bytes, std::string(s.tag), -1, info.timeout};
    const std::string what = theirs.describe();
    disagree += (disagree.empty() ? "" : "; ") + std::string("rank ") + std::to_string(q) + " issued " + what +
                (what == info.describe() ? " with other counts, root or memory (registered memory on one rank and "
                                           "ordinary memory on another differ)"
                                         : " instead");
  }
  if (disagree.empty()) return;
  // As on Gloo, where mismatched tags never pair: no data moves, the op times out; the flight
  // recorders (and this message) show who disagreed. Keep watching the peers meanwhile.
  const auto deadline = op_start_ + info.timeout;
  Header& h = segment_.header();
  while (Clock::now() < deadline) {
    for (int q = 0; q < size(); ++q)
      if (q != rank_) check_peer(q, info);
    futex_wait(h.arrivals, h.arrivals.load(), std::min<Clock::duration>(deadline - Clock::now(), kSleepSlice));
  }
  throw CollectiveTimeout(info, std::chrono::duration<double>(info.timeout).count(),
                          "ranks disagree on collective #" + std::to_string(info.seq) + ": " + disagree);
}

void Group::all_reduce(std::span<float> buf, const OpInfo& info, std::uint64_t fingerprint) {
  const int n = size();
  const std::size_t width = segment_.slot_bytes() / sizeof(float) / static_cast<std::size_t>(n);
  const std::size_t slice = width * static_cast<std::size_t>(n);
  const std::size_t slices = rounds_for(buf.size(), slice);
  auto lo = [&](std::size_t m, int q) { return m * static_cast<std::size_t>(q) / static_cast<std::size_t>(n); };
  std::vector<const float*> src(static_cast<std::size_t>(n));
  for (std::size_t s = 0; s < slices; ++s) {
    float* base = buf.data() + s * slice;
    const std::size_t m = std::min(slice, buf.size() - std::min(buf.size(), s * slice));
    const int slot = next_slot();
    float* mine = segment_.staging(rank_, slot);
    for (int q = 0; q < n; ++q)
      if (q != rank_) copy(mine + lo(m, q), base + lo(m, q), lo(m, q + 1) - lo(m, q));
    if (s == 0) enter(info, fingerprint);
    arrive_and_wait(info);
    if (s == 0) check_stamps(info, fingerprint);
    const std::size_t a = lo(m, rank_), len = lo(m, rank_ + 1) - a;
    for (int p = 0; p < n; ++p) src[static_cast<std::size_t>(p)] = (p == rank_ ? base : segment_.staging(p, slot)) + a;
    sum_in_rank_order(src.data(), n, len, base + a, mine + a);
    arrive_and_wait(info);
    for (int q = 0; q < n; ++q)
      if (q != rank_) copy(base + lo(m, q), segment_.staging(q, slot) + lo(m, q), lo(m, q + 1) - lo(m, q));
  }
}

void Group::all_reduce_registered(std::span<float> buf, const std::vector<const float*>& at, const OpInfo& info,
                                  std::uint64_t fingerprint) {
  const int n = size();
  const std::size_t m = buf.size();
  auto lo = [&](int q) { return m * static_cast<std::size_t>(q) / static_cast<std::size_t>(n); };
  enter(info, fingerprint);
  arrive_and_wait(info);
  check_stamps(info, fingerprint);
  const std::size_t a = lo(rank_), len = lo(rank_ + 1) - a;
  std::vector<const float*> src(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) src[static_cast<std::size_t>(p)] = at[static_cast<std::size_t>(p)] + a;
  sum_in_rank_order(src.data(), n, len, buf.data() + a, nullptr);
  arrive_and_wait(info);
  for (int q = 0; q < n; ++q)
    if (q != rank_) copy(buf.data() + lo(q), at[static_cast<std::size_t>(q)] + lo(q), lo(q + 1) - lo(q));
  arrive_and_wait(info);
}

void Group::reduce_scatter(std::span<const float> in, std::span<const int64_t> counts, std::span<float> out,
                           const OpInfo& info, std::uint64_t fingerprint) {
  const int n = size();
  const std::size_t width = segment_.slot_bytes() / sizeof(float) / static_cast<std::size_t>(n);
  const auto off = offsets(counts);
  const std::size_t rounds =
      rounds_for(static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end())), width);
  std::vector<const float*> src(static_cast<std::size_t>(n));
  for (std::size_t k = 0; k < rounds; ++k) {
    const int slot = next_slot();
    float* mine = segment_.staging(rank_, slot);
    const std::size_t at = k * width;
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      copy(mine + static_cast<std::size_t>(q) * width, in.data() + off[static_cast<std::size_t>(q)] + at,
           clamp_part(counts[static_cast<std::size_t>(q)], at, width));
    }
    if (k == 0) enter(info, fingerprint);
    arrive_and_wait(info);
    if (k == 0) check_stamps(info, fingerprint);
    const std::size_t len = clamp_part(counts[static_cast<std::size_t>(rank_)], at, width);
    for (int p = 0; p < n; ++p) {
      src[static_cast<std::size_t>(p)] = p == rank_
                                             ? in.data() + off[static_cast<std::size_t>(rank_)] + at
                                             : segment_.staging(p, slot) + static_cast<std::size_t>(rank_) * width;
    }
    sum_in_rank_order(src.data(), n, len, out.data() + at, nullptr);
  }
}

void Group::all_gather(std::span<const float> in, std::span<float> out, std::span<const int64_t> counts,
                       const OpInfo& info, std::uint64_t fingerprint) {
  const int n = size();
  const std::size_t width = segment_.slot_bytes() / sizeof(float);
  const auto off = offsets(counts);
  const std::size_t rounds =
      rounds_for(static_cast<std::size_t>(*std::max_element(counts.begin(), counts.end())), width);
  copy(out.data() + off[static_cast<std::size_t>(rank_)], in.data(), in.size());  // own chunk
  for (std::size_t k = 0; k < rounds; ++k) {
    const int slot = next_slot();
    const std::size_t at = k * width;
    copy(segment_.staging(rank_, slot), in.data() + std::min(at, in.size()),
         clamp_part(counts[static_cast<std::size_t>(rank_)], at, width));
    if (k == 0) enter(info, fingerprint);
    arrive_and_wait(info);
    if (k == 0) check_stamps(info, fingerprint);
    for (int q = 0; q < n; ++q) {
      if (q == rank_) continue;
      copy(out.data() + off[static_cast<std::size_t>(q)] + at, segment_.staging(q, slot),
           clamp_part(counts[static_cast<std::size_t>(q)], at, width));
    }
  }
}

void Group::all_gather_registered(std::span<const float> in, std::span<float> out, std::span<const int64_t> counts,
                                  const std::vector<const float*>& blocks, std::size_t block_elements,
                                  std::size_t offset, const OpInfo& info, std::uint64_t fingerprint) {
  const auto off = offsets(counts);
  enter(info, fingerprint, offset);
  arrive_and_wait(info);
  check_stamps(info, fingerprint);
  for (int q = 0; q < size(); ++q) {
    const auto qi = static_cast<std::size_t>(q);
    const std::uint64_t at = segment_.rank(q).stamp[info.seq & 1].offset;
    const auto count = static_cast<std::size_t>(counts[qi]);
    if (at > block_elements || count > block_elements - at)
      throw CollectiveError(info, info.describe() + ": rank " + std::to_string(q) + "'s input (" +
                                      std::to_string(count) + " elements at " + std::to_string(at) +
                                      ") lies outside its registered block of " + std::to_string(block_elements));
    copy(out.data() + off[qi], q == rank_ ? in.data() : blocks[qi] + at, count);
  }
  arrive_and_wait(info);
}

void Group::reduce_scatter_registered(std::span<const float> in, std::span<const int64_t> counts, std::span<float> out,
                                      const std::vector<const float*>& blocks, std::size_t block_elements,
                                      std::size_t offset, const OpInfo& info, std::uint64_t fingerprint) {
  const int n = size();
  const auto off = offsets(counts);
  const std::size_t total = off.back();
  enter(info, fingerprint, offset);
  arrive_and_wait(info);
  check_stamps(info, fingerprint);
  std::vector<const float*> src(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    const auto pi = static_cast<std::size_t>(p);
    const std::uint64_t at = segment_.rank(p).stamp[info.seq & 1].offset;
    if (at > block_elements || total > block_elements - at)
      throw CollectiveError(info, info.describe() + ": rank " + std::to_string(p) + "'s input (" +
                                      std::to_string(total) + " elements at " + std::to_string(at) +
                                      ") lies outside its registered block of " + std::to_string(block_elements));
    src[pi] = (p == rank_ ? in.data() : blocks[pi] + at) + off[static_cast<std::size_t>(rank_)];
  }
  sum_in_rank_order(src.data(), n, static_cast<std::size_t>(counts[static_cast<std::size_t>(rank_)]), out.data(),
                    nullptr);
  arrive_and_wait(info);
}

void Group::broadcast(std::span<float> buf, int root, const OpInfo& info, std::uint64_t fingerprint) {
  const std::size_t width = segment_.slot_bytes() / sizeof(float);
  const std::size_t rounds = rounds_for(buf.size(), width);
  for (std::size_t k = 0; k < rounds; ++k) {
    const int slot = next_slot();
    const std::size_t at = k * width, len = clamp_part(static_cast<int64_t>(buf.size()), at, width);
    if (rank_ == root) copy(segment_.staging(root, slot), buf.data() + at, len);
    if (k == 0) enter(info, fingerprint);
    arrive_and_wait(info);
    if (k == 0) check_stamps(info, fingerprint);
    if (rank_ != root) copy(buf.data() + at, segment_.staging(root, slot), len);
  }
}

void Group::barrier(const OpInfo& info, std::uint64_t fingerprint) {
  enter(info, fingerprint);
  arrive_and_wait(info);
  check_stamps(info, fingerprint);
}

void Group::send(std::span<const float> buf, int peer, const OpInfo& info) {
  Channel& ch = segment_.channel(rank_, peer);
  const std::size_t width = segment_.channel_bytes() / sizeof(float);
  const std::size_t slices = rounds_for(buf.size(), width);
  std::uint32_t& sent = sent_[static_cast<std::size_t>(peer)];
  for (std::size_t s = 0; s < slices; ++s) {
    const std::uint32_t idx = sent;
    const int slot = static_cast<int>(idx % kChannelSlots);
    // The slot is free once the receiver consumed the slice kChannelSlots before this one.
    wait(
        ch.consumed, ch.waiters,
        [&] { return reached(ch.consumed.load(std::memory_order_acquire) + kChannelSlots, idx + 1); }, peer, info);
    const std::size_t at = s * width, len = clamp_part(static_cast<int64_t>(buf.size()), at, width);
    copy(reinterpret_cast<float*>(segment_.channel_data(rank_, peer, slot)), buf.data() + at, len);
    ch.message[slot] = info.seq;
    ch.bytes[slot] = buf.size() * sizeof(float);
    ch.posted.store(idx + 1, std::memory_order_seq_cst);
    notify(ch.posted, ch.waiters);
    sent = idx + 1;
  }
  // Eager: done once the last slice is in the channel, not when the receiver has copied it. A
  // pipeline stage's send then costs its copy, not the receiver's scheduling: on ranks that share
  // cores the receiver may wait for a core for milliseconds, and the send would hold this
  // communicator's one thread (and the recv queued behind it) all that while. The simulator
  // prices a send the same way (it needs no matching receive).
}

void Group::recv(std::span<float> buf, int peer, const OpInfo& info) {
  Channel& ch = segment_.channel(peer, rank_);
  const std::size_t width = segment_.channel_bytes() / sizeof(float);
  const std::size_t slices = rounds_for(buf.size(), width);
  std::uint32_t& got = received_[static_cast<std::size_t>(peer)];
  for (std::size_t s = 0; s < slices; ++s) {
    const std::uint32_t idx = got;
    const int slot = static_cast<int>(idx % kChannelSlots);
    wait(
        ch.posted, ch.waiters, [&] { return reached(ch.posted.load(std::memory_order_acquire), idx + 1); }, peer, info);
    if (ch.message[slot] != info.seq || ch.bytes[slot] != buf.size() * sizeof(float)) {
      throw CollectiveError(info, info.describe() + " failed: rank " + std::to_string(peer) + " sent message #" +
                                      std::to_string(ch.message[slot]) + " of " + std::to_string(ch.bytes[slot]) +
                                      " B where " + std::to_string(buf.size() * sizeof(float)) + " B were expected");
    }
    const std::size_t at = s * width, len = clamp_part(static_cast<int64_t>(buf.size()), at, width);
    copy(buf.data() + at, reinterpret_cast<const float*>(segment_.channel_data(peer, rank_, slot)), len);
    ch.consumed.store(idx + 1, std::memory_order_seq_cst);
    notify(ch.consumed, ch.waiters);
    got = idx + 1;
  }
}

}  // namespace parlab::comm::shm
