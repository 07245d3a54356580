// lab-mlp blocks under mixed precision: bf16 matmul inputs, fp32 accumulation and fp32 master
// weights (see LabMlp::set_mixed_precision). The head stays fp32: its matmuls are 1/500 of the
// step, and the softmax cross-entropy reads its logits. A tensor-parallel slice (lab_mlp_tp.cpp)
// runs the same products on its columns and leaves, as in fp32, the partial sums: fc2's bias and
// the residual join in tp_finish_forward/backward, after the group's reduction.
#include <algorithm>
#include <string>

#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/lab_mlp.h"
#include "base/errors.h"

namespace parlab::model {
namespace cpu = compute::cpu;

namespace {
constexpr int kFc1Weight = 0, kFc1Bias = 1, kFc2Weight = 2, kFc2Bias = 3;
constexpr cpu::WeightUse kForward = cpu::WeightUse::kForward, kInputGrad = cpu::WeightUse::kInputGrad;
}  // namespace

void LabMlp::set_mixed_precision(bool on) {
  if (on && !cpu::bf16_supported())
    throw RuntimeError("mixed precision needs bf16 matmuls: " + std::string(cpu::bf16_unsupported_reason()));
  mixed_ = on;
  if (weights_bf16_.empty()) {
    // The bf16 copies are the parameters the layers compute on while the model keeps its
    // parameters; under ZeRO-3 they are made from a layer's gather and freed with it, so they
    // are temporary like the gathered buffer. Two per tensor: one per product (WeightUse).
    const MemoryCategory where = storage_.params ? MemoryCategory::kParameters : MemoryCategory::kTemporary;
    for (size_t t = 0; t < 2 * layout_.tensors().size(); ++t)
      weights_bf16_.push_back(counted_vector<uint16_t>(storage_.account, where));
  }
  if (!on) {
    for (auto& w : weights_bf16_) release_storage(w);
  }
  mark_bf16_stale();
}

void LabMlp::mark_bf16_stale() const { bf16_fresh_.assign(2 * layout_.tensors().size(), 0); }

// A copy is made when its product first needs it: a ZeRO-3 layer gathered for its forward makes
// only the forward's, gathered again for its backward only the input gradient's. Where the
// weights stay, the first makes both in one pass over W (to_bf16_k32n64_blocked_pair where both
// are packed).
cpu::PreparedWeightBf16 LabMlp::weight_bf16(const ParamTensor& t, cpu::WeightUse use) const {
  const size_t both = 2 * index_of(t), i = both + (use == cpu::WeightUse::kForward ? 0 : 1);
  CountedVector<uint16_t>& copy = weights_bf16_[i];
  const int64_t OC = t.shape.at(0), C = t.shape.at(1);  // nn.Linear's (out, in)
  if (!bf16_per_pass_ && !bf16_fresh_[both] && !bf16_fresh_[both + 1]) {
    weights_bf16_[both].resize(t.numel);
    weights_bf16_[both + 1].resize(t.numel);
    cpu::prepare_weight_bf16_pair(weights_bf16_[both].data(), weights_bf16_[both + 1].data(), tensor(t), OC, C);
    bf16_fresh_[both] = bf16_fresh_[both + 1] = 1;
    bf16_copies_made_ += 2;
  }
  if (!bf16_fresh_[i]) {
    copy.resize(t.numel);
    cpu::prepare_weight_bf16(copy.data(), tensor(t), OC, C, use);
    bf16_fresh_[i] = 1;
    ++bf16_copies_made_;
  }
  return cpu::prepared_view_bf16(copy.data(), OC, C, use);
}

void LabMlp::block_forward_mixed(int i, MicrobatchState& mb) const {
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  const float* x = mb.activation(i).data();  // (B, h) fp32 residual stream
  float* y = mb.activation(i + 1).data();    // (B, h)
  saved.x16.resize(B * h);
  saved.pre16.resize(B * f);
  saved.post16.resize(B * f);
  forward_scratch_.resize(B * f);
  // pre (B, f) = bf16(x) @ bf16(W1)^T + b1 in fp32; saved, with gelu(pre), in bf16
  cpu::to_bf16(saved.x16.data(), x, B * h);
  cpu::linear_forward_bf16(forward_scratch_.data(), saved.x16.data(), weight_bf16(tensor_of(i, kFc1Weight), kForward),
                           tensor(tensor_of(i, kFc1Bias)), B, h, f);
  cpu::gelu_forward_bf16(saved.pre16.data(), saved.post16.data(), forward_scratch_.data(), B * f);
  // y (B, h) = post @ bf16(W2)^T + b2 in fp32, then the residual y += x; a tensor-parallel slice
  // leaves its partial sum (tp_finish_forward adds both once the group has reduced it, then frees x).
  const bool slice = tp_.size > 1;
  cpu::linear_forward_bf16(y, saved.post16.data(), weight_bf16(tensor_of(i, kFc2Weight), kForward),
                           slice ? tp_zero_bias_.data() : tensor(tensor_of(i, kFc2Bias)), B, f, h);
  saved.present = true;
  if (slice) return;
  cpu::residual_forward(y, y, x, B * h);
  // The backward reads the bf16 copy only: the fp32 input goes now, as autocast frees it. The data
  // (activation(0)) stays for its owner (loader, --dump-step).
  if (i > 0) {
    release_storage(mb.acts_[i]);
    mb.has_act_[i] = 0;
  }
}

void LabMlp::block_backward_mixed(int i, MicrobatchState& mb) {
  MicrobatchState::BlockSaved& saved = mb.saved_[i];
  const int64_t B = mb.batch(), h = shape().hidden, f = shape().ffn;
  const float* dy = mb.dactivation(i + 1).data();  // (B, h)
  // Residual branch (the identity): dx = dy; the fc path accumulates onto it below. A
  // tensor-parallel slice writes its partial dpre_i W1_i alone: dy joins after the reduction.
  const bool slice = tp_.size > 1;
  std::span<float> dx = mb.dactivation(i);
  if (!slice) std::copy(dy, dy + B * h, dx.begin());
  scratch_.resize(B * f);
  scratch_bf16_.resize(B * h + B * f);
  float* dpost = scratch_.data();
  // The weight gradients now (dW += below), or with the group's: dy and dpre are then converted
  // straight into the group's rows, and the saved inputs copied there.
  const GroupSlot slot = weight_grad_slot(i, B);
  GradGroup* group = slot.grouped ? &groups_[static_cast<size_t>(i)] : nullptr;
  uint16_t* dy16 = group ? group->dy16.data() + slot.row * h : scratch_bf16_.data();
  uint16_t* dpre16 = group ? group->dpre16.data() + slot.row * f : scratch_bf16_.data() + B * h;
  cpu::to_bf16(dy16, dy, B * h);
  // fc2: dpost (B, f) = dy @ W2, dW2 += dy^T @ post (bf16 inputs, fp32 sums); db2 += sum dy in fp32
  const ParamTensor& w2 = tensor_of(i, kFc2Weight);
  cpu::linear_backward_bf16(dpost, cpu::GradWrite::kOverwrite, group ? nullptr : tensor_grad(w2), dy16,
                            saved.post16.data(), weight_bf16(w2, kInputGrad), B, f, h);
  cpu::bias_backward(tensor_grad(tensor_of(i, kFc2Bias)), dy, B, h);
  // gelu + fc1's bias, one pass: dpre = dpost * gelu'(pre) to bf16, db1 += sum dpre in fp32
  cpu::gelu_bias_backward_bf16(dpre16, tensor_grad(tensor_of(i, kFc1Bias)), saved.pre16.data(), dpost, B, f);
  // fc1: dx += dpre @ W1, dW1 += dpre^T @ x
  const ParamTensor& w1 = tensor_of(i, kFc1Weight);
  cpu::linear_backward_bf16(dx.data(), slice ? cpu::GradWrite::kOverwrite : cpu::GradWrite::kAccumulate,
                            group ? nullptr : tensor_grad(w1), dpre16, saved.x16.data(), weight_bf16(w1, kInputGrad), B,
                            h, f);
  if (group) {
    std::copy(saved.x16.begin(), saved.x16.begin() + B * h, group->x16.begin() + slot.row * h);
    std::copy(saved.post16.begin(), saved.post16.begin() + B * f, group->post16.begin() + slot.row * f);
  }
  end_weight_grad_slot(i, slot, B);
  // As the fp32 block: release the saved activations and the consumed upstream gradient (a
  // slice's tp_finish_backward still adds it).
  if (!slice) {
    release_storage(mb.dacts_[i + 1]);
    mb.has_dact_[i + 1] = 0;
  }
  release_storage(saved.x16);
  release_storage(saved.pre16);
  release_storage(saved.post16);
  saved.present = false;
}

}  // namespace parlab::model
