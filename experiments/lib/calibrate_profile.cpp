#include "experiments/lib/calibrate_profile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "runtime/model/lab_mlp.h"
#include "runtime/train/data.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/trainer.h"
#include "strategy/cost_model.h"
#include "strategy/errors.h"
#include "strategy/step_program.h"
#include "strategy/stats.h"

namespace parlab::experiments {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace

WorkloadProfile profile_workload(const strategy::ModelSpec& m, int64_t b, int repeats, strategy::Precision precision) {
  if (repeats < 1) throw ConfigError("repeats", std::to_string(repeats), "must be >= 1");
  if (m.kind != strategy::ModelKind::kMlp) throw ConfigError("model", m.name, "the workload profile runs the lab MLP");
  if (b <= 0) throw ConfigError("microbatch", std::to_string(b), "must be positive");
  const model::MlpShape shape = train::mlp_shape(m);
  model::LabMlp net(shape, 1);
  if (precision == strategy::Precision::kMixed) net.set_mixed_precision(true);
  train::SyntheticDataset data({.seed = 1, .size = b * (4 * repeats + 1), .width = m.hidden, .classes = m.classes});
  auto opt = train::make_optimizer(train::AdamWConfig{}, {0, int64_t(net.params().size())});
  std::vector<double> fwdbwd, fill, update, clear, fwdbwd_warm;
  std::vector<int64_t> indices(size_t(b), 0);
  // The trainer's order per step: data, forward and backward of every microbatch (the gradients
  // accumulate), the optimizer. Step 0 warms up (page faults, first-touch of the buffers).
  for (int i = 0; i <= repeats; ++i) {
    // Small workloads repeat more (a second and a half of timed work, up to 4x the repeats), so
    // that neither a few preempted microbatches nor a slow half second of a shared machine
    // (seen: a 0.45 s profile 11% slower than the 1-worker steps measured seconds later) sets the
    // rates every prediction uses.
    if (i == 1 && !fwdbwd_warm.empty()) repeats = std::clamp(int(1.5 / fwdbwd_warm.back()), repeats, 4 * repeats);
    std::iota(indices.begin(), indices.end(), int64_t(i) * b);
    auto mb = net.new_microbatch(b, b);
    auto t0 = Clock::now();
    net.zero_grads();
    const double z = since(t0);
    t0 = Clock::now();
    data.fill(indices, mb);
    const double d = since(t0);
    t0 = Clock::now();
    net.forward(mb);
    net.backward(mb);
    const double c = since(t0);
    t0 = Clock::now();
    opt->step(net.params(), net.grads());
    const double u = since(t0);
    if (i == 0) {
      fwdbwd_warm.push_back(c + d + u);
      continue;
    }
    fill.push_back(d), fwdbwd.push_back(c), update.push_back(u), clear.push_back(z);
  }
  WorkloadProfile p;
  p.microbatch = b;
  p.parameters = int64_t(net.params().size());
  p.repeats = repeats;
  const auto c = strategy::spread_of(fwdbwd), u = strategy::spread_of(update);
  p.fwdbwd_seconds = c.median, p.fwdbwd_spread = c.relative();
  p.optimizer_seconds = u.median, p.optimizer_spread = u.relative();
  p.data_seconds = strategy::median(fill);
  p.clear_seconds = strategy::median(clear);
  return p;
}

strategy::ClusterSpec cluster_for_profile(const strategy::ClusterSpec& cluster, const strategy::ModelSpec& model,
                                          const strategy::Plan& plan, const WorkloadProfile& p) {
  if (!cluster.calibrated || cluster.name != "cpu-local" || plan.tp != 1 || plan.pp != 1 || p.microbatch_seconds() <= 0 ||
      p.optimizer_seconds <= 0)
    return cluster;
  strategy::Plan one = plan;
  one.microbatch = p.microbatch;
  const strategy::LayerRange all{0, int(model.layer_list().size())};
  const double flops = strategy::forward_flops(model, one, all) + strategy::backward_flops(model, one, all);
  strategy::ClusterSpec c = cluster;
  c.device.peak_flops_fp32 = c.device.peak_flops_bf16 = flops / p.microbatch_seconds();
  c.device.gemm_efficiency = 1.0;
  c.device.memory_bytes_per_s = double(p.parameters) * strategy::optimizer_traffic_bytes_per_param(plan) / p.optimizer_seconds;
  c.device.memory_efficiency = 1.0;
  return c;
}

std::string describe(const WorkloadProfile& p, const strategy::ClusterSpec& profiled) {
  // The gradient clear as the cost model charges it (a kZeroGrad op of the parameters' fp32
  // gradients at the update's rate), beside the profile's own measurement of it.
  strategy::Op clear;
  clear.kind = strategy::OpKind::kZeroGrad;
  clear.memory_bytes = double(p.parameters) * strategy::grad_accumulation_bytes_per_element(strategy::Plan{});
  const double modelled = strategy::compute_seconds_alone(clear, profiled, strategy::Precision::kFp32);
  char b[512];
  std::snprintf(b, sizeof b,
                "compute model: a profile of this workload on one core (median of %d microbatches of %lld after a "
                "warm-up): forward+backward %.2f ms +-%.0f%%, data %.2f ms -> %.1f GFLOP/s; AdamW over %.1f M "
                "parameters %.2f ms -> %.2f GB/s (gradient clear: measured %.2f ms, modelled %.2f ms); "
                "communication from the calibration",
                p.repeats, (long long)p.microbatch, p.fwdbwd_seconds * 1e3, 100 * p.fwdbwd_spread, p.data_seconds * 1e3,
                profiled.device.peak_flops_fp32 / 1e9, double(p.parameters) / 1e6, p.optimizer_seconds * 1e3,
                profiled.device.memory_bytes_per_s / 1e9, p.clear_seconds * 1e3, modelled * 1e3);
  return b;
}

}  // namespace parlab::experiments
