#include "runtime/model/lab_mlp.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/compute/blas_threads.h"
#include "runtime/compute/counter_rng.h"
#include "runtime/compute/cpu/kernels.h"
#include "base/errors.h"

namespace parlab::model {
namespace cpu = compute::cpu;

namespace {
// Position of a tensor inside its layer, in flat order.
constexpr int kFc1Weight = 0, kFc1Bias = 1, kFc2Weight = 2, kFc2Bias = 3;
constexpr int kHeadWeight = 0, kHeadBias = 1;
constexpr int kTensorsPerBlock = 4;
}  // namespace

LabMlp::LabMlp(const MlpShape& shape, uint64_t seed) : LabMlp(shape, seed, 0, shape.num_layers()) {}

LabMlp::LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer)
    : LabMlp(shape, seed, first_layer, end_layer, ModelStorage{}) {}

LabMlp::LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer, ModelStorage storage)
    : LabMlp(shape, seed, first_layer, end_layer, storage, TpSlice{}) {}

LabMlp::LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer, ModelStorage storage, TpSlice tp)
    : LabMlp(shape, seed, std::vector<LayerChunk>{{first_layer, end_layer}}, storage, tp) {}

LabMlp::LabMlp(const MlpShape& shape, uint64_t seed, std::vector<LayerChunk> chunks, ModelStorage storage, TpSlice tp)
    : layout_(tp_local_shape(shape, tp)),
      first_layer_(chunks.empty() ? 0 : chunks.front().begin),
      end_layer_(chunks.empty() ? 0 : chunks.back().end),
      storage_(storage),
      params_(counted_vector<float>(
          storage.account, storage.mixed_precision ? MemoryCategory::kOptimizer : MemoryCategory::kParameters)),
      grads_(counted_vector<float>(storage.account, MemoryCategory::kGradients)),
      scratch_(counted_vector<float>(storage.account, MemoryCategory::kTemporary)),
      forward_scratch_(counted_vector<float>(storage.account, MemoryCategory::kTemporary)),
      scratch_bf16_(counted_vector<uint16_t>(storage.account, MemoryCategory::kTemporary)),
      tp_(tp),
      chunks_(std::move(chunks)) {
  if (chunks_.empty()) throw ConfigError("stage layers", "no chunk", "a model holds at least one span of layers");
  int previous_end = 0;
  for (const LayerChunk& c : chunks_) {
    if (c.begin < previous_end || c.end > layout_.num_layers() || c.begin >= c.end) {
      throw ConfigError("stage layers", "[" + std::to_string(c.begin) + ", " + std::to_string(c.end) + ")",
                        "must be a non-empty span within [0, " + std::to_string(layout_.num_layers()) +
                            "), after the previous chunk");
    }
    previous_end = c.end;
  }
  compute::pin_blas_to_one_thread();
  keep_freed_memory();
  if (tp_.size > 1) tp_zero_bias_.assign(static_cast<size_t>(layout_.shape().hidden), 0.0f);
  // Positions: the chunks' tensors one after the other from the first chunk's offset.
  pos_.assign(layout_.tensors().size(), -1);
  owned_.begin = owned_.end = layout_.layer_range(chunks_.front().begin).begin;
  for (const LayerChunk& c : chunks_)
    for (size_t i = 0; i < layout_.tensors().size(); ++i) {
      const ParamTensor& t = layout_.tensors()[i];
      if (t.layer < c.begin || t.layer >= c.end) continue;
      pos_[i] = owned_.end;
      owned_.end += t.numel;
    }
  param_at_.assign(layout_.tensors().size(), nullptr);
  grad_at_.assign(layout_.tensors().size(), nullptr);
  if (storage_.params) {
    params_.assign(owned_.numel(), 0.0f);
    bind_params(owned_, params_);
  }
  if (storage_.grads) {
    grads_.assign(owned_.numel(), 0.0f);
    bind_grads(owned_, grads_);
  }
  init_params(seed);
  if (storage_.mixed_precision) set_mixed_precision(true);
  make_weight_grad_groups();
}

void LabMlp::bind(std::vector<float*>& where, FlatRange range, std::span<float> storage, const char* what) {
  if (!owned_.contains(range))
    throw RuntimeError(std::string("bind ") + what + ": range [" + std::to_string(range.begin) + ", " +
                       std::to_string(range.end) + ") lies outside the owned layers");
  if (!storage.empty() && static_cast<int64_t>(storage.size()) != range.numel())
    throw RuntimeError(std::string("bind ") + what + ": " + std::to_string(storage.size()) +
                       " elements for a range of " + std::to_string(range.numel()));
  for (size_t i = 0; i < layout_.tensors().size(); ++i) {
    const ParamTensor& t = layout_.tensors()[i];
    const int64_t at = pos_[i];
    if (at < 0 || at + t.numel <= range.begin || at >= range.end) continue;
    if (!range.contains({at, at + t.numel}))
      throw RuntimeError(std::string("bind ") + what + ": range [" + std::to_string(range.begin) + ", " +
                         std::to_string(range.end) + ") cuts tensor " + t.name);
    where[i] = storage.empty() ? nullptr : storage.data() + (at - range.begin);
  }
}

void LabMlp::bind_params(FlatRange range, std::span<float> storage) {
  bind(param_at_, range, storage, "parameters");
  mark_bf16_stale();  // new values (a ZeRO-3 gather) or a new home: the bf16 copies are old
  if (storage.empty() && !weights_bf16_.empty()) {
    // Unbound (a ZeRO-3 layer after it computed): its bf16 copies go too, as the gathered values.
    for (size_t t = 0; t < layout_.tensors().size(); ++t)
      if (range.contains(layout_.tensors()[t].range())) {
        release_storage(weights_bf16_[2 * t]);
        release_storage(weights_bf16_[2 * t + 1]);
      }
  }
}
void LabMlp::bind_grads(FlatRange range, std::span<float> storage) {
  zero_unwritten_grads();  // the old storage's values are whole before it goes
  bind(grad_at_, range, storage, "gradients");
}

std::span<float> LabMlp::compute_grads(FlatRange range) {
  if (range.begin < owned_.begin || range.end > owned_.end || range.begin > range.end)
    throw RuntimeError("compute_grads: range [" + std::to_string(range.begin) + ", " + std::to_string(range.end) +
                       ") lies outside the owned layers");
  zero_unwritten_grads(range);
  return grad_storage().subspan(static_cast<size_t>(range.begin - owned_.begin), static_cast<size_t>(range.numel()));
}

// Unwritten tensors overlapping flat `within` (this model's coordinates).
void LabMlp::zero_unwritten_grads(FlatRange within) const {
  for (size_t i = 0; i < grad_unwritten_.size(); ++i) {
    if (!grad_unwritten_[i]) continue;
    const int64_t at = pos_[i];
    if (at >= 0 && within.intersects({at, at + layout_.tensors()[i].numel})) zero_if_unwritten(i);
  }
}

void LabMlp::zero_if_unwritten(size_t i) const {
  if (i >= grad_unwritten_.size() || !grad_unwritten_[i]) return;
  if (float* g = grad_at_[i]) std::fill(g, g + layout_.tensors()[i].numel, 0.0f);
  grad_unwritten_[i] = 0;
}

const float* LabMlp::tensor(const ParamTensor& t) const {
  const float* p = param_at_[index_of(t)];
  if (p == nullptr)
    throw RuntimeError("parameters of " + t.name + " are not resident (a ZeRO-3 layer is gathered before it computes)");
  return p;
}

float* LabMlp::tensor_grad(const ParamTensor& t) {
  const size_t i = index_of(t);
  float* g = grad_at_[i];
  if (g == nullptr)
    throw RuntimeError("no gradient buffer is bound for " + t.name +
                       " (a ZeRO-2/3 bucket is bound before its backward)");
  zero_if_unwritten(i);  // added to: its zeros first
  return g;
}

void LabMlp::check_owned(int layer) const {
  if (!owns_layer(layer)) {
    throw RuntimeError("layer " + std::to_string(layer) + " is not held by this model (layers [" +
                       std::to_string(first_layer_) + ", " + std::to_string(end_layer_) + "))");
  }
}

const ParamTensor& LabMlp::tensor_of(int layer, int which) const {
  return layout_.tensors()[static_cast<size_t>(layer) * kTensorsPerBlock + which];
}

FlatRange LabMlp::local_range(std::string_view name) const {
  const ParamTensor& t = layout_.find(name);
  check_owned(t.layer);

  const int64_t at = pos_[index_of(t)] - owned_.begin;
  return {at, at + t.numel};
}

namespace {
void require_held(bool held, std::string_view name, const char* what) {
  if (!held)
    throw RuntimeError("tensor " + std::string(name) + ": this model holds no full copy of its " + what +
                       " (ZeRO shards them; read the rank's shard)");
}
}  // namespace

std::span<float> LabMlp::param(std::string_view name) {
  require_held(storage_.params, name, "parameters");
  mark_bf16_stale();  // the caller may write through the view
  const FlatRange r = local_range(name);
  return std::span<float>(params_).subspan(r.begin, r.numel());
}

std::span<const float> LabMlp::param(std::string_view name) const {
  require_held(storage_.params, name, "parameters");
  const FlatRange r = local_range(name);
  return std::span<const float>(params_).subspan(r.begin, r.numel());
}

std::span<float> LabMlp::grad(std::string_view name) {
  require_held(storage_.grads, name, "gradients");
  const FlatRange r = local_range(name);
  return grads().subspan(r.begin, r.numel());
}

std::span<const float> LabMlp::grad(std::string_view name) const {
  require_held(storage_.grads, name, "gradients");
  const FlatRange r = local_range(name);
  return grads().subspan(r.begin, r.numel());
}

void LabMlp::zero_grads() {
  grad_unwritten_.assign(layout_.tensors().size(), 0);
  const std::span<float> g = grad_storage();
  if (groups_.empty()) {
    std::fill(g.begin(), g.end(), 0.0f);
  } else {
    // Every tensor but the block weights, whose first group product writes them.
    for (size_t i = 0; i < layout_.tensors().size(); ++i) {
      const ParamTensor& t = layout_.tensors()[i];
      if (grad_at_[i] == nullptr) continue;
      if (t.shape.size() == 2 && t.layer < shape().blocks)
        grad_unwritten_[i] = 1;
      else
        std::fill(grad_at_[i], grad_at_[i] + t.numel, 0.0f);
    }
  }
  mark_bf16_stale();
  // A step abandoned mid-group (a failed collective) leaves no rows behind for the next.
  for (GradGroup& group : groups_) group.rows = 0, group.microbatches = 0;
}

void LabMlp::adopt_grads(std::span<float> storage, std::shared_ptr<void> keep) {
  if (!storage_.grads) throw RuntimeError("adopt_grads: this model holds no gradients (ZeRO-2/3 shards them)");
  if (static_cast<int64_t>(storage.size()) != owned_.numel()) {
    throw RuntimeError("adopt_grads: " + std::to_string(storage.size()) + " elements for " +
                       std::to_string(owned_.numel()) + " gradients");
  }
  const std::span<const float> now = grads();
  std::copy(now.begin(), now.end(), storage.begin());
  bind_grads(owned_, storage);
  // The charge moves with the bytes: grads_ releases its own first (the peak stays one buffer),
  // then the new buffer is charged until the model (the last holder of `adopted_keep_`) goes.
  CountedVector<float>(grads_.get_allocator()).swap(grads_);
  adopted_keep_ = charge_while_held(std::move(keep), storage_.account, MemoryCategory::kGradients,
                                    static_cast<int64_t>(storage.size() * sizeof(float)));
  adopted_grads_ = storage;
}

// PyTorch nn.Linear's U(-1/sqrt(fan_in), 1/sqrt(fan_in)), except the layer that writes into the
// residual stream (fc2): it is scaled by 1/sqrt(L), as GPT-2 scales its residual projections, so
// the stream's variance stays bounded with depth. Without it the 8-block preset's residual stream
// grows block after block and AdamW at its usual 1e-3 diverges within a few steps.
void LabMlp::init_params(uint64_t seed) {
  if (!storage_.params) return;
  if (chunks_.size() == 1) return init_values(layout_, seed, owned_, params_, tp_);
  for (const ParamTensor& t : layout_.tensors())
    if (const int64_t at = position(t); at >= 0)
      init_values(layout_, seed, t.range(), std::span<float>(params_).subspan(at - owned_.begin, t.numel), tp_);
}

bool LabMlp::owns_layer(int layer) const {
  for (const LayerChunk& c : chunks_)
    if (c.begin <= layer && layer < c.end) return true;
  return false;
}

void LabMlp::init_values(const ParamLayout& layout, uint64_t seed, FlatRange range, std::span<float> out, TpSlice tp) {
  if (static_cast<int64_t>(out.size()) != range.numel())
    throw RuntimeError("init_values: " + std::to_string(out.size()) + " elements for a range of " +
                       std::to_string(range.numel()));
  const compute::CounterRng rng(seed, compute::RngStream::kParamInit);
  const double residual_scale = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(1, layout.shape().blocks)));
  // A tensor-parallel slice draws each element at its position in the whole network.
  const ParamLayout global(tp.size > 1 ? MlpShape{layout.shape().hidden, layout.shape().ffn * tp.size,
                                                  layout.shape().blocks, layout.shape().classes}
                                       : layout.shape());
  for (const ParamTensor& t : layout.tensors()) {
    const int64_t begin = std::max(t.offset, range.begin), end = std::min(t.offset + t.numel, range.end);
    if (begin >= end) continue;
    const ParamTensor& g = tp.size > 1 ? global.find(t.name) : t;
    const bool residual_output = t.name.find(".fc2.") != std::string::npos;
    const double bound = (residual_output ? residual_scale : 1.0) / std::sqrt(static_cast<double>(g.fan_in));
    for (int64_t j = begin; j < end; ++j) {
      const int64_t at = tp.size > 1 ? tp_global_offset(t, g, j - t.offset, tp) : j;
      out[j - range.begin] = static_cast<float>((2.0 * rng.uniform(static_cast<uint64_t>(at)) - 1.0) * bound);
    }
  }
}

MicrobatchState LabMlp::new_microbatch(int64_t batch, int64_t global_batch) const {
  return MicrobatchState(shape(), batch, global_batch);
}

void LabMlp::forward_layer(int layer, MicrobatchState& mb) const {
  check_owned(layer);
  if (!(mb.shape_ == shape())) throw RuntimeError("microbatch state built for another shape");
  if (mb.batch() > 0 && !mb.has_activation(layer)) {
    throw RuntimeError("forward_layer(" + std::to_string(layer) + "): activation(" + std::to_string(layer) +
                       ") was never set");
  }
  if (layer == shape().blocks) {
    head_forward(mb);
  } else {
    block_forward(layer, mb);
  }
}

void LabMlp::backward_layer(int layer, MicrobatchState& mb) {
  check_owned(layer);
  if (!(mb.shape_ == shape())) throw RuntimeError("microbatch state built for another shape");
  if (layer == shape().blocks) {
    head_backward(mb);
  } else {
    block_backward(layer, mb);
  }
}

double LabMlp::forward(MicrobatchState& mb) const {
  for (const LayerChunk& c : chunks_)
    for (int l = c.begin; l < c.end; ++l) forward_layer(l, mb);
  return owns_layer(shape().blocks) ? mb.loss_sum() : 0.0;
}

void LabMlp::backward(MicrobatchState& mb) {
  for (auto c = chunks_.rbegin(); c != chunks_.rend(); ++c)
    for (int l = c->end - 1; l >= c->begin; --l) backward_layer(l, mb);
}

void LabMlp::block_forward(int i, MicrobatchState& mb) const {
  if (mixed_) return block_forward_mixed(i, mb);
  if (tp_.size > 1) return block_forward_tp(i, mb);
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  saved.pre.resize(B * f);
  saved.post.resize(B * f);
  const float* x = mb.activation(i).data();  // (B, h)
  float* y = mb.activation(i + 1).data();    // (B, h)
  // pre (B, f) = x @ W1^T + b1 (the bias in the matmul's epilogue);  post = gelu(pre)
  cpu::linear_forward(saved.pre.data(), x, tensor(tensor_of(i, kFc1Weight)), tensor(tensor_of(i, kFc1Bias)), B, h, f);
  cpu::gelu_forward(saved.post.data(), saved.pre.data(), B * f);
  // y (B, h) = post @ W2^T + b2, then the residual y += x
  cpu::linear_forward(y, saved.post.data(), tensor(tensor_of(i, kFc2Weight)), tensor(tensor_of(i, kFc2Bias)), B, f, h);
  cpu::residual_forward(y, y, x, B * h);
  saved.present = true;
}

void LabMlp::head_forward(MicrobatchState& mb) const {
  const int64_t B = mb.batch(), h = shape().hidden, C = shape().classes;
  const int L = static_cast<int>(shape().blocks);
  mb.logits_.resize(B * C);
  mb.probs_.resize(B * C);
  mb.losses_.resize(B);
  cpu::linear_forward(mb.logits_.data(), mb.activation(L).data(), tensor(tensor_of(L, kHeadWeight)),
                      tensor(tensor_of(L, kHeadBias)), B, h, C);
  cpu::softmax_cross_entropy_forward(mb.losses_.data(), mb.probs_.data(), mb.logits_.data(), mb.labels_.data(), B, C);
  mb.head_saved_ = true;
}

void LabMlp::head_backward(MicrobatchState& mb) {
  if (!mb.head_saved_) {
    throw RuntimeError("backward_layer(head) before its forward_layer");
  }
  const int64_t B = mb.batch(), h = shape().hidden, C = shape().classes;
  const int L = static_cast<int>(shape().blocks);
  scratch_.resize(B * C);
  float* dlogits = scratch_.data();  // (B, C)
  cpu::softmax_cross_entropy_backward(dlogits, cpu::GradWrite::kOverwrite, mb.probs_.data(), mb.labels_.data(),
                                      mb.loss_scale(), B, C);
  // dactivation(L) starts here: the head's product writes it.
  std::span<float> dx = mb.dactivation(L);
  const ParamTensor& w = tensor_of(L, kHeadWeight);
  cpu::linear_backward(dx.data(), cpu::GradWrite::kOverwrite, tensor_grad(w), tensor_grad(tensor_of(L, kHeadBias)),
                       dlogits, mb.activation(L).data(), tensor(w), B, h, C);
  mb.head_saved_ = false;
}

void LabMlp::block_backward(int i, MicrobatchState& mb) {
  if (tp_.size > 1 && !mixed_) return block_backward_tp(i, mb);
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  if (!saved.present) {
    throw RuntimeError("backward_layer(" + std::to_string(i) + ") before its forward_layer");
  }
  if (mb.batch() > 0 && !mb.has_dactivation(i + 1)) {
    throw RuntimeError("backward_layer(" + std::to_string(i) + "): upstream gradient dactivation(" +
                       std::to_string(i + 1) + ") was never set");
  }
  if (mixed_) return block_backward_mixed(i, mb);
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  const float* dy = mb.dactivation(i + 1).data();  // (B, h)
  const float* x = mb.activation(i).data();        // (B, h)
  // Residual branch (the identity): dx = dy; the fc path accumulates onto it below.
  std::span<float> dx = mb.dactivation(i);
  std::copy(dy, dy + B * h, dx.begin());
  scratch_.resize(B * f);
  float* dpost = scratch_.data();
  // The weight gradients now (dW += below), or with the group's (their inputs copied there).
  const GroupSlot slot = weight_grad_slot(i, B);
  GradGroup* group = slot.grouped ? &groups_[static_cast<size_t>(i)] : nullptr;
  float* dpre = group ? group->dpre.data() + slot.row * f : dpost;
  const ParamTensor& w1 = tensor_of(i, kFc1Weight);
  const ParamTensor& w2 = tensor_of(i, kFc2Weight);
  // fc2: dpost (B, f) = dy @ W2, dW2 += dy^T @ post, db2 += sum dy
  cpu::linear_backward(dpost, cpu::GradWrite::kOverwrite, group ? nullptr : tensor_grad(w2),
                       tensor_grad(tensor_of(i, kFc2Bias)), dy, saved.post.data(), tensor(w2), B, f, h);
  // gelu + fc1's bias, one pass: dpre = dpost * gelu'(pre), db1 += sum dpre
  cpu::gelu_bias_backward(dpre, cpu::GradWrite::kOverwrite, tensor_grad(tensor_of(i, kFc1Bias)), saved.pre.data(),
                          dpost, B, f);
  // fc1: dx += dpre @ W1, dW1 += dpre^T @ x
  cpu::linear_backward(dx.data(), cpu::GradWrite::kAccumulate, group ? nullptr : tensor_grad(w1), nullptr, dpre, x,
                       tensor(w1), B, h, f);
  if (group) {
    std::copy(dy, dy + B * h, group->dy.begin() + slot.row * h);
    std::copy(x, x + B * h, group->x.begin() + slot.row * h);
    std::copy(saved.post.begin(), saved.post.begin() + B * f, group->post.begin() + slot.row * f);
  }
  end_weight_grad_slot(i, slot, B);
  // Release what only this backward needed: the saved activations and the upstream gradient,
  // now consumed. dactivation(i) (what a pipeline stage would send) stays for the executor.
  release_storage(mb.dacts_[i + 1]);
  mb.has_dact_[i + 1] = 0;
  release_storage(saved.pre);
  release_storage(saved.post);
  saved.present = false;
}

double LabMlp::step_matmul_flops(const MlpShape& shape, int64_t batch) {
  const double B = static_cast<double>(batch), h = static_cast<double>(shape.hidden),
               f = static_cast<double>(shape.ffn), C = static_cast<double>(shape.classes),
               L = static_cast<double>(shape.blocks);
  const double forward = 2.0 * B * (h * f + f * h) * L + 2.0 * B * h * C;
  return 3.0 * forward;
}

}  // namespace parlab::model
