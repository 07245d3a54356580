#pragma once
// Collective operations and the bandwidth bookkeeping of nccl-tests, defined once for the cost
// model, the simulator's checks, the runtime's telemetry, the benchmarks and the GUI.
//
// Size convention (as nccl-tests): `bytes` is the size S of the whole tensor a collective is
// about -- the buffer of an all-reduce, the *output* of an all-gather (n pieces of S/n), the
// *input* of a reduce-scatter (n pieces of S/n), the buffer of a broadcast.
//
// algbw = S / t: how fast the user's tensor moved.
// busbw = algbw * factor(n): the bandwidth each link must sustain, comparable across n and ops,
// and directly comparable with a link's peak. Derivation (ring on n ranks, S bytes):
//   - all-reduce = reduce-scatter + all-gather: every rank sends 2(n-1) chunks of S/n, so
//     t = 2(n-1)/n * S / B  =>  factor 2(n-1)/n.
//   - reduce-scatter, all-gather: every rank sends (n-1) chunks of S/n  =>  factor (n-1)/n.
//   - broadcast (pipelined): the root's S bytes cross each link once  =>  factor 1.
#include <cmath>
#include <optional>
#include <string>
#include <string_view>

namespace parlab::strategy {

enum class CollectiveOp { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

inline double bus_bandwidth_factor(CollectiveOp op, int n_ranks) {
  if (n_ranks <= 1) return 0.0;  // nothing crosses a link
  const double n = n_ranks;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather:
      return (n - 1) / n;
    case CollectiveOp::kBroadcast:
      return 1.0;
  }
  return 0.0;
}

// Steps a ring takes: an all-reduce is a reduce-scatter then an all-gather, n-1 steps each; a
// reduce-scatter, all-gather or (pipelined, chained) broadcast takes n-1.
inline int ring_steps(CollectiveOp op, int n_ranks) {
  if (n_ranks <= 1) return 0;
  return op == CollectiveOp::kAllReduce ? 2 * (n_ranks - 1) : n_ranks - 1;
}

// Bytes the busiest link of a ring carries over one collective: factor(op, n) x S when the
// chunks are balanced (S/n each), the nccl-tests convention above. A reduce-scatter or all-gather
// may have uneven chunks: ZeRO's shards are contiguous 1/n of the flat buffer, so a layer or a
// bucket usually lies mostly or wholly in one rank's shard. Its chunks still travel the ring (in
// segments forwarded as they land: runtime/comm RingState; NCCL as one rooted reduce or
// broadcast per chunk), and the link into rank r carries every chunk but r's own, S - c_r bytes;
// the busiest carries
//   S - c_min                 (c_min: the smallest chunk; balanced, S - S/n = factor x S),
// up to S when one rank owns everything -- a broadcast, n/(n-1) times the balanced ring.
// `min_chunk_bytes` < 0 means balanced; all-reduce and broadcast ignore it.
inline double ring_link_bytes(CollectiveOp op, double bytes, int n_ranks, double min_chunk_bytes = -1) {
  if (n_ranks <= 1) return 0;
  const bool uneven = min_chunk_bytes >= 0 && (op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
  return uneven ? bytes - min_chunk_bytes : bus_bandwidth_factor(op, n_ranks) * bytes;
}

// The ring's alpha-beta time, the one definition the cost model, the scaling lab and the
// calibration fit share: every step pays the latency a, and the busiest link carries
// ring_link_bytes (balanced: bus_bandwidth_factor(op, n) x S) at B bytes/s:
//   t = ring_steps(op, n) a + factor(op, n) S / B        (uneven RS/AG: (S - c_min) / B).
// An infinite B (the `ideal` cluster) moves bytes for free.
inline double ring_collective_seconds(CollectiveOp op, double bytes, int n_ranks, double latency_seconds,
                                      double bytes_per_s, double min_chunk_bytes = -1) {
  if (n_ranks <= 1) return 0;
  const double link_bytes = ring_link_bytes(op, bytes, n_ranks, min_chunk_bytes);
  return ring_steps(op, n_ranks) * latency_seconds + (std::isinf(bytes_per_s) ? 0.0 : link_bytes / bytes_per_s);
}

inline double algbw_bytes_per_s(double bytes, double seconds) { return bytes / seconds; }

inline double busbw_bytes_per_s(CollectiveOp op, int n_ranks, double bytes, double seconds) {
  return algbw_bytes_per_s(bytes, seconds) * bus_bandwidth_factor(op, n_ranks);
}

// "all-reduce", "reduce-scatter", "all-gather", "broadcast".
std::string_view to_string(CollectiveOp op);
// Accepts the names above and the CLI spellings "allreduce", "reducescatter", "allgather".
std::optional<CollectiveOp> parse_collective_op(std::string_view text);

}  // namespace parlab::strategy
