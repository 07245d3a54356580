#pragma once
// The algorithms the Gloo backend runs, one function per op. Each blocks until the op finished on
// this rank and throws Gloo's exceptions (gloo::IoException on a timeout or a broken pair); the
// communicator turns those into CollectiveTimeout / CollectiveError.
//
// Determinism: all-reduce pins Gloo's RING algorithm. For a fixed world size and element count
// the chunk and segment boundaries are fixed and every segment is summed along the ring in the
// same rank order on every run, so results are bit-identical across runs (and across ranks,
// because the all-gather phase copies each finished segment). Ring rather than BCube or
// halving-doubling because it is also the algorithm the bus-bandwidth factor 2(n-1)/n in
// strategy/collectives.h describes, and Gloo's default choice could change under us.
//
// Reduce-scatter: Gloo 0.5 only ships the legacy ReduceScatterHalvingDoubling (bound buffers,
// per-call slot allocation, the context's fixed timeout). We run the ring reduce-scatter over
// Gloo's unbound buffers instead: same transport, per-op timeout, fixed order, and exactly the
// (n-1)/n traffic its bus-bandwidth factor assumes. Chunk c (of n) is summed as
//   x[c+n] + (... + (x[c+2] + x[c+1]))    (ranks mod n; x[r] = rank r's input chunk c)
// which is a fixed order but not the all-reduce's: reduce-scatter + all-gather need not match an
// all-reduce bit for bit. Chunks may differ in size (ZeRO cuts buckets at shard boundaries), and
// an empty chunk is neither sent nor received, on both sides alike.
//
// Build once, run many (as Gloo's algorithms allocate and register in their constructors): the
// ring ops keep their scratch and registered buffers in a RingState, one per communicator, used
// only by its op thread. A ZeRO step reduce-scatters the same bucket spans every step, so their
// registrations are reused step after step instead of being made and torn down per call.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
}
}  // namespace gloo

namespace parlab::comm::gloo_backend {

using Millis = std::chrono::milliseconds;

void all_reduce(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, std::uint32_t tag, Millis timeout);
class RingState {
 public:
  explicit RingState(std::shared_ptr<gloo::Context> ctx);
  ~RingState();
  RingState(const RingState&) = delete;
  RingState& operator=(const RingState&) = delete;

  // Rank r's chunk is counts[r] elements at offset counts[0] + ... + counts[r-1] of `input`;
  // `output` (counts[rank] elements) may alias that chunk.
  void reduce_scatter(std::span<const float> input, std::span<const int64_t> counts, std::span<float> output,
                      std::uint32_t tag, Millis timeout);
  // Rank r's `input` (counts[r] elements) lands at its offset in every rank's `output`; the
  // input may alias its own chunk of the output.
  void all_gather(std::span<const float> input, std::span<float> output, std::span<const int64_t> counts,
                  std::uint32_t tag, Millis timeout);

  // Calls that had to register a new buffer (for tests of the reuse).
  std::uint64_t registrations() const { return registrations_; }
  // Bytes of the scratch buffer the reduce-scatter keeps (its largest input): memory the
  // accounting allocator does not see, reported beside it (train/memory_report.h).
  std::size_t scratch_bytes() const { return inbox_.capacity() * sizeof(float); }

 private:
  gloo::transport::UnboundBuffer& registered(const float* data, std::size_t elements);
  void reserve_scratch(std::size_t elements);

  std::shared_ptr<gloo::Context> ctx_;
  std::vector<float> inbox_;
  std::unique_ptr<gloo::transport::UnboundBuffer> inbox_buf_;
  // Registrations of caller buffers by (address, elements), oldest first; bounded.
  struct Entry {
    const float* data = nullptr;
    std::size_t elements = 0;
    std::unique_ptr<gloo::transport::UnboundBuffer> buffer;
  };
  std::deque<Entry> cache_;
  std::uint64_t registrations_ = 0;
};

void all_gather(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input, std::span<float> output,
                std::uint32_t tag, Millis timeout);
void broadcast(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int root, std::uint32_t tag,
               Millis timeout);
void barrier(const std::shared_ptr<gloo::Context>& ctx, std::uint32_t tag, Millis timeout);
// `tag` must be equal on both sides: the k-th message of this direction between the two ranks.
void send(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> buf, int peer, std::uint32_t tag,
          Millis timeout);
void recv(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int peer, std::uint32_t tag, Millis timeout);

}  // namespace parlab::comm::gloo_backend

namespace parlab::comm {
class Communicator;
// How many caller buffers the Gloo communicator's ring ops have registered so far (a test of
// build once, run many: repeating a call on the same buffers registers nothing new); 0 for a
// communicator of another backend.
std::uint64_t gloo_ring_registrations(const Communicator& communicator);
// Bytes of scratch the Gloo communicator's ring ops hold (RingState::scratch_bytes); 0 for a
// communicator of another backend. Read between ops.
std::size_t gloo_ring_scratch_bytes(const Communicator& communicator);
}  // namespace parlab::comm
