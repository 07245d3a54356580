#pragma once
// Optimizers over a flat range [begin, end) of the flat parameter / gradient buffers (a ZeRO
// shard updates only its range; a replica's range is everything). PyTorch semantics
// (torch.optim.SGD with dampening = 0, torch.optim.AdamW), fp32 state, element-wise and
// therefore deterministic and independent of how the flat buffer is split into ranges.
//
// State is exposed as named flat buffers of length end - begin plus integer scalars, the way a
// checkpoint saves it; load_state(state()) continues bit-identically. per_parameter_state() cuts
// the buffers at parameter boundaries under PyTorch's names ("blocks.0.fc1.weight.exp_avg").
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "runtime/model/memory_account.h"
#include "runtime/model/param_layout.h"

namespace parlab::train {

// torch.optim.SGD(lr, momentum, dampening=0, weight_decay, nesterov):
//   g = grad + weight_decay * p
//   buf = g                      (first step)      buf = momentum * buf + g   (later steps)
//   g = nesterov ? g + momentum * buf : buf        (only when momentum != 0)
//   p = p - lr * g
struct SgdConfig {
  double lr = 0.01;
  double momentum = 0.0;
  double weight_decay = 0.0;
  bool nesterov = false;
};

// torch.optim.AdamW(lr, betas, eps, weight_decay), t = step count after increment:
//   p = p * (1 - lr * weight_decay)
//   m = lerp(m, g, 1 - beta1)          = m + (1 - beta1) (g - m)
//   v = beta2 v + (1 - beta2) g^2
//   p = p - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
struct AdamWConfig {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

using OptimizerConfig = std::variant<SgdConfig, AdamWConfig>;

// Everything needed to continue an optimizer exactly.
struct OptimizerState {
  std::string kind;                                   // "sgd" | "adamw"
  model::FlatRange range;                             // flat range the buffers cover
  std::map<std::string, std::vector<float>> buffers;  // "momentum_buffer" | "exp_avg", "exp_avg_sq"
  std::map<std::string, int64_t> scalars;             // "step": optimizer steps taken
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string_view kind() const = 0;
  // The hyper-parameters, lr included (a device twin of this optimizer reads them).
  virtual OptimizerConfig config() const = 0;
  model::FlatRange range() const { return range_; }
  int64_t steps() const { return steps_; }
  // Learning rate of the next step (schedules set it each step; it is config, not state).
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;

  // One update. params and grads hold exactly the elements [begin, end) of the flat buffers
  // (span size must equal range().numel(); throws RuntimeError otherwise).
  void step(std::span<float> params, std::span<const float> grads);

  OptimizerState state() const;
  // Throws RuntimeError if kind, range, buffer names or sizes do not match.
  void load_state(const OptimizerState& state);

  // The state buffers in place (no copy), for checkpoints of large models: names in sorted
  // order, each range().numel() long. A checkpoint load writes into mutable_buffer() and then
  // restores the step counter with set_steps(). Unknown names throw RuntimeError.
  std::vector<std::string> buffer_names() const;
  std::span<const float> buffer(const std::string& name) const;
  std::span<float> mutable_buffer(const std::string& name);
  void set_steps(int64_t steps);

  // For an update that runs elsewhere (a device optimizer, device_optimizer.h, updates the
  // compute buffers with its own copy of the state): counts the step as step() does, without
  // touching the buffers here, which then lag until the device's state is copied back.
  void count_external_step() { ++steps_; }

 protected:
  // State buffers are charged to `account`'s optimizer category (null: uncounted).
  Optimizer(model::FlatRange range, model::MemoryAccount* account) : range_(range), account_(account) {}
  // Updates n elements; steps_ already counts this step.
  virtual void update(float* p, const float* g, int64_t n) = 0;
  // Adds a named state buffer of range().numel() zeros; the reference stays valid (map node).
  model::CountedVector<float>& add_buffer(const std::string& name);

  int64_t steps_ = 0;

 private:
  model::FlatRange range_;
  model::MemoryAccount* account_ = nullptr;
  std::map<std::string, model::CountedVector<float>> buffers_;
};

class Sgd final : public Optimizer {
 public:
  Sgd(const SgdConfig& config, model::FlatRange range, model::MemoryAccount* account = nullptr);
  std::string_view kind() const override { return "sgd"; }
  OptimizerConfig config() const override { return config_; }
  double lr() const override { return config_.lr; }
  void set_lr(double lr) override { config_.lr = lr; }

 private:
  void update(float* p, const float* g, int64_t n) override;

  SgdConfig config_;
  model::CountedVector<float>* momentum_buffer_ = nullptr;  // null when momentum == 0 (PyTorch: None)
};

// The fp32 scalars of one AdamW step, in the forms the element-wise pass uses: every kernel
// (the CPU pass here, the CUDA one in runtime/compute/cuda/kernels.h) takes exactly these, so
// the devices agree bit for bit on the per-element arithmetic.
struct AdamWStepScalars {
  float step_size = 0;              // lr / (1 - beta1^t)
  float bias_correction2_sqrt = 0;  // sqrt(1 - beta2^t)
  float decay = 1;                  // 1 - lr * weight_decay
  float w = 0;                      // 1 - beta1 (lerp weight)
  float beta2 = 0;
  float one_minus_beta2 = 0;
  float eps = 0;
  bool decays = false;  // weight_decay != 0: p is multiplied by `decay` first
  bool near_m = false;  // w < 0.5: torch.lerp's form exact at m (else the one exact at g)
};

class AdamW final : public Optimizer {
 public:
  AdamW(const AdamWConfig& config, model::FlatRange range, model::MemoryAccount* account = nullptr);
  std::string_view kind() const override { return "adamw"; }
  OptimizerConfig config() const override { return config_; }
  double lr() const override { return config_.lr; }
  void set_lr(double lr) override { config_.lr = lr; }
  // The scalars of the step steps() counts (t = steps(), after step()'s increment).
  AdamWStepScalars step_scalars() const;

 private:
  void update(float* p, const float* g, int64_t n) override;

  AdamWConfig config_;
  model::CountedVector<float>* exp_avg_ = nullptr;
  model::CountedVector<float>* exp_avg_sq_ = nullptr;
};

// Validates the config (ConfigError naming e.g. "optimizer.lr") and builds the optimizer.
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, model::FlatRange range,
                                          model::MemoryAccount* account = nullptr);

// A state buffer cut at parameter boundaries: the part of `param`'s state inside state.range.
struct NamedStateSlice {
  std::string name;          // "<param>.<buffer>", e.g. "head.weight.exp_avg"
  int64_t param_offset = 0;  // first element of the parameter this slice covers
  std::span<const float> values;
};
std::vector<NamedStateSlice> per_parameter_state(const OptimizerState& state,
                                                 std::span<const model::ParamTensor> params);

}  // namespace parlab::train
