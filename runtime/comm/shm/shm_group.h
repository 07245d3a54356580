#pragma once
// The algorithms of the shared-memory backend over one mapped Segment. One Group per rank and
// communicator, driven by the communicator's op thread only. Each call blocks until the op
// finished on this rank and throws CollectiveTimeout / CollectiveError.
//
// Rounds. Every collective runs in rounds; in a round each rank writes what it publishes into
// its own staging slot, all ranks meet at a barrier, then each reads its peers' slots. Slots
// alternate (round k uses slot k % 2), so a rank may write round k+1's slot while a slower peer
// still reads round k's: reaching round k+2 needs round k+1's barrier, which every rank enters
// only after it finished reading round k. One barrier per round, two for all-reduce.
//
// All-reduce of a slice of n*W elements (W = slot elements / n), as a reduce-scatter followed
// by an all-gather through the staging slots:
//   1. rank r copies the parts q != r of the slice into its slot (its own part stays put)
//   2. barrier
//   3. rank r sums part r as x0 + x1 + ... + x(n-1), in rank order, reading its own part from
//      its buffer and the others' from their slots; the sum goes to its buffer and its slot
//   4. barrier
//   5. rank r copies every other part's sum from its owner's slot
// The order of step 3 is fixed, so a fixed world size gives bit-identical results on every run
// and every rank (they all copy the one sum). Reduce-scatter is steps 1-3 per round, with each
// destination's part at its own offset of the input (counts may differ, as ZeRO cuts them).
//
// All-reduce over registered memory (Communicator::allocate_registered): every rank's buffer is
// in a block every rank maps, so nothing goes through staging:
//   1. barrier (every rank's input is ready)
//   2. rank r sums part r in rank order, reading the peers' part r where it lies, into its own
//   3. barrier
//   4. rank r copies every other part's sum from its owner's buffer
//   5. barrier (no rank changes its buffer while a peer still reads it)
// Each rank moves 2.5 S on 2 ranks instead of 4 S (the copies into staging and out of it go).
//
// All-gather from registered memory (ZeRO-3's parameter shards): every rank's input lies in its
// block of one allocation, at an offset of its own (uneven shards cut a layer at different
// places), which it writes into its stamp:
//   1. barrier (every input is ready; the stamps say where each lies)
//   2. rank r copies every rank's chunk, its own included, from where it lies into its output
//   3. barrier (no rank changes its input while a peer still reads it)
// One pass of S per rank, where staging costs three (own chunk, into the slot, out of the peers')
// and a barrier per 512 KB round. A reduce-scatter from registered memory is the same two
// barriers around one sum: rank r adds part r of every rank's input where it lies, in rank
// order (the staging path's order, so the same bits), into its output.
//
// Desync: on entering a collective each rank stamps its slot with the op's sequence number and
// a fingerprint (op, tag, counts, root). After the first barrier every rank compares the stamps;
// ranks that disagree never combine data: like Gloo (whose tags then never match) each waits out
// its timeout, and the CollectiveTimeout names what the other rank issued instead.
//
// Waiting: a short spin (only while ranks <= cores; it yields the core every few dozen polls, so
// a peer or a compute thread waiting for the core runs first), then futex sleeps in slices of 50 ms, each
// followed by a look at the peers: one that destroyed its communicator, or whose process is gone
// (kill -9), fails the op with CollectiveError at once instead of at the timeout.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/comm/errors.h"
#include "runtime/comm/shm/shm_segment.h"

namespace parlab::comm::shm {

class Group {
 public:
  Group(Segment segment, int rank);
  ~Group();  // tells the peers this rank left
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return segment_.size(); }

  // `fingerprint` identifies the call (same on every rank that issues the same op).
  void all_reduce(std::span<float> buf, const OpInfo& info, std::uint64_t fingerprint);
  // `at[p]`: where rank p's copy of the buffer lies in this process (at[rank()] == buf.data()).
  void all_reduce_registered(std::span<float> buf, const std::vector<const float*>& at, const OpInfo& info,
                             std::uint64_t fingerprint);
  // `blocks[p]`: where rank p's block (of `block_elements`) of the allocation holding `in` lies in
  // this process; `offset`: where `in` starts in this rank's block, in elements.
  void all_gather_registered(std::span<const float> in, std::span<float> out, std::span<const int64_t> counts,
                             const std::vector<const float*>& blocks, std::size_t block_elements, std::size_t offset,
                             const OpInfo& info, std::uint64_t fingerprint);
  // The same for a reduce-scatter whose input lies in registered memory (ZeRO's gradient
  // buckets): rank r sums part r of every rank's input where it lies, in rank order.
  void reduce_scatter_registered(std::span<const float> in, std::span<const int64_t> counts, std::span<float> out,
                                 const std::vector<const float*>& blocks, std::size_t block_elements,
                                 std::size_t offset, const OpInfo& info, std::uint64_t fingerprint);
  void reduce_scatter(std::span<const float> in, std::span<const int64_t> counts, std::span<float> out,
                      const OpInfo& info, std::uint64_t fingerprint);
  void all_gather(std::span<const float> in, std::span<float> out, std::span<const int64_t> counts, const OpInfo& info,
                  std::uint64_t fingerprint);
  void broadcast(std::span<float> buf, int root, const OpInfo& info, std::uint64_t fingerprint);
  void barrier(const OpInfo& info, std::uint64_t fingerprint);
  // Completes once the whole message is in the channel (two slices of channel_bytes in flight):
  // a message of up to two slices needs no posted recv; a longer one waits for the receiver to
  // consume all but its last two. (A Gloo send waits for its recv.)
  void send(std::span<const float> buf, int peer, const OpInfo& info);
  void recv(std::span<float> buf, int peer, const OpInfo& info);

 private:
  void enter(const OpInfo& info, std::uint64_t fingerprint, std::uint64_t offset = 0);
  void check_stamps(const OpInfo& info, std::uint64_t fingerprint);
  void arrive_and_wait(const OpInfo& info);
  int next_slot() { return static_cast<int>(round_++ & 1u); }
  // Waits until ready(); sleeps on `word`. `peer` = -1 watches every peer, else that one.
  template <typename Ready>
  void wait(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& waiters, Ready ready, int peer,
            const OpInfo& info);
  void check_peer(int q, const OpInfo& info) const;
  void notify(std::atomic<std::uint32_t>& word, std::atomic<std::uint32_t>& waiters) const;

  Segment segment_;
  const int rank_;
  const bool spin_;                             // ranks <= cores: a brief spin beats a sleep
  std::uint32_t barriers_ = 0;                  // barriers this rank passed (all ranks pass the same ones)
  std::uint32_t round_ = 0;                     // staging parity
  std::vector<std::uint32_t> sent_, received_;  // channel slices, by peer
  std::chrono::steady_clock::time_point op_start_{};
};

}  // namespace parlab::comm::shm
