// Tensor parallelism in the lab MLP (Megatron-LM, Shoeybi et al. 2019): a block's fc1 is
// column-parallel and its fc2 row-parallel, so the only communication of a block is the sum of
// fc2's partial outputs (forward) and of fc1's partial input gradients (backward):
//   pre_i = x W1_i^T + b1_i,  post_i = gelu(pre_i),  y = x + b2 + sum_i post_i W2_i^T
//   dx = dy + sum_i dpre_i W1_i
// The "f" operator before fc1 is the identity forward and the all-reduce backward; the "g"
// operator after fc2 the all-reduce forward and the identity backward. The executor runs the
// reductions (they are ops of the step program); the model computes the partial sums and, once
// reduced, adds the replicated terms (bias, residual) to the rows it holds.
#include <algorithm>
#include <string>

#include "runtime/compute/cpu/kernels.h"
#include "runtime/model/lab_mlp.h"
#include "base/errors.h"

namespace parlab::model {
namespace cpu = compute::cpu;

namespace {
constexpr int kFc1Weight = 0, kFc1Bias = 1, kFc2Weight = 2, kFc2Bias = 3;

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

MlpShape LabMlp::tp_local_shape(const MlpShape& global, TpSlice tp) {
  if (tp.size < 1 || tp.rank < 0 || tp.rank >= tp.size)
    throw ConfigError("tensor-parallel slice", std::to_string(tp.rank) + " of " + std::to_string(tp.size),
                      "must be a rank in [0, size) with size >= 1");
  if (global.ffn % tp.size != 0)
    throw ConfigError("model.ffn", std::to_string(global.ffn),
                      "must be divisible by plan.tp (" + std::to_string(tp.size) + ") to split fc1 and fc2");
  MlpShape local = global;
  local.ffn = global.ffn / tp.size;
  return local;
}

MlpShape LabMlp::global_shape() const {
  MlpShape g = shape();
  g.ffn *= tp_.size;
  return g;
}

int64_t LabMlp::tp_global_offset(const ParamTensor& local, const ParamTensor& global, int64_t j, TpSlice tp) {
  // fc1 rows and bias entries: the slice is one contiguous block of the whole tensor.
  if (ends_with(local.name, ".fc1.weight") || ends_with(local.name, ".fc1.bias"))
    return global.offset + tp.rank * local.numel + j;
  // fc2.weight (h, f): local (r, c) of (h, f/t) is global (r, rank f/t + c).
  if (ends_with(local.name, ".fc2.weight")) {
    const int64_t cols = local.shape.at(1);
    return global.offset + (j / cols) * global.shape.at(1) + tp.rank * cols + j % cols;
  }
  return global.offset + j;  // replicated
}

void LabMlp::block_forward_tp(int i, MicrobatchState& mb) const {
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  saved.pre.resize(B * f);
  saved.post.resize(B * f);
  const float* x = mb.activation(i).data();
  float* y = mb.activation(i + 1).data();
  cpu::linear_forward(saved.pre.data(), x, tensor(tensor_of(i, kFc1Weight)), tensor(tensor_of(i, kFc1Bias)), B, h, f);
  cpu::gelu_forward(saved.post.data(), saved.pre.data(), B * f);
  // The partial sum only: fc2.bias and the residual are added once, after the reduction.
  cpu::linear_forward(y, saved.post.data(), tensor(tensor_of(i, kFc2Weight)), tp_zero_bias_.data(), B, f, h);
  saved.present = true;
}

void LabMlp::tp_finish_forward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end) const {
  check_owned(layer);
  const int64_t h = shape().hidden;
  const float* b2 = tensor(tensor_of(layer, kFc2Bias));
  const float* x = mb.activation(layer).data();
  float* y = mb.activation(layer + 1).data();
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t c = 0; c < h; ++c) y[r * h + c] += b2[c] + x[r * h + c];
  // Under mixed precision the backward reads the block's bf16 copy of x: the fp32 input goes once
  // every row has its residual, as the whole block's does (block_forward_mixed).
  if (mixed_ && layer > 0 && row_begin == 0 && row_end == mb.batch()) {
    release_storage(mb.acts_[layer]);
    mb.has_act_[layer] = 0;
  }
}

void LabMlp::block_backward_tp(int i, MicrobatchState& mb) {
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  if (!saved.present) throw RuntimeError("backward_layer(" + std::to_string(i) + ") before its forward_layer");
  if (mb.batch() > 0 && !mb.has_dactivation(i + 1))
    throw RuntimeError("backward_layer(" + std::to_string(i) + "): upstream gradient dactivation(" +
                       std::to_string(i + 1) + ") was never set");
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  const float* dy = mb.dactivation(i + 1).data();
  // dy is the whole (replicated) upstream gradient, so fc2.bias's gradient is complete here and
  // the same on every rank of the group.
  scratch_.resize(B * f);
  float* dpost = scratch_.data();
  const ParamTensor& w2 = tensor_of(i, kFc2Weight);
  cpu::linear_backward(dpost, cpu::GradWrite::kOverwrite, tensor_grad(w2), tensor_grad(tensor_of(i, kFc2Bias)), dy,
                       saved.post.data(), tensor(w2), B, f, h);
  // gelu + fc1's bias (this rank's columns), one pass: dpre = dpost * gelu'(pre), db1 += sum dpre
  cpu::gelu_bias_backward(dpost, cpu::GradWrite::kOverwrite, tensor_grad(tensor_of(i, kFc1Bias)), saved.pre.data(),
                          dpost, B, f);
  // dx: the partial dpre_i W1_i only (overwritten); the residual branch dy joins after the reduction.
  std::span<float> dx = mb.dactivation(i);
  const ParamTensor& w1 = tensor_of(i, kFc1Weight);
  cpu::linear_backward(dx.data(), cpu::GradWrite::kOverwrite, tensor_grad(w1), nullptr, dpost, mb.activation(i).data(),
                       tensor(w1), B, h, f);
  release_storage(saved.pre);
  release_storage(saved.post);
  saved.present = false;
}

void LabMlp::tp_finish_backward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end) {
  check_owned(layer);
  const int64_t h = shape().hidden;
  const float* dy = mb.dactivation(layer + 1).data();
  float* dx = mb.dactivation(layer).data();
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t c = 0; c < h; ++c) dx[r * h + c] += dy[r * h + c];
  release_storage(mb.dacts_[layer + 1]);
  mb.has_dact_[layer + 1] = 0;
}

}  // namespace parlab::model
