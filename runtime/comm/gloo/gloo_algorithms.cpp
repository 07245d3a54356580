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

void reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, std::span<const float> input,
                    std::span<float> output, std::uint32_t tag, Millis timeout) {
  const int n = ctx->size, r = ctx->rank;
  const std::size_t count = output.size(), chunk_bytes = count * sizeof(float);
  auto chunk = [&](int c) { return input.data() + static_cast<std::size_t>(c) * count; };
  if (n == 1 || count == 0) {
    std::copy_n(input.data(), count, output.data());
    return;
  }
  const std::uint64_t s = slot(kReduceScatterSlotPrefix, tag);
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  std::vector<float> partial(count), inbox(count);
  auto input_buf = ctx->createUnboundBuffer(mutable_ptr(input), input.size() * sizeof(float));
  auto partial_buf = ctx->createUnboundBuffer(partial.data(), chunk_bytes);
  auto inbox_buf = ctx->createUnboundBuffer(inbox.data(), chunk_bytes);

  // Step k of n-1: pass the partial sum of chunk (r-k-1) to the right, receive the partial sum
  // of chunk (r-k-2) from the left and add our own contribution. After n-1 steps the chunk that
  // arrives is chunk r, summed over every rank.
  for (int k = 0; k < n - 1; ++k) {
    const int send_chunk = (r - k - 1 + 2 * n) % n;
    const int recv_chunk = (r - k - 2 + 2 * n) % n;
    // Post the receive before sending so the neighbour's send can complete.
    inbox_buf->recv(left, s);
    auto& out_buf = k == 0 ? input_buf : partial_buf;
    if (k == 0) {
      input_buf->send(right, s, static_cast<std::size_t>(send_chunk) * chunk_bytes, chunk_bytes);
    } else {
      partial_buf->send(right, s);
    }
    inbox_buf->waitRecv(timeout);
    // The partial sum just sent is overwritten below: wait until it left.
    out_buf->waitSend(timeout);
    float* target = k == n - 2 ? output.data() : partial.data();
    const float* mine = chunk(recv_chunk);
    for (std::size_t i = 0; i < count; ++i) target[i] = inbox[i] + mine[i];
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
