#include "runtime/model/cuda/device_mlp.h"

#include <algorithm>
#include <string>

#include "runtime/gpu/device.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/model/lab_mlp.h"

namespace parlab::compute::cuda {
namespace {
// Position of a tensor inside its layer, in flat order (as runtime/model/lab_mlp.cpp).
constexpr int kFc1Weight = 0, kFc1Bias = 1, kFc2Weight = 2, kFc2Bias = 3;
constexpr int kHeadWeight = 0, kHeadBias = 1;
constexpr int kTensorsPerBlock = 4;
}  // namespace

// What one microbatch holds on the device, sized for max_batch. Boundary tensor l lives at
// acts + l * max_batch * h (a fixed stride, so a smaller microbatch reuses the same storage).
struct DeviceMlpSlot {
  DeviceMlpSlot(const model::MlpShape& s, int64_t max_b)
      : acts(static_cast<size_t>((s.blocks + 1) * max_b * s.hidden)),
        dacts(acts.size()),
        pre(static_cast<size_t>(s.blocks * max_b * s.ffn)),
        post(pre.size()),
        logits(static_cast<size_t>(max_b * s.classes)),
        probs(logits.size()),
        losses(static_cast<size_t>(max_b)),
        labels(static_cast<size_t>(max_b)),
        saved(static_cast<size_t>(s.blocks), 0),
        has_act(static_cast<size_t>(s.blocks + 1), 0),
        has_dact(static_cast<size_t>(s.blocks + 1), 0) {}

  DeviceBuffer<float> acts, dacts, pre, post, logits, probs, losses;
  DeviceBuffer<int32_t> labels;
  int64_t batch = 0;
  float loss_scale = 1.0f;
  std::vector<char> saved, has_act, has_dact;
  bool head_saved = false;
};

// Parameters, gradients and the backward scratch once; activations per slot. The members the
// kernels read (acts, batch, ...) are the selected slot's.
struct DeviceMlp::State {
  State(const model::MlpShape& s, int64_t max_b, int slot_count, DeviceMlp::Storage storage)
      : layout(s),
        max_batch(max_b),
        blas(stream.get()),
        params(storage.params ? static_cast<size_t>(layout.numel()) : 0),
        grads(storage.grads ? static_cast<size_t>(layout.numel()) : 0),
        scratch(static_cast<size_t>(max_b * std::max(s.ffn, s.classes))) {
    // Tensors without storage of their own start unbound (null): ZeRO binds them.
    for (const model::ParamTensor& t : layout.tensors()) {
      param_at.push_back(storage.params ? params.data() + t.offset : nullptr);
      grad_at.push_back(storage.grads ? grads.data() + t.offset : nullptr);
    }
    slots.reserve(static_cast<size_t>(slot_count));
    for (int k = 0; k < slot_count; ++k) slots.emplace_back(s, max_b);
  }

  const model::MlpShape& shape() const { return layout.shape(); }
  DeviceMlpSlot& cur() { return slots[static_cast<size_t>(current)]; }
  const DeviceMlpSlot& cur() const { return slots[static_cast<size_t>(current)]; }
  float* act(int l) const { return cur().acts.data() + l * max_batch * shape().hidden; }
  float* dact(int l) const { return cur().dacts.data() + l * max_batch * shape().hidden; }
  float* pre_of(int i) const { return cur().pre.data() + i * max_batch * shape().ffn; }
  float* post_of(int i) const { return cur().post.data() + i * max_batch * shape().ffn; }
  const model::ParamTensor& tensor_of(int layer, int which) const {
    return layout.tensors()[static_cast<size_t>(layer) * kTensorsPerBlock + which];
  }
  size_t index_of(int layer, int which) const { return static_cast<size_t>(layer) * kTensorsPerBlock + which; }
  const float* param(int layer, int which) const {
    const float* p = param_at[index_of(layer, which)];
    if (p == nullptr)
      throw RuntimeError("parameters of " + tensor_of(layer, which).name +
                         " are not resident on the GPU (a ZeRO-3 layer is gathered before it computes)");
    return p;
  }
  float* grad(int layer, int which) const {
    float* g = grad_at[index_of(layer, which)];
    if (g == nullptr)
      throw RuntimeError("no gradient buffer is bound on the GPU for " + tensor_of(layer, which).name +
                         " (a ZeRO-2/3 bucket is bound before its backward)");
    return g;
  }
  // Points the tensors of `range` (whole tensors only) into `storage`; empty: unbound.
  void bind(std::vector<float*>& where, model::FlatRange range, std::span<float> storage, const char* what) {
    if (!storage.empty() && static_cast<int64_t>(storage.size()) != range.numel())
      throw RuntimeError(std::string("DeviceMlp bind ") + what + ": " + std::to_string(storage.size()) +
                         " elements for a range of " + std::to_string(range.numel()));
    for (size_t i = 0; i < layout.tensors().size(); ++i) {
      const model::ParamTensor& t = layout.tensors()[i];
      if (t.offset + t.numel <= range.begin || t.offset >= range.end) continue;
      if (!range.contains({t.offset, t.offset + t.numel}))
        throw RuntimeError(std::string("DeviceMlp bind ") + what + ": range [" + std::to_string(range.begin) + ", " +
                           std::to_string(range.end) + ") cuts tensor " + t.name);
      where[i] = storage.empty() ? nullptr : storage.data() + (t.offset - range.begin);
    }
  }

  model::ParamLayout layout;
  int64_t max_batch;
  Stream stream;  // before blas: the handle is bound to it
  CublasHandle blas;
  DeviceBuffer<float> params, grads, scratch;
  // Per tensor (layout order): where the layers read its parameters and write its gradients --
  // its place in params / grads, or a buffer bound by bind_params / bind_grads (null: unbound).
  std::vector<float*> param_at, grad_at;
  std::vector<DeviceMlpSlot> slots;
  int current = 0;
  bool tp_partial = false;
  DeviceBuffer<float> zero_bias;  // (h) zeros: fc2's partial sum takes its bias after the reduction
};

DeviceMlp::DeviceMlp(const model::MlpShape& shape, std::span<const float> host_params, int64_t max_batch, int device,
                     int slots, Storage storage)
    : device_(device) {
  shape.validate();
  if (max_batch < 1) throw ConfigError("max_batch", std::to_string(max_batch), "must be >= 1");
  if (slots < 1) throw ConfigError("slots", std::to_string(slots), "must be >= 1");
  const model::ParamLayout layout(shape);
  if (!host_params.empty() && static_cast<int64_t>(host_params.size()) != layout.numel()) {
    throw ConfigError(
        "host_params elements", std::to_string(host_params.size()),
        "must equal the lab-mlp's " + std::to_string(layout.numel()) + " parameters (whole network), or be empty");
  }
  if (!storage.params && !host_params.empty())
    throw ConfigError("host_params elements", std::to_string(host_params.size()),
                      "must be empty for a DeviceMlp that keeps no parameters (ZeRO-3)");
  DeviceGuard guard(device);
  state_ = std::make_unique<State>(shape, max_batch, slots, storage);
  if (host_params.empty())
    state_->params.zero(state_->stream.get());
  else
    state_->params.upload(host_params, state_->stream.get());
  state_->grads.zero(state_->stream.get());
  state_->stream.synchronize();
}

DeviceMlp DeviceMlp::from_seed(const model::MlpShape& shape, uint64_t seed, int64_t max_batch, int device) {
  const model::LabMlp host(shape, seed);
  return DeviceMlp(shape, host.params(), max_batch, device);
}

DeviceMlp::~DeviceMlp() {
  if (!state_) return;
  try {
    DeviceGuard guard(device_);
    state_.reset();
  } catch (const std::exception&) {
    state_.reset();  // the device is gone (sticky fault): release what can be released
  }
}

DeviceMlp::DeviceMlp(DeviceMlp&&) noexcept = default;
DeviceMlp& DeviceMlp::operator=(DeviceMlp&&) noexcept = default;

const model::MlpShape& DeviceMlp::shape() const { return state_->shape(); }
const model::ParamLayout& DeviceMlp::layout() const { return state_->layout; }
int64_t DeviceMlp::max_batch() const { return state_->max_batch; }
cudaStream_t DeviceMlp::stream() const { return state_->stream.get(); }
const CublasHandle& DeviceMlp::blas() const { return state_->blas; }
DeviceMlp::Footprint DeviceMlp::footprint() const {
  Footprint f;
  f.params = static_cast<int64_t>(state_->params.bytes());
  f.grads = static_cast<int64_t>(state_->grads.bytes());
  f.scratch = static_cast<int64_t>(state_->scratch.bytes() + state_->zero_bias.bytes());
  for (const DeviceMlpSlot& slot : state_->slots)
    f.activations +=
        static_cast<int64_t>(slot.acts.bytes() + slot.dacts.bytes() + slot.pre.bytes() + slot.post.bytes() +
                             slot.logits.bytes() + slot.probs.bytes() + slot.losses.bytes() + slot.labels.bytes());
  return f;
}

std::span<float> DeviceMlp::params() { return state_->params.span(); }
std::span<float> DeviceMlp::grads() { return state_->grads.span(); }
void DeviceMlp::bind_params(model::FlatRange range, std::span<float> storage) {
  state_->bind(state_->param_at, range, storage, "parameters");
}
void DeviceMlp::bind_grads(model::FlatRange range, std::span<float> storage) {
  state_->bind(state_->grad_at, range, storage, "gradients");
}
int64_t DeviceMlp::batch() const { return state_->cur().batch; }
float DeviceMlp::loss_scale() const { return state_->cur().loss_scale; }
int DeviceMlp::slots() const { return static_cast<int>(state_->slots.size()); }
int DeviceMlp::slot() const { return state_->current; }

void DeviceMlp::select_slot(int slot) {
  if (slot < 0 || slot >= slots())
    throw RuntimeError("select_slot(" + std::to_string(slot) + "): slots are 0.." + std::to_string(slots() - 1));
  state_->current = slot;
}

void DeviceMlp::upload_params(std::span<const float> host) {
  DeviceGuard guard(device_);
  state_->params.upload(host, stream());
}

void DeviceMlp::download_params(std::span<float> host) const {
  DeviceGuard guard(device_);
  state_->params.download(host, stream());
}

void DeviceMlp::download_grads(std::span<float> host) const {
  DeviceGuard guard(device_);
  state_->grads.download(host, stream());
}

void DeviceMlp::zero_grads() {
  DeviceGuard guard(device_);
  state_->grads.zero(stream());
}

void DeviceMlp::synchronize() const {
  DeviceGuard guard(device_);
  state_->stream.synchronize();
}

void DeviceMlp::set_microbatch(std::span<const float> x, std::span<const int32_t> labels, int64_t global_batch) {
  set_microbatch_at(0, x, labels, global_batch);
}

void DeviceMlp::set_microbatch_at(int layer, std::span<const float> x, std::span<const int32_t> labels,
                                  int64_t global_batch) {
  if (layer < 0 || layer > shape().blocks)
    throw RuntimeError("set_microbatch_at(" + std::to_string(layer) + "): layers are 0.." +
                       std::to_string(shape().blocks));
  const int64_t B = static_cast<int64_t>(labels.size()), h = shape().hidden;
  if (static_cast<int64_t>(x.size()) != B * h) {
    throw ConfigError("x elements", std::to_string(x.size()), "must be batch * hidden = " + std::to_string(B * h));
  }
  begin_microbatch(labels, global_batch);
  DeviceGuard guard(device_);
  copy_to_device(state_->act(layer), x.data(), x.size_bytes(), stream());
  state_->cur().has_act[static_cast<size_t>(layer)] = 1;
}

void DeviceMlp::begin_microbatch(std::span<const int32_t> labels, int64_t global_batch) {
  State& s = *state_;
  const int64_t B = static_cast<int64_t>(labels.size()), C = shape().classes;
  if (B > s.max_batch) {
    throw ConfigError("microbatch", std::to_string(B), "must be <= max_batch (" + std::to_string(s.max_batch) + ")");
  }
  if (global_batch < 1 || global_batch < B) {
    throw ConfigError("global_batch", std::to_string(global_batch),
                      "must be >= 1 and >= the microbatch (" + std::to_string(B) + ")");
  }
  for (int64_t b = 0; b < B; ++b) {
    if (labels[b] < 0 || labels[b] >= C) {
      throw ConfigError("labels[" + std::to_string(b) + "]", std::to_string(labels[b]),
                        "must be a class in [0, " + std::to_string(C) + ")");
    }
  }
  DeviceGuard guard(device_);
  copy_to_device(s.cur().labels.data(), labels.data(), labels.size_bytes(), stream());
  s.cur().batch = B;
  s.cur().loss_scale = static_cast<float>(1.0 / static_cast<double>(global_batch));
  std::fill(s.cur().saved.begin(), s.cur().saved.end(), 0);
  std::fill(s.cur().has_act.begin(), s.cur().has_act.end(), 0);
  std::fill(s.cur().has_dact.begin(), s.cur().has_dact.end(), 0);
  s.cur().head_saved = false;
}

namespace {
void check_boundary(const char* what, int l, int64_t blocks, size_t got, int64_t want) {
  if (l < 0 || l > blocks)
    throw RuntimeError(std::string(what) + "(" + std::to_string(l) + "): boundaries are 0.." + std::to_string(blocks));
  if (static_cast<int64_t>(got) != want)
    throw RuntimeError(std::string(what) + "(" + std::to_string(l) + "): " + std::to_string(got) +
                       " elements, the microbatch has batch * hidden = " + std::to_string(want));
}
}  // namespace

void DeviceMlp::set_activation(int l, std::span<const float> x) {
  State& s = *state_;
  check_boundary("set_activation", l, shape().blocks, x.size(), s.cur().batch * shape().hidden);
  DeviceGuard guard(device_);
  copy_to_device(s.act(l), x.data(), x.size_bytes(), stream());
  s.cur().has_act[static_cast<size_t>(l)] = 1;
}

std::span<float> DeviceMlp::boundary(int l, bool gradient) {
  State& s = *state_;
  if (l < 0 || l > shape().blocks)
    throw RuntimeError("boundary(" + std::to_string(l) + "): boundaries are 0.." + std::to_string(shape().blocks));
  (gradient ? s.cur().has_dact : s.cur().has_act)[static_cast<size_t>(l)] = 1;
  return {gradient ? s.dact(l) : s.act(l), static_cast<size_t>(s.cur().batch * shape().hidden)};
}

void DeviceMlp::set_tp_partial(bool on) {
  State& s = *state_;
  if (on && s.zero_bias.size() == 0) {
    DeviceGuard guard(device_);
    s.zero_bias = DeviceBuffer<float>(static_cast<size_t>(shape().hidden));
    s.zero_bias.zero(stream());
  }
  s.tp_partial = on;
}

void DeviceMlp::check_tp_rows(const char* what, int layer, int64_t row_begin, int64_t row_end) const {
  if (layer < 0 || layer >= shape().blocks || row_begin < 0 || row_end < row_begin || row_end > state_->cur().batch)
    throw RuntimeError(std::string(what) + "(" + std::to_string(layer) + ", rows " + std::to_string(row_begin) + ".." +
                       std::to_string(row_end) + "): no such block or rows");
}

void DeviceMlp::tp_finish_forward(int layer, int64_t row_begin, int64_t row_end) {
  State& s = *state_;
  check_tp_rows("tp_finish_forward", layer, row_begin, row_end);
  DeviceGuard guard(device_);
  const int64_t h = shape().hidden;
  bias_residual_accumulate(stream(), s.act(layer + 1) + row_begin * h, s.param(layer, kFc2Bias),
                           s.act(layer) + row_begin * h, (row_end - row_begin) * h, h);
}

void DeviceMlp::tp_finish_backward(int layer, int64_t row_begin, int64_t row_end) {
  State& s = *state_;
  check_tp_rows("tp_finish_backward", layer, row_begin, row_end);
  DeviceGuard guard(device_);
  const int64_t h = shape().hidden;
  residual_backward(stream(), s.dact(layer) + row_begin * h, nullptr, s.dact(layer + 1) + row_begin * h,
                    (row_end - row_begin) * h);
}

void DeviceMlp::forward_layer(int layer) {
  State& s = *state_;
  const int L = static_cast<int>(shape().blocks);
  if (layer < 0 || layer > L) {
    throw RuntimeError("forward_layer(" + std::to_string(layer) + "): layers are 0.." + std::to_string(L));
  }
  if (!s.cur().has_act[layer]) {
    throw RuntimeError("forward_layer(" + std::to_string(layer) + "): activation(" + std::to_string(layer) +
                       ") was never set");
  }
  DeviceGuard guard(device_);
  const int64_t B = s.cur().batch, h = shape().hidden, f = shape().ffn, C = shape().classes;
  const cudaStream_t st = stream();
  if (layer == L) {
    // logits (B, C) = head(x_L); probs, losses from the labels
    linear_forward(s.blas, s.cur().logits.data(), s.act(L), s.param(L, kHeadWeight), s.param(L, kHeadBias), B, h, C);
    softmax_cross_entropy_forward(st, s.cur().losses.data(), s.cur().probs.data(), s.cur().logits.data(),
                                  s.cur().labels.data(), B, C);
    s.cur().head_saved = true;
    return;
  }
  const int i = layer;
  // pre (B, f) = x @ W1^T + b1;  post = gelu(pre);  y (B, h) = post @ W2^T + b2 + x
  linear_forward(s.blas, s.pre_of(i), s.act(i), s.param(i, kFc1Weight), s.param(i, kFc1Bias), B, h, f);
  gelu_forward(st, s.post_of(i), s.pre_of(i), B * f);
  linear_forward(s.blas, s.act(i + 1), s.post_of(i), s.param(i, kFc2Weight),
                 s.tp_partial ? s.zero_bias.data() : s.param(i, kFc2Bias), B, f, h);
  if (!s.tp_partial) residual_forward(st, s.act(i + 1), s.act(i + 1), s.act(i), B * h);
  s.cur().saved[i] = 1;
  s.cur().has_act[i + 1] = 1;
}

void DeviceMlp::backward_layer(int layer) {
  State& s = *state_;
  const int L = static_cast<int>(shape().blocks);
  if (layer < 0 || layer > L) {
    throw RuntimeError("backward_layer(" + std::to_string(layer) + "): layers are 0.." + std::to_string(L));
  }
  DeviceGuard guard(device_);
  const int64_t B = s.cur().batch, h = shape().hidden, f = shape().ffn, C = shape().classes;
  const cudaStream_t st = stream();
  if (layer == L) {
    if (!s.cur().head_saved) throw RuntimeError("backward_layer(head) before its forward_layer");
    float* dlogits = s.scratch.data();  // (B, C)
    softmax_cross_entropy_backward(st, dlogits, s.cur().probs.data(), s.cur().labels.data(), s.cur().loss_scale, B, C);
    // dactivation(L) is produced here, not accumulated from elsewhere: start from zero.
    zero_on_device(s.dact(L), static_cast<size_t>(B * h) * sizeof(float), st);
    linear_backward(s.blas, s.dact(L), s.grad(L, kHeadWeight), s.grad(L, kHeadBias), dlogits, s.act(L),
                    s.param(L, kHeadWeight), B, h, C);
    s.cur().head_saved = false;
    s.cur().has_dact[L] = 1;
    return;
  }
  const int i = layer;
  if (!s.cur().saved[i]) {
    throw RuntimeError("backward_layer(" + std::to_string(i) + ") before its forward_layer");
  }
  if (!s.cur().has_dact[i + 1]) {
    throw RuntimeError("backward_layer(" + std::to_string(i) + "): upstream gradient dactivation(" +
                       std::to_string(i + 1) + ") was never set");
  }
  const size_t bh_bytes = static_cast<size_t>(B * h) * sizeof(float);
  // Residual branch: dx starts as dy; the fc path accumulates onto it below.
  // (Tensor-parallel partial: the residual joins after the reduction, so dx starts at zero.)
  if (s.tp_partial)
    zero_on_device(s.dact(i), bh_bytes, st);
  else
    copy_on_device(s.dact(i), s.dact(i + 1), bh_bytes, st);
  // fc2: dpost (B, f) = dy @ W2, dW2 += dy^T @ post, db2 += sum dy
  float* dpost = s.scratch.data();
  zero_on_device(dpost, static_cast<size_t>(B * f) * sizeof(float), st);
  linear_backward(s.blas, dpost, s.grad(i, kFc2Weight), s.grad(i, kFc2Bias), s.dact(i + 1), s.post_of(i),
                  s.param(i, kFc2Weight), B, f, h);
  // gelu: dpre = dpost * gelu'(pre), in place
  gelu_backward(st, dpost, s.pre_of(i), dpost, B * f);
  // fc1: dx += dpre @ W1, dW1 += dpre^T @ x, db1 += sum dpre
  linear_backward(s.blas, s.dact(i), s.grad(i, kFc1Weight), s.grad(i, kFc1Bias), dpost, s.act(i),
                  s.param(i, kFc1Weight), B, h, f);
  s.cur().saved[i] = 0;
  s.cur().has_dact[i] = 1;
}

void DeviceMlp::forward() {
  for (int l = 0; l <= static_cast<int>(shape().blocks); ++l) forward_layer(l);
}

void DeviceMlp::backward() {
  for (int l = static_cast<int>(shape().blocks); l >= 0; --l) backward_layer(l);
}

namespace {
std::vector<float> download(const float* device_ptr, int64_t count, cudaStream_t stream) {
  std::vector<float> host(static_cast<size_t>(count));
  copy_to_host_sync(host.data(), device_ptr, host.size() * sizeof(float), stream);
  return host;
}
}  // namespace

std::vector<float> DeviceMlp::losses() const {
  DeviceGuard guard(device_);
  return download(state_->cur().losses.data(), state_->cur().batch, stream());
}

std::vector<float> DeviceMlp::logits() const {
  DeviceGuard guard(device_);
  return download(state_->cur().logits.data(), state_->cur().batch * shape().classes, stream());
}

double DeviceMlp::loss_sum() const {
  double sum = 0.0;
  for (float loss : losses()) sum += loss;
  return sum;
}

std::vector<float> DeviceMlp::activation(int l) const {
  if (l < 0 || l > shape().blocks) throw RuntimeError("activation(" + std::to_string(l) + ")");
  DeviceGuard guard(device_);
  return download(state_->act(l), state_->cur().batch * shape().hidden, stream());
}

std::vector<float> DeviceMlp::dactivation(int l) const {
  if (l < 0 || l > shape().blocks) throw RuntimeError("dactivation(" + std::to_string(l) + ")");
  DeviceGuard guard(device_);
  return download(state_->dact(l), state_->cur().batch * shape().hidden, stream());
}

double DeviceMlp::step_matmul_flops(const model::MlpShape& shape, int64_t batch) {
  return model::LabMlp::step_matmul_flops(shape, batch);
}

}  // namespace parlab::compute::cuda
