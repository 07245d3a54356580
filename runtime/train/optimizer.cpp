#include "runtime/train/optimizer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "strategy/errors.h"

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
    throw ConfigError("optimizer range",
                      "[" + std::to_string(range.begin) + ", " + std::to_string(range.end) + ")",
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
    throw RuntimeError(std::string(kind()) + " step: got " + std::to_string(params.size()) +
                       " params and " + std::to_string(grads.size()) + " grads for a range of " +
                       std::to_string(n));
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
                       std::to_string(state.range.end) + "), this optimizer [" +
                       std::to_string(range_.begin) + ", " + std::to_string(range_.end) + ")");
  }
  if (state.buffers.size() != buffers_.size()) {
    throw RuntimeError(what + "expected " + std::to_string(buffers_.size()) + " buffers, got " +
                       std::to_string(state.buffers.size()));
  }
  for (const auto& [name, values] : state.buffers) {
    auto it = buffers_.find(name);
    if (it == buffers_.end()) throw RuntimeError(what + "unexpected buffer '" + name + "'");
    if (values.size() != it->second.size()) {
      throw RuntimeError(what + "buffer '" + name + "' has " + std::to_string(values.size()) +
                         " elements, expected " + std::to_string(it->second.size()));
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

void AdamW::update(float* p, const float* g, int64_t n) {
  // Scalars in double as PyTorch computes them in Python, then rounded once to fp32.
  const double t = static_cast<double>(steps_);
  const double bias_correction1 = 1.0 - std::pow(config_.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(config_.beta2, t);
  const float step_size = static_cast<float>(config_.lr / bias_correction1);
  const float bias_correction2_sqrt = static_cast<float>(std::sqrt(bias_correction2));
  const float decay = static_cast<float>(1.0 - config_.lr * config_.weight_decay);
  const float w = static_cast<float>(1.0 - config_.beta1);
  const float beta2 = static_cast<float>(config_.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - config_.beta2);
  const float eps = static_cast<float>(config_.eps);
  const bool decays = config_.weight_decay != 0.0;
  float* m = exp_avg_->data();
  float* v = exp_avg_sq_->data();
  for (int64_t i = 0; i < n; ++i) {
    if (decays) p[i] = p[i] * decay;
    // torch.lerp picks the form that is exact at its nearer end point.
    m[i] = (w < 0.5f) ? m[i] + w * (g[i] - m[i]) : g[i] - (g[i] - m[i]) * (1.0f - w);
    v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    p[i] = p[i] - step_size * (m[i] / denom);
  }
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
      slices.push_back(NamedStateSlice{
          t.name + "." + name, begin - t.offset,
          std::span<const float>(values).subspan(begin - state.range.begin, end - begin)});
    }
  }
  return slices;
}

}  // namespace parlab::train
