#include "runtime/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "base/errors.h"

namespace parlab::train {
namespace {

void require_at_least(const char* field, double value, double min) {
  if (!(value >= min)) {
    throw ConfigError(field, std::to_string(value), "must be >= " + std::to_string(min));
  }
}

void require_fraction(const char* field, double value) {
  if (!(value >= 0.0 && value < 1.0)) {
    throw ConfigError(field, std::to_string(value), "must be in [0, 1)");
  }
}

void require_range(model::FlatRange range) {
  if (range.begin < 0 || range.end < range.begin) {
    throw ConfigError("optimizer range", "[" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ")",
                      "must satisfy 0 <= begin <= end");
  }
}

}  // namespace

// ---- Optimizer ------------------------------------------------------------------------------

model::CountedVector<float>& Optimizer::add_buffer(const std::string& name) {
  auto [it, inserted] =
      buffers_.emplace(name, model::counted_vector<float>(account_, model::MemoryCategory::kOptimizer));
  it->second.assign(range_.numel(), 0.0f);
  return it->second;
}

void Optimizer::step(std::span<float> params, std::span<const float> grads) {
  const auto n = static_cast<size_t>(range_.numel());
  if (params.size() != n || grads.size() != n) {
    throw RuntimeError(std::string(kind()) + " step: got " + std::to_string(params.size()) + " params and " +
                       std::to_string(grads.size()) + " grads for a range of " + std::to_string(n));
  }
  ++steps_;
  update(params.data(), grads.data(), range_.numel());
}

OptimizerState Optimizer::state() const {
  std::map<std::string, std::vector<float>> copies;
  for (const auto& [name, values] : buffers_) copies[name].assign(values.begin(), values.end());
  return OptimizerState{std::string(kind()), range_, std::move(copies), {{"step", steps_}}};
}

void Optimizer::load_state(const OptimizerState& state) {
  const std::string what = std::string(kind()) + " load_state: ";
  if (state.kind != kind()) throw RuntimeError(what + "state is for '" + state.kind + "'");
  if (!(state.range == range_)) {
    throw RuntimeError(what + "state covers [" + std::to_string(state.range.begin) + ", " +
                       std::to_string(state.range.end) + "), this optimizer [" + std::to_string(range_.begin) + ", " +
                       std::to_string(range_.end) + ")");
  }
  if (state.buffers.size() != buffers_.size()) {
    throw RuntimeError(what + "expected " + std::to_string(buffers_.size()) + " buffers, got " +
                       std::to_string(state.buffers.size()));
  }
  for (const auto& [name, values] : state.buffers) {
    auto it = buffers_.find(name);
    if (it == buffers_.end()) throw RuntimeError(what + "unexpected buffer '" + name + "'");
    if (values.size() != it->second.size()) {
      throw RuntimeError(what + "buffer '" + name + "' has " + std::to_string(values.size()) + " elements, expected " +
                         std::to_string(it->second.size()));
    }
  }
  auto step = state.scalars.find("step");
  if (step == state.scalars.end() || step->second < 0) {
    throw RuntimeError(what + "missing or negative scalar 'step'");
  }
  // Copy element-wise into the existing buffers so derived classes' references stay valid.
  for (const auto& [name, values] : state.buffers) buffers_.at(name).assign(values.begin(), values.end());
  steps_ = step->second;
}

std::vector<std::string> Optimizer::buffer_names() const {
  std::vector<std::string> names;
  for (const auto& [name, values] : buffers_) names.push_back(name);
  return names;
}

std::span<const float> Optimizer::buffer(const std::string& name) const {
  const auto it = buffers_.find(name);
  if (it == buffers_.end()) throw RuntimeError(std::string(kind()) + " has no state buffer '" + name + "'");
  return it->second;
}

std::span<float> Optimizer::mutable_buffer(const std::string& name) {
  const auto it = buffers_.find(name);
  if (it == buffers_.end()) throw RuntimeError(std::string(kind()) + " has no state buffer '" + name + "'");
  return it->second;
}

void Optimizer::set_steps(int64_t steps) {
  if (steps < 0) throw RuntimeError(std::string(kind()) + ": negative step count " + std::to_string(steps));
  steps_ = steps;
}

// ---- SGD ------------------------------------------------------------------------------------

Sgd::Sgd(const SgdConfig& config, model::FlatRange range, model::MemoryAccount* account)
    : Optimizer(range, account), config_(config) {
  require_range(range);
  require_at_least("optimizer.lr", config.lr, 0.0);
  require_at_least("optimizer.momentum", config.momentum, 0.0);
  require_at_least("optimizer.weight_decay", config.weight_decay, 0.0);
  if (config.nesterov && config.momentum == 0.0) {
    throw ConfigError("optimizer.nesterov", "true", "needs momentum > 0 (as in PyTorch)");
  }
  if (config.momentum != 0.0) momentum_buffer_ = &add_buffer("momentum_buffer");
}

void Sgd::update(float* p, const float* g, int64_t n) {
  // Hyper-parameters enter the fp32 arithmetic as fp32, as PyTorch's kernels take them.
  const float lr = static_cast<float>(config_.lr);
  const float wd = static_cast<float>(config_.weight_decay);
  const float mom = static_cast<float>(config_.momentum);
  const bool first = (steps_ == 1);
  float* buf = momentum_buffer_ != nullptr ? momentum_buffer_->data() : nullptr;
  for (int64_t i = 0; i < n; ++i) {
    float d = g[i];
    if (wd != 0.0f) d = d + wd * p[i];
    if (buf != nullptr) {
      buf[i] = first ? d : mom * buf[i] + d;
      d = config_.nesterov ? d + mom * buf[i] : buf[i];
    }
    p[i] = p[i] - lr * d;
  }
}

// ---- AdamW ----------------------------------------------------------------------------------

AdamW::AdamW(const AdamWConfig& config, model::FlatRange range, model::MemoryAccount* account)
    : Optimizer(range, account), config_(config) {
  require_range(range);
  require_at_least("optimizer.lr", config.lr, 0.0);
  require_fraction("optimizer.beta1", config.beta1);
  require_fraction("optimizer.beta2", config.beta2);
  require_at_least("optimizer.eps", config.eps, 0.0);
  require_at_least("optimizer.weight_decay", config.weight_decay, 0.0);
  exp_avg_ = &add_buffer("exp_avg");
  exp_avg_sq_ = &add_buffer("exp_avg_sq");
}

namespace {

// One streaming pass over p, g, m, v (28 bytes per element: 16 read, 12 written). The branches
// on hyper-parameters are hoisted into template arguments so the loop body is straight-line and
// the compiler vectorises it (AVX-512 / AVX2 clones; optimizer.cpp is compiled with
// -fno-math-errno so sqrt is the vector instruction, and -ffp-contract=off so every clone rounds
// like the scalar code: IEEE sqrt and division are exact in every width). The CUDA kernel
// (adamw_step in runtime/compute/cuda/kernels.cu) is this loop body, operation for operation.
template <bool kDecays, bool kNearM>
__attribute__((target_clones("avx512f", "avx2", "default"))) void adamw_pass(float* __restrict p,
                                                                             const float* __restrict g,
                                                                             float* __restrict m, float* __restrict v,
                                                                             int64_t n, AdamWStepScalars k) {
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    const float gi = g[i];
    if (kDecays) pi = pi * k.decay;
    // torch.lerp picks the form that is exact at its nearer end point.
    const float mi = kNearM ? m[i] + k.w * (gi - m[i]) : gi - (gi - m[i]) * (1.0f - k.w);
    const float vi = v[i] * k.beta2 + k.one_minus_beta2 * gi * gi;
    const float denom = std::sqrt(vi) / k.bias_correction2_sqrt + k.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - k.step_size * (mi / denom);
  }
}

}  // namespace

AdamWStepScalars AdamW::step_scalars() const {
  // Scalars in double as PyTorch computes them in Python, then rounded once to fp32.
  const double t = static_cast<double>(steps_);
  const double bias_correction1 = 1.0 - std::pow(config_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(config_.beta2, t);
  AdamWStepScalars k{.step_size = static_cast<float>(config_.lr / bias_correction1),
                     .bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
                     .decay = static_cast<float>(1.0 - config_.lr * config_.weight_decay),
                     .w = static_cast<float>(1.0 - config_.beta1),
                     .beta2 = static_cast<float>(config_.beta2),
                     .one_minus_beta2 = static_cast<float>(1.0 - config_.beta2),
                     .eps = static_cast<float>(config_.eps)};
  k.decays = config_.weight_decay != 0.0;
  k.near_m = k.w < 0.5f;
  return k;
}

void AdamW::update(float* p, const float* g, int64_t n) {
  const AdamWStepScalars k = step_scalars();
  float* m = exp_avg_->data();
  float* v = exp_avg_sq_->data();
  if (k.decays && k.near_m)
    adamw_pass<true, true>(p, g, m, v, n, k);
  else if (k.decays)
    adamw_pass<true, false>(p, g, m, v, n, k);
  else if (k.near_m)
    adamw_pass<false, true>(p, g, m, v, n, k);
  else
    adamw_pass<false, false>(p, g, m, v, n, k);
}

// ---- helpers --------------------------------------------------------------------------------

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, model::FlatRange range,
                                          model::MemoryAccount* account) {
  if (const auto* sgd = std::get_if<SgdConfig>(&config)) return std::make_unique<Sgd>(*sgd, range, account);
  return std::make_unique<AdamW>(std::get<AdamWConfig>(config), range, account);
}

std::vector<NamedStateSlice> per_parameter_state(const OptimizerState& state,
                                                 std::span<const model::ParamTensor> params) {
  std::vector<NamedStateSlice> slices;
  for (const model::ParamTensor& t : params) {
    const int64_t begin = std::max(t.offset, state.range.begin);
    const int64_t end = std::min(t.offset + t.numel, state.range.end);
    if (begin >= end) continue;
    for (const auto& [name, values] : state.buffers) {
      slices.push_back(NamedStateSlice{t.name + "." + name, begin - t.offset,
                                       std::span<const float>(values).subspan(begin - state.range.begin, end - begin)});
    }
  }
  return slices;
}

}  // namespace parlab::train
