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

void sum_floats(void* out, const void* a, const void* b, std::size_t n) {
  gloo::sum<float>(out, a, b, n);
}

void* mutable_ptr(std::span<const float> s) { return const_cast<float*>(s.data()); }

}  // namespace

void all_reduce(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf,
                std::uint32_t tag, Millis timeout) {
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
  cache_.push_back(Entry{data, elements,
                         ctx_->createUnboundBuffer(const_cast<float*>(data), elements * sizeof(float))});
  return *cache_.back().buffer;
}

void RingState::reserve_scratch(std::size_t elements) {
  if (elements <= partial_.size() && partial_buf_) return;
  partial_.assign(elements, 0.0f);
  inbox_.assign(elements, 0.0f);
  partial_buf_ = ctx_->createUnboundBuffer(partial_.data(), elements * sizeof(float));
  inbox_buf_ = ctx_->createUnboundBuffer(inbox_.data(), elements * sizeof(float));
}

void RingState::reduce_scatter(std::span<const float> input, std::span<const int64_t> counts,
                               std::span<float> output, std::uint32_t tag, Millis timeout) {
  const int n = ctx_->size, r = ctx_->rank;
  std::vector<std::size_t> offset(static_cast<std::size_t>(n) + 1, 0);
  std::size_t largest = 0;
  for (int c = 0; c < n; ++c) {
    offset[c + 1] = offset[c] + static_cast<std::size_t>(counts[c]);
    largest = std::max(largest, static_cast<std::size_t>(counts[c]));
  }
  auto size_of = [&](int c) { return static_cast<std::size_t>(counts[c]); };
  if (n == 1 || largest == 0) {
    if (output.data() != input.data() + offset[r]) std::copy_n(input.data() + offset[r], size_of(r), output.data());
    return;
  }
  reserve_scratch(largest);
  const std::uint64_t s = slot(kReduceScatterSlotPrefix, tag);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  gloo::transport::UnboundBuffer& input_buf = registered(input.data(), input.size());

  // Step k of n-1: pass the partial sum of chunk (r-k-1) to the right, receive the partial sum
  // of chunk (r-k-2) from the left and add our own contribution. After n-1 steps the chunk that
  // arrives is chunk r, summed over every rank.
  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = (r - k - 1 + 2 * n) % n;
    const int recv_chunk = (r - k - 2 + 2 * n) % n;
    const std::size_t send_bytes = size_of(send_chunk) * sizeof(float);
    const std::size_t recv_count = size_of(recv_chunk);
    // Post the receive before sending so the neighbour's send can complete.
    if (recv_count > 0) inbox_buf_->recv(left, s, 0, recv_count * sizeof(float));
    gloo::transport::UnboundBuffer& out_buf = k == 0 ? input_buf : *partial_buf_;
    if (send_bytes > 0) {
      if (k == 0) {
        input_buf.send(right, s, offset[send_chunk] * sizeof(float), send_bytes);
      } else {
        partial_buf_->send(right, s, 0, send_bytes);
      }
    }
    if (recv_count > 0) inbox_buf_->waitRecv(timeout);
    // The partial sum just sent is overwritten below: wait until it left.
    if (send_bytes > 0) out_buf.waitSend(timeout);
    float* target = k == n - 2 ? output.data() : partial_.data();
    const float* mine = input.data() + offset[recv_chunk];
    for (std::size_t i = 0; i < recv_count; ++i) target[i] = inbox_[i] + mine[i];
  }
}

void RingState::all_gather(std::span<const float> input, std::span<float> output,
                           std::span<const int64_t> counts, std::uint32_t tag, Millis timeout) {
  const int n = ctx_->size, r = ctx_->rank;
  std::vector<std::size_t> offset(static_cast<std::size_t>(n) + 1, 0);
  for (int c = 0; c < n; ++c) offset[c + 1] = offset[c] + static_cast<std::size_t>(counts[c]);
  float* mine = output.data() + offset[r];
  if (input.data() != mine) std::copy(input.begin(), input.end(), mine);
  if (n == 1 || output.empty()) return;
  const std::uint64_t s = slot(kAllGatherSlotPrefix, tag);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  gloo::transport::UnboundBuffer& out_buf = registered(output.data(), output.size());
  // Step k of n-1: forward chunk (r-k), which we own or received last step, to the right and
  // receive chunk (r-k-1) from the left, straight into its place in the output.
  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = (r - k + n) % n;
    const int recv_chunk = (r - k - 1 + 2 * n) % n;
    const std::size_t send_bytes = static_cast<std::size_t>(counts[send_chunk]) * sizeof(float);
    const std::size_t recv_bytes = static_cast<std::size_t>(counts[recv_chunk]) * sizeof(float);
    if (recv_bytes > 0) out_buf.recv(left, s, offset[recv_chunk] * sizeof(float), recv_bytes);
    if (send_bytes > 0) out_buf.send(right, s, offset[send_chunk] * sizeof(float), send_bytes);
    if (recv_bytes > 0) out_buf.waitRecv(timeout);
    if (send_bytes > 0) out_buf.waitSend(timeout);
  }
}

void all_gather(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input,
                std::span<float> output, std::uint32_t tag, Millis timeout) {
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

void broadcast(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int root,
               std::uint32_t tag, Millis timeout) {
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

void send(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> buf, int peer,
          std::uint32_t tag, Millis timeout) {
  if (buf.empty()) return;
  auto ub = ctx->createUnboundBuffer(mutable_ptr(buf), buf.size() * sizeof(float));
  ub->send(peer, slot(kPointToPointSlotPrefix, tag));
  ub->waitSend(timeout);
}

void recv(const std::shared_ptr<gloo::Context>& ctx, std::span<float> buf, int peer,
          std::uint32_t tag, Millis timeout) {
  if (buf.empty()) return;
  auto ub = ctx->createUnboundBuffer(buf.data(), buf.size() * sizeof(float));
  ub->recv(peer, slot(kPointToPointSlotPrefix, tag));
  ub->waitRecv(timeout);
}

}  // namespace parlab::comm::gloo_backend
