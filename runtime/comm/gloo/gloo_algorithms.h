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
// all-reduce bit for bit.
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>

namespace gloo {
class Context;
}

namespace parlab::comm::gloo_backend {

using Millis = std::chrono::milliseconds;

void all_reduce(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf,
                std::uint32_t tag, Millis timeout);
void reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input,
                    std::span<float> output, std::uint32_t tag, Millis timeout);
void all_gather(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input,
                std::span<float> output, std::uint32_t tag, Millis timeout);
void broadcast(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int root,
               std::uint32_t tag, Millis timeout);
void barrier(const std::shared_ptr<gloo::Context>& ctx, std::uint32_t tag, Millis timeout);
// `tag` must be equal on both sides: the k-th message of this direction between the two ranks.
void send(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> buf, int peer,
          std::uint32_t tag, Millis timeout);
void recv(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int peer,
          std::uint32_t tag, Millis timeout);

}  // namespace parlab::comm::gloo_backend
