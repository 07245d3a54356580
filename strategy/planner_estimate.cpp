// The planner's closed-form pre-filter (quick_estimate, planner.h): a plan's step from its slowest
// stage's compute, tensor-parallel collectives, the pipeline bubble and data parallelism's
// exposed time, without building a step program.
#include <algorithm>
#include <cmath>

#include "strategy/cost_model.h"
#include "strategy/partition.h"
#include "strategy/planner.h"

namespace parlab::strategy {
namespace {

double stage_params_held(const std::vector<LayerSpec>& layers, const std::vector<LayerRange>& chunks, int tp) {
  double n = 0;
  for (const auto& r : chunks)
    for (int i = r.begin; i < r.end; ++i)
      for (const auto& t : layers[i].params)
        n += t.tp_split == TpSplit::kReplicated ? double(t.numel) : double(t.numel) / tp;
  return n;
}

// Data parallelism's exposed time on the slowest stage (`slow_stage`, holding `held` parameters,
// its forward and backward taking tf and tb a microbatch).
double dp_exposed(const std::vector<LayerSpec>& layers, const Plan& p, const ClusterSpec& c,
                  const std::vector<LayerRange>& stages, int slow_stage, double held, double tf_slow, double tb_slow) {
  const double mcount = double(p.microbatches);
  const auto g = dp_group(p, rank_of(p, {0, 0, slow_stage}));
  const double grad_bytes = held * grad_bytes_per_element(p);
  const int buckets = std::max(1, int(std::ceil(grad_bytes / p.bucket_bytes)));
  const CollectiveOp op = p.zero == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
  const double sync = buckets * collective_time(op, grad_bytes / buckets, g, c).seconds;
  const double window = tb_slow * (buckets - 1) / buckets;
  double exposed = std::max(sync / buckets, sync - window);
  if (p.zero >= 2) exposed *= mcount;  // gradients reduce-scattered after every microbatch
  if (p.zero == 1 || p.zero == 2)
    exposed +=
        buckets * collective_time(CollectiveOp::kAllGather, held * param_bytes_per_element(p) / buckets, g, c).seconds;
  if (p.zero == 3) {
    // Blocks repeat: price each distinct layer size once.
    double gathers = 0, last_n = -1, last_t = 0;
    for (const auto& r : stage_chunks(stages, p, slow_stage))
      for (int i = r.begin; i < r.end; ++i) {
        double n = 0;
        for (const auto& t : layers[i].params)
          n += t.tp_split == TpSplit::kReplicated ? double(t.numel) : double(t.numel) / p.tp;
        if (n != last_n)
          last_n = n, last_t = collective_time(CollectiveOp::kAllGather, n * param_bytes_per_element(p), g, c).seconds;
        gathers += 2 * last_t;
      }
    exposed += mcount * std::max(0.0, gathers - (tf_slow + tb_slow));
  }
  return exposed;
}

}  // namespace

QuickEstimate quick_estimate(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                             const ClusterSpec& c) {
  QuickEstimate q;
  const GemmRateFactors factors = gemm_rate_factors(m, p, c);
  const double rate_f = rank_flops_per_s(c, p) / factors.forward, rate_b = rank_flops_per_s(c, p) / factors.backward;
  const double tp_bytes = tp_collective_bytes(m, p);
  // One TP collective (an all-reduce, or a reduce-scatter plus an all-gather under SP).
  double t_tp = 0;
  if (p.tp > 1) {
    const auto g = tp_group(p, 0);
    t_tp = p.sequence_parallel ? collective_time(CollectiveOp::kReduceScatter, tp_bytes, g, c).seconds +
                                     collective_time(CollectiveOp::kAllGather, tp_bytes, g, c).seconds
                               : collective_time(CollectiveOp::kAllReduce, tp_bytes, g, c).seconds;
  }
  // The slowest stage sets the pipeline's pace.
  double slot = 0, slot_compute = 0, slot_tp = 0, tb_slow = 0, tf_slow = 0, held = 0;
  int slow_stage = 0;
  const auto stages = virtual_stages(layers, p);
  for (int s = 0; s < p.pp; ++s) {
    const auto chunks = stage_chunks(stages, p, s);
    double tf = 0, tb = 0;
    int count = 0;
    for (const auto& r : chunks) {
      tf += forward_flops(m, layers, p, r) / rate_f;
      tb += backward_flops(m, layers, p, r) / rate_b;
      if (p.tp > 1)
        for (int i = r.begin; i < r.end; ++i)
          count += layers[i].tp_collectives_forward + layers[i].tp_collectives_backward;
    }
    const double t = tf + tb + count * t_tp;
    if (t > slot) {
      slot = t, slot_compute = tf + tb, slot_tp = count * t_tp, tb_slow = tb, tf_slow = tf, slow_stage = s;
      held = stage_params_held(layers, chunks, p.tp);
    }
  }
  const double mcount = double(p.microbatches);
  q.compute_seconds = mcount * slot_compute;
  q.tp_comm_seconds = mcount * slot_tp;
  if (p.pp > 1) {
    const double p2p = p2p_time(boundary_activation_bytes(m, p), 0, rank_of(p, {0, 0, 1}), c);
    q.bubble_seconds = (p.pp - 1) * slot / p.v + 2 * (p.pp - 1) * p2p;
  }
  // Data parallelism on the slowest stage.
  if (p.dp > 1) q.dp_exposed_seconds = dp_exposed(layers, p, c, stages, slow_stage, held, tf_slow, tb_slow);
  Op opt;
  opt.kind = OpKind::kOptimizer;
  const double shard = p.zero >= 1 ? held / p.dp : held;
  opt.flops = shard * optimizer_flops_per_param(p);
  opt.memory_bytes = shard * optimizer_traffic_bytes_per_param(p);
  Op clear;  // the step's gradient clear (the whole local buffer; its shard under ZeRO-2/3)
  clear.kind = OpKind::kZeroGrad;
  clear.memory_bytes = (p.zero >= 2 ? held / p.dp : held) * grad_accumulation_bytes_per_element(p);
  clear.first_write_bytes = double(first_write_grad_elements(m, p)) * grad_accumulation_bytes_per_element(p);
  q.optimizer_seconds = compute_time(opt, c, p) + compute_time(clear, c, p);
  q.step_seconds =
      q.compute_seconds + q.tp_comm_seconds + q.bubble_seconds + q.dp_exposed_seconds + q.optimizer_seconds;
  return q;
}

}  // namespace parlab::strategy
