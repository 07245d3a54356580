// GEMM time with wave quantization (cost_model.h, GemmTimes), and an op's compute time from it.
// A GPU computes a GEMM's output in tiles, one thread block per tile, and runs as many tiles at
// once as it has SMs (one 256x128 tile per SM on A100: NVIDIA, "Matrix Multiplication Background
// User's Guide", wave quantization). A GEMM of T tiles therefore takes ceil(T / SMs) waves, and
// the last one leaves SMs idle: it runs at the rate of whole waves times T / (ceil(T / SMs) SMs).
// The preset's gemm_efficiency is the best shape's measured rate (the MAMF table's best shape
// fills whole waves), so this factor is what a transformer's own shapes lose on top of it.
// Nothing here is fitted: the shapes are Megatron's (Shoeybi et al. 2019) and the tile and SM
// count the device's.
#include <algorithm>
#include <cmath>

#include "strategy/cost_model.h"

namespace parlab::strategy {
namespace {

struct Gemm {
  double m = 0, n = 0, k = 0;
  double batch = 1;  // independent GEMMs of this shape in one launch (attention heads)
  double flops() const { return 2 * m * n * k * batch; }
};

// Flops-weighted time factor (>= 1) of a set of GEMMs against whole waves: sum of flops / wave
// efficiency, kept as "effective FLOPs" so the caller divides by the best-shape rate.
double wave_flops(const std::vector<Gemm>& gemms, const DeviceSpec& d) {
  double out = 0;
  for (const Gemm& g : gemms) {
    // The tile fits either way round (cuBLAS has 256x128 and 128x256 kernels): the fewer tiles.
    const double a = std::ceil(g.m / d.gemm_tile_rows) * std::ceil(g.n / d.gemm_tile_cols);
    const double b = std::ceil(g.m / d.gemm_tile_cols) * std::ceil(g.n / d.gemm_tile_rows);
    const double tiles = std::min(a, b) * g.batch;
    const double waves = std::ceil(tiles / d.sms);
    out += g.flops() * waves * d.sms / tiles;
  }
  return out;
}

// The forward GEMMs of one transformer block for one microbatch on one rank (tokens T = b s,
// the tensor-parallel split t): QKV, the attention scores and context (batched over b a / t
// heads), the output projection, the MLP.
struct BlockGemms {
  std::vector<Gemm> linear;     // Y[T x out] = X[T x in] W
  std::vector<Gemm> attention;  // Q K^T and P V
};
BlockGemms block_gemms(const ModelSpec& m, const Plan& p) {
  const double t = p.tp, T = double(p.microbatch) * double(m.seq_len), s = double(m.seq_len);
  const double h = double(m.hidden), f = double(m.ffn), d = h / double(m.heads);
  const double kv = m.kv_heads > 0 ? double(m.kv_heads) * d : h;
  const double heads = double(p.microbatch) * double(m.heads) / t;
  BlockGemms g;
  g.linear.push_back({T, (h + 2 * kv) / t, h});
  g.linear.push_back({T, h, h / t});
  if (m.gated_mlp) {
    g.linear.push_back({T, 2 * f / t, h});
  } else {
    g.linear.push_back({T, f / t, h});
  }
  g.linear.push_back({T, h, f / t});
  g.attention.push_back({s, s, d, heads});
  g.attention.push_back({s, d, s, heads});
  return g;
}

// Backward of Y = X W (X: T x in, W: in x out): dX = dY W^T (T x in, inner out) and
// dW = X^T dY (in x out, inner T). Of the scores S = Q K^T: dQ = dS K, dK = dS^T Q (s x d,
// inner s); of the context C = P V: dP = dC V^T (s x s, inner d), dV = P^T dC (s x d, inner s).
std::vector<Gemm> backward_of(const BlockGemms& g) {
  std::vector<Gemm> out;
  for (const Gemm& l : g.linear) {
    out.push_back({l.m, l.k, l.n});
    out.push_back({l.k, l.n, l.m});
  }
  const Gemm& sc = g.attention[0];
  out.push_back({sc.m, sc.k, sc.n, sc.batch});
  out.push_back({sc.m, sc.k, sc.n, sc.batch});
  out.push_back({sc.m, sc.n, sc.k, sc.batch});
  out.push_back({sc.m, sc.k, sc.n, sc.batch});
  return out;
}

std::vector<Gemm> concat(std::vector<Gemm> a, const std::vector<Gemm>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

GemmTimes::GemmTimes(const ModelSpec& m, const Plan& p, const ClusterSpec& c) : GemmTimes(m, m.layer_list(), p, c) {}

GemmTimes::GemmTimes(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p, const ClusterSpec& c) {
  const DeviceSpec& d = c.device;
  uniform_ = gemm_rate_factors(m, p, c);
  if (m.kind != ModelKind::kTransformer || d.sms <= 0 || d.gemm_tile_rows <= 0 || d.gemm_tile_cols <= 0) return;
  const BlockGemms block = block_gemms(m, p);
  const std::vector<Gemm> fwd = concat(block.linear, block.attention);
  std::vector<Gemm> bwd = backward_of(block);
  if (p.recompute == Recompute::kFull) bwd = concat(bwd, fwd);
  if (p.recompute == Recompute::kSelective) bwd = concat(bwd, block.attention);
  const double T = double(p.microbatch) * double(m.seq_len);
  const Gemm logits{T, double(m.vocab) / p.tp, double(m.hidden)};
  const std::vector<Gemm> head_fwd{logits};
  const std::vector<Gemm> head_bwd{{logits.m, logits.k, logits.n}, {logits.k, logits.n, logits.m}};
  // Per layer: effective over nominal FLOPs, applied to the FLOPs the step program counts.
  auto ratio = [&](const std::vector<Gemm>& g) {
    double nominal = 0;
    for (const Gemm& x : g) nominal += x.flops();
    return nominal > 0 ? wave_flops(g, d) / nominal : 1.0;
  };
  forward_factor_.resize(layers.size(), 1.0);
  backward_factor_.resize(layers.size(), 1.0);
  const double block_fwd = ratio(fwd), block_bwd = ratio(bwd), hf = ratio(head_fwd), hb = ratio(head_bwd);
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].kind == LayerKind::kBlock) forward_factor_[i] = block_fwd, backward_factor_[i] = block_bwd;
    if (layers[i].kind == LayerKind::kHead) forward_factor_[i] = hf, backward_factor_[i] = hb;
  }
  flops_ = [&] {
    std::vector<double> f(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) f[i] = layers[i].forward_flops_per_token;
    return f;
  }();
}

double gemm_rate_factor(const ModelSpec& m, const Plan& p, const ClusterSpec& c) {
  if (m.kind != ModelKind::kMlp || c.device.gemm_rates.empty() || p.microbatch <= 0 || p.tp <= 0) return 1;
  return c.device_flops_per_s(Precision::kFp32) /
         gemm_rate_at(c.device.gemm_rates, p.microbatch, m.hidden, m.ffn / p.tp);
}

GemmRateFactors gemm_rate_factors(const ModelSpec& m, const Plan& p, const ClusterSpec& c) {
  const double one = gemm_rate_factor(m, p, c);
  const int group = weight_grad_group(p);
  const auto& grid = c.device.gemm_rates;
  if (one == 1 || group <= 1 ||
      std::any_of(grid.begin(), grid.end(), [](const GemmRatePoint& x) { return !(x.forward_flops_per_s > 0); }))
    return {one, one};
  std::vector<GemmRatePoint> forward = grid;
  for (GemmRatePoint& x : forward) x.flops_per_s = x.forward_flops_per_s;
  const int64_t f = m.ffn / p.tp, rows = p.microbatch * group;
  const double rf = gemm_rate_at(forward, p.microbatch, m.hidden, f);
  const double rf_group = gemm_rate_at(forward, rows, m.hidden, f), r_group = gemm_rate_at(grid, rows, m.hidden, f);
  // Seconds per forward FLOP: the forward, and the backward's two parts.
  const double t_forward = 1 / rf, t_weight_grads = std::max(0.0, 3 / r_group - 2 / rf_group);
  const double device = c.device_flops_per_s(Precision::kFp32);
  return {device * t_forward, device * (t_forward + t_weight_grads) / 2};
}

double GemmTimes::effective_flops(const Op& op) const {
  if (op.kind == OpKind::kForward && uniform_.forward != 1) return op.flops * uniform_.forward;
  if (op.kind == OpKind::kBackward && uniform_.backward != 1) return op.flops * uniform_.backward;
  if (forward_factor_.empty() || (op.kind != OpKind::kForward && op.kind != OpKind::kBackward)) return op.flops;
  // The op's FLOPs split over its layers in proportion to their forward FLOPs per token (every
  // block of a model has the same), each scaled by its layer's factor.
  double total = 0, scaled = 0;
  const auto& factor = op.kind == OpKind::kForward ? forward_factor_ : backward_factor_;
  for (int i = op.layers.begin; i < op.layers.end && i < int(flops_.size()); ++i) {
    total += flops_[i];
    scaled += flops_[i] * factor[i];
  }
  return total > 0 ? op.flops * scaled / total : op.flops;
}

// ---- an op's compute time (GEMMs at their rate above, the rest at the memory rate) -------------

double rank_flops_per_s(const ClusterSpec& c, const Plan& plan) {
  double rate = c.device_flops_per_s(plan.precision);
  if (c.shares_cores() && c.devices_per_node > c.cores_per_node) rate *= double(c.cores_per_node) / c.devices_per_node;
  return rate;
}

double compute_seconds_alone(const Op& op, const ClusterSpec& c, Precision precision, const GemmTimes* gemms) {
  const double rate = c.device_flops_per_s(precision);
  const double mem_bw = c.device.achieved_memory_bytes_per_s();
  // The optimizer is one fused, bandwidth-bound kernel: the roofline. A forward or backward is a
  // sequence of kernels -- GEMMs at the GEMM rate, then elementwise ops, norms and softmax at
  // the memory rate -- that do not overlap one another on a device, so their times add.
  if (op.kind == OpKind::kOptimizer) return std::max(op.flops / rate, op.memory_bytes / mem_bw);
  // Clearing a buffer writes every byte of it. A CPU core's stores to lines it does not hold
  // first read them (read for ownership), so a worker process's clear moves twice the bytes it
  // writes; a GPU writes whole sectors without reading them.
  const double rfo = c.shares_cores() ? 2 : 1;
  // Where weight-gradient groups write the blocks' weights with their first product (the CPU
  // runtime), the clear leaves them.
  if (op.kind == OpKind::kZeroGrad)
    return (op.memory_bytes - (c.shares_cores() ? op.first_write_bytes : 0)) * rfo / mem_bw;
  const double flops = gemms ? gemms->effective_flops(op) : op.flops;
  return flops / rate + op.memory_bytes / mem_bw + bucket_work_seconds(op, c);
}

bool overlaps_compute_on(const Op& op, const StepProgram& program, const ClusterSpec& cluster) {
  return op.overlaps_compute && !(cluster.shares_cores() && program.groups[op.group].size() > cluster.cores_per_node);
}

double comm_cpu_bytes(const Op& op, int n) {
  return ring_link_bytes(collective_of(op.kind), op.bytes, n, op.overlaps_compute ? -1 : op.min_chunk_bytes);
}

double bucket_work_seconds(const Op& op, const ClusterSpec& c) {
  if (op.zeroed_bytes <= 0 && op.accumulated_bytes <= 0) return 0;
  // Zeroing as a clear is priced (read for ownership on a CPU), an add as two reads and a write.
  const double mem_bw = c.device.achieved_memory_bytes_per_s(), rfo = c.shares_cores() ? 2 : 1;
  return op.zeroed_bytes * rfo / mem_bw + 3 * op.accumulated_bytes / mem_bw;
}

double compute_time(const Op& op, const ClusterSpec& c, const Plan& plan, const GemmTimes* gemms) {
  double t = compute_seconds_alone(op, c, plan.precision, gemms);
  if (c.shares_cores() && c.devices_per_node > c.cores_per_node) t *= double(c.devices_per_node) / c.cores_per_node;
  return t;
}

}  // namespace parlab::strategy
