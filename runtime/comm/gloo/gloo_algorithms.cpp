#include "runtime/comm/gloo/gloo_algorithms.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/unbound_buffer.h>

namespace parlab::comm::gloo_backend {
namespace {

// Slot prefixes for the ops we build on unbound buffers; Gloo's own collectives use 0x01..0x08
// (gloo/types.h). Layout as Gloo's Slot::build: prefix in the top 8 bits, tag in the next 32.
constexpr std::uint8_t kReduceScatterSlotPrefix = 0x21;
constexpr std::uint8_t kPointToPointSlotPrefix = 0x22;
constexpr std::uint8_t kAllGatherSlotPrefix = 0x23;

std::uint64_t slot(std::uint8_t prefix, std::uint32_t tag) {
  return (static_cast<std::uint64_t>(prefix) << 56) | (static_cast<std::uint64_t>(tag) << 24);
}

void sum_floats(void* out, const void* a, const void* b, std::size_t n) { gloo::sum<float>(out, a, b, n); }

void* mutable_ptr(std::span<const float> s) { return const_cast<float*>(s.data()); }

}  // namespace

void all_reduce(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, std::uint32_t tag, Millis timeout) {
  // One rank: the sum is the input. Empty buffers: nothing to move (every rank agrees on size).
  if (ctx->size == 1 || buf.empty()) return;
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(buf.data(), buf.size());
  opts.setReduceFunction(&sum_floats);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allreduce(opts);
}

// ---- RingState ----

namespace {
constexpr std::size_t kMaxRegistrations = 64;  // a step's buckets and layers, with room
}  // namespace

RingState::RingState(std::shared_ptr<gloo::Context> ctx) : ctx_(std::move(ctx)) {}
RingState::~RingState() = default;

gloo::transport::UnboundBuffer& RingState::registered(const float* data, std::size_t elements) {
  for (Entry& e : cache_)
    if (e.data == data && e.elements == elements) return *e.buffer;
  if (cache_.size() == kMaxRegistrations) cache_.pop_front();
  ++registrations_;
  cache_.push_back(
      Entry{data, elements, ctx_->createUnboundBuffer(const_cast<float*>(data), elements * sizeof(float))});
  return *cache_.back().buffer;
}

void RingState::reserve_scratch(std::size_t elements) {
  if (elements <= inbox_.size() && inbox_buf_) return;
  inbox_.assign(elements, 0.0f);
  inbox_buf_ = ctx_->createUnboundBuffer(inbox_.data(), elements * sizeof(float));
}

namespace {

// Both rings move each chunk in segments and forward a segment as soon as it landed, so the n-1
// hops of a chunk overlap. ZeRO's chunks are uneven: a rank's shard is a contiguous 1/n of the
// model, so a layer's gather or a bucket's reduce-scatter has most or all of its bytes in one
// rank's chunk. Moved whole, hop after hop, such a chunk crossed the ring in (n-1) S/B where a
// balanced ring takes (n-1)/n S/B (4x slower on 4 ranks); in segments it takes about S/B.
constexpr std::size_t kSegmentBytes = std::size_t{1} << 20;

// Calls f(byte offset, bytes) for each segment of chunk c, in order; both ends of a hop cut a
// chunk alike, so every send meets a receive of its size.
template <typename F>
void for_segments(const std::vector<std::size_t>& offset, int c, F&& f) {
  const std::size_t begin = offset[c] * sizeof(float), bytes = (offset[c + 1] - offset[c]) * sizeof(float);
  for (std::size_t at = 0; at < bytes; at += kSegmentBytes) f(begin + at, std::min(kSegmentBytes, bytes - at));
}

}  // namespace

void RingState::reduce_scatter(std::span<const float> input, std::span<const int64_t> counts, std::span<float> output,
                               std::uint32_t tag, Millis timeout) {
  const int n = ctx_->size, r = ctx_->rank;
  std::vector<std::size_t> offset(static_cast<std::size_t>(n) + 1, 0);
  std::size_t largest = 0;
  for (int c = 0; c < n; ++c) {
    offset[c + 1] = offset[c] + static_cast<std::size_t>(counts[c]);
    largest = std::max(largest, static_cast<std::size_t>(counts[c]));
  }
  if (n == 1 || largest == 0) {
    if (output.data() != input.data() + offset[r])
      std::copy_n(input.data() + offset[r], static_cast<std::size_t>(counts[r]), output.data());
    return;
  }
  // The partial sums arrive at their chunk's place in the inbox (the input's size), so every
  // receive can be posted at once.
  reserve_scratch(input.size());
  const std::uint64_t s = slot(kReduceScatterSlotPrefix, tag);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  gloo::transport::UnboundBuffer& input_buf = registered(input.data(), input.size());
  auto recv_chunk = [&](int k) { return (r - k - 2 + 2 * n) % n; };
  // Step k of n-1 receives the partial sum of chunk (r-k-2) from the left, adds our own
  // contribution and (but at the last step, when it is chunk r, summed over every rank) passes
  // it to the right; step 0 sends our own chunk (r-1). The sum's order is the unsegmented ring's.
  for (int k = 0; k < n - 1; ++k)
    for_segments(offset, recv_chunk(k), [&](std::size_t at, std::size_t len) { inbox_buf_->recv(left, s, at, len); });
  std::size_t input_sends = 0, inbox_sends = 0;
  for_segments(offset, (r - 1 + n) % n, [&](std::size_t at, std::size_t len) {
    input_buf.send(right, s, at, len);
    ++input_sends;
  });
  for (int k = 0; k < n - 1; ++k) {
    const int c = recv_chunk(k);
    for_segments(offset, c, [&](std::size_t at, std::size_t len) {
      inbox_buf_->waitRecv(timeout);
      const std::size_t first = at / sizeof(float), count = len / sizeof(float);
      const float* mine = input.data() + first;
      float* partial = inbox_.data() + first;
      float* target = k == n - 2 ? output.data() + (first - offset[r]) : partial;
      for (std::size_t i = 0; i < count; ++i) target[i] = partial[i] + mine[i];
      if (k < n - 2) {
        inbox_buf_->send(right, s, at, len);
        ++inbox_sends;
      }
    });
  }
  for (std::size_t i = 0; i < input_sends; ++i) input_buf.waitSend(timeout);
  for (std::size_t i = 0; i < inbox_sends; ++i) inbox_buf_->waitSend(timeout);
}

void RingState::all_gather(std::span<const float> input, std::span<float> output, std::span<const int64_t> counts,
                           std::uint32_t tag, Millis timeout) {
  const int n = ctx_->size, r = ctx_->rank;
  std::vector<std::size_t> offset(static_cast<std::size_t>(n) + 1, 0);
  for (int c = 0; c < n; ++c) offset[c + 1] = offset[c] + static_cast<std::size_t>(counts[c]);
  float* mine = output.data() + offset[r];
  if (input.data() != mine) std::copy(input.begin(), input.end(), mine);
  if (n == 1 || output.empty()) return;
  const std::uint64_t s = slot(kAllGatherSlotPrefix, tag);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  gloo::transport::UnboundBuffer& out_buf = registered(output.data(), output.size());
  // Step k of n-1 receives chunk (r-k-1) from the left, straight into its place in the output,
  // and (but at the last step) forwards it to the right; step 0 sends our own chunk. Every
  // receive is posted first, in the order the left neighbour sends.
  auto recv_chunk = [&](int k) { return (r - k - 1 + 2 * n) % n; };
  for (int k = 0; k < n - 1; ++k)
    for_segments(offset, recv_chunk(k), [&](std::size_t at, std::size_t len) { out_buf.recv(left, s, at, len); });
  std::size_t sends = 0;
  auto send = [&](std::size_t at, std::size_t len) {
    out_buf.send(right, s, at, len);
    ++sends;
  };
  for_segments(offset, r, send);
  for (int k = 0; k < n - 1; ++k)
    for_segments(offset, recv_chunk(k), [&](std::size_t at, std::size_t len) {
      out_buf.waitRecv(timeout);
      if (k < n - 2) send(at, len);
    });
  for (std::size_t i = 0; i < sends; ++i) out_buf.waitSend(timeout);
}

void all_gather(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input, std::span<float> output,
                std::uint32_t tag, Millis timeout) {
  if (ctx->size == 1 || input.empty()) {
    std::copy(input.begin(), input.end(), output.begin());
    return;
  }
  gloo::AllgatherOptions opts(ctx);
  opts.setInput(static_cast<float*>(mutable_ptr(input)), input.size());
  opts.setOutput(output.data(), output.size());
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::allgather(opts);
}

void broadcast(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int root, std::uint32_t tag,
               Millis timeout) {
  if (ctx->size == 1 || buf.empty()) return;
  gloo::BroadcastOptions opts(ctx);
  opts.setOutput(buf.data(), buf.size());
  opts.setRoot(root);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::broadcast(opts);
}

void barrier(const std::shared_ptr<gloo::Context>& ctx, std::uint32_t tag, Millis timeout) {
  if (ctx->size == 1) return;
  gloo::BarrierOptions opts(ctx);
  opts.setTag(tag);
  opts.setTimeout(timeout);
  gloo::barrier(opts);
}

void send(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> buf, int peer, std::uint32_t tag,
          Millis timeout) {
  if (buf.empty()) return;
  auto ub = ctx->createUnboundBuffer(mutable_ptr(buf), buf.size() * sizeof(float));
  ub->send(peer, slot(kPointToPointSlotPrefix, tag));
  ub->waitSend(timeout);
}

void recv(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int peer, std::uint32_t tag,
          Millis timeout) {
  if (buf.empty()) return;
  auto ub = ctx->createUnboundBuffer(buf.data(), buf.size() * sizeof(float));
  ub->recv(peer, slot(kPointToPointSlotPrefix, tag));
  ub->waitRecv(timeout);
}

}  // namespace parlab::comm::gloo_backend
