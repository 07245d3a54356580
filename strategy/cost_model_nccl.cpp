// NCCL's ring protocols on NVLink inside one node: why small and mid-size collectives fall short
// of the link's plateau. Constants are NCCL's own tuning model (NVIDIA/nccl v2.28.7-1,
// src/graph/tuning.cc, ncclTopoTuneModel), not fitted to any nccl-tests figure:
//
//   per call    baseLat[Ring]          LL 6.6 us, LL128 14.0 us, Simple 8.4 us
//   per step    hwLat[NVLINK][Ring]    LL 0.6 us, LL128 1.9 us,  Simple 3.4 us
//   bandwidth   Simple  the ring's bus bandwidth (here the preset's measured plateau, B)
//               LL128   0.92 B (120 of every 128 bytes carry data), at most perChMaxRingLL128Bw
//                       per channel -- not binding with NCCL's channel counts on NVSwitch
//               LL      B / 4 for all-reduce, B / 3 for reduce-scatter and all-gather (8-byte
//                       stores of 4 data bytes and a flag, from registers), at most llMaxBw:
//                       87.7 GB/s on Ampere, 141 GB/s on Hopper, one node
//
// and, as NCCL's tuner does, every call takes the fastest protocol:
//   t_p = base_p + steps(op, n) hw_p + factor(op, n) S / bw_p
// (an uneven reduce-scatter or all-gather, run as one rooted reduce or broadcast per chunk:
// (S - c_min) / bw_p, collectives.h's ring_link_bytes).
//
// NCCL's tuning model is what NCCL uses to choose, not a measurement: on 8 x A100 it puts 16 MiB
// at 169 GB/s where nccl-tests runs measure 100-138. A preset that carries nccl-tests' measured
// all-reduce curve (LinkSpec::measured_*, with its sources in the preset) is timed from the curve
// instead: t = factor(op, n) S / busbw_op(S), all-gather and reduce-scatter from their own curves
// where measured. busbw is nccl-tests' normalisation (comparable across rank counts), so groups
// smaller than the node take the same curve.
#include <algorithm>
#include <cmath>
#include <limits>

#include "strategy/cost_model.h"
#include "base/errors.h"

namespace parlab::strategy {
namespace {

constexpr double kUs = 1e-6;
constexpr double kGBps = 1e9;

struct ProtocolConstants {
  double base_us, step_us;
};
constexpr ProtocolConstants kRingNvlink[] = {{6.6, 0.6}, {14.0, 1.9}, {8.4, 3.4}};  // LL, LL128, Simple

// llMaxBws, one node: Ampere (NVLink3) and Hopper (NVLink4) rows.
double ll_max_bytes_per_s(const ClusterSpec& c) { return (c.intra.kind == "nvlink3" ? 87.7 : 141.0) * kGBps; }

double protocol_bytes_per_s(NcclProtocol p, CollectiveOp op, const ClusterSpec& c) {
  const double b = c.intra.achieved_bytes_per_s();
  switch (p) {
    case NcclProtocol::kSimple:
      return b;
    case NcclProtocol::kLL128:
      return 0.92 * b;
    case NcclProtocol::kLL:
      return std::min(ll_max_bytes_per_s(c), b * (op == CollectiveOp::kAllReduce ? 0.25 : 1.0 / 3));
    case NcclProtocol::kMeasured:
      break;  // not one of the model's protocols: nccl_ring_protocol_time refuses it
  }
  return b;
}

}  // namespace

std::string_view to_string(NcclProtocol p) {
  switch (p) {
    case NcclProtocol::kLL:
      return "LL";
    case NcclProtocol::kLL128:
      return "LL128";
    case NcclProtocol::kSimple:
      return "Simple";
    case NcclProtocol::kMeasured:
      return "measured";
  }
  return "?";
}

bool uses_nccl_protocols(const ClusterSpec& c) { return c.intra.kind.rfind("nvlink", 0) == 0; }

ProtocolTime nccl_ring_protocol_time(CollectiveOp op, double bytes, int n, const ClusterSpec& c, NcclProtocol p,
                                     double min_chunk_bytes) {
  if (p == NcclProtocol::kMeasured)
    throw RuntimeError("nccl_ring_protocol_time: \"measured\" is a preset's curve, not one of NCCL's protocols");
  ProtocolTime t;
  t.protocol = p;
  if (n <= 1) return t;
  const ProtocolConstants& k = kRingNvlink[int(p)];
  t.base_seconds = k.base_us * kUs;
  t.step_seconds = k.step_us * kUs;
  t.bus_bytes_per_s = protocol_bytes_per_s(p, op, c);
  t.seconds = t.base_seconds + ring_steps(op, n) * t.step_seconds +
              ring_link_bytes(op, bytes, n, min_chunk_bytes) / t.bus_bytes_per_s;
  return t;
}

double measured_ring_busbw(const LinkSpec& l, CollectiveOp op, double bytes, int n) {
  const auto& size = l.measured_sizes_bytes;
  const auto& busbw = l.measured_busbw(op);
  if (bytes >= size.back()) return busbw.back();
  if (bytes >= size.front()) {
    size_t i = 0;
    while (size[i + 1] < bytes) ++i;
    const double w = std::log(bytes / size[i]) / std::log(size[i + 1] / size[i]);
    return busbw[i] + w * (busbw[i + 1] - busbw[i]);
  }
  // Below the curve: time along the first two points (the parser requires two),
  // t(S) = t0 - (S0 - S) (t1 - t0) / (S1 - S0); no faster than t0 if the curve's time fell there.
  const double f = bus_bandwidth_factor(op, n);
  const double t0 = f * size[0] / busbw[0], t1 = f * size[1] / busbw[1];
  const double t = t1 > t0 ? t0 - (size[0] - bytes) * (t1 - t0) / (size[1] - size[0]) : t0;
  return f * bytes / t;
}

ProtocolTime nccl_ring_time(CollectiveOp op, double bytes, int n, const ClusterSpec& c, double min_chunk_bytes) {
  if (c.intra.has_measured_ring() && n > 1) {
    ProtocolTime t;
    t.protocol = NcclProtocol::kMeasured;
    t.bus_bytes_per_s = measured_ring_busbw(c.intra, op, bytes, n);
    t.seconds = ring_link_bytes(op, bytes, n, min_chunk_bytes) / t.bus_bytes_per_s;
    return t;
  }
  ProtocolTime best;
  best.seconds = std::numeric_limits<double>::infinity();
  for (NcclProtocol p : {NcclProtocol::kLL, NcclProtocol::kLL128, NcclProtocol::kSimple}) {
    const ProtocolTime t = nccl_ring_protocol_time(op, bytes, n, c, p, min_chunk_bytes);
    if (t.seconds < best.seconds) best = t;
  }
  return best;
}

}  // namespace parlab::strategy
