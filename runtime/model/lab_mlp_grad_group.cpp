// lab-mlp's weight-gradient groups (lab_mlp.h): a block's weight-gradient products computed once
// over the rows of several microbatches, where each microbatch's own would read and write the
// whole fp32 gradient again.
#include <algorithm>
#include <string>
#include <utility>

#include "runtime/compute/cpu/kernels.h"
#include "runtime/model/lab_mlp.h"
#include "base/errors.h"

namespace parlab::model {
namespace cpu = compute::cpu;

namespace {
constexpr int kFc1Weight = 0, kFc2Weight = 2;

// Rows [0, rows) of each of a group's buffers of `width` columns are in use; it must hold `rows`.
// Sized once to the group's rows (no pass clears them again each microbatch); a larger
// microbatch than the first grows them.
template <typename T>
void hold_rows(CountedVector<T>& v, int64_t rows, int64_t width) {
  if (static_cast<int64_t>(v.size()) < rows * width) v.resize(static_cast<size_t>(rows * width));
}
}  // namespace

void LabMlp::make_weight_grad_groups() {
  if (storage_.weight_grad_group < 1)
    throw ConfigError("weight_grad_group", std::to_string(storage_.weight_grad_group), "must be at least 1");
  if (storage_.weight_grad_group == 1 || tp_.size > 1) return;
  const auto f32 = [&] { return counted_vector<float>(storage_.account, MemoryCategory::kActivations); };
  const auto b16 = [&] { return counted_vector<uint16_t>(storage_.account, MemoryCategory::kActivations); };
  groups_.reserve(static_cast<size_t>(shape().blocks));
  for (int64_t i = 0; i < shape().blocks; ++i)
    groups_.push_back(GradGroup{f32(), f32(), f32(), f32(), b16(), b16(), b16(), b16(), 0, 0});
}

bool LabMlp::weight_grads_pending(FlatRange within) const {
  for (size_t i = 0; i < groups_.size(); ++i) {
    if (groups_[i].microbatches == 0) continue;
    for (const int which : {kFc1Weight, kFc2Weight}) {
      const ParamTensor& t = tensor_of(static_cast<int>(i), which);
      const int64_t at = pos_[index_of(t)];
      if (at >= 0 && within.intersects({at, at + t.numel})) return true;
    }
  }
  return false;
}

LabMlp::GroupSlot LabMlp::weight_grad_slot(int i, int64_t B) {
  if (groups_.empty()) return {};
  GradGroup& g = groups_[static_cast<size_t>(i)];
  const bool more = deferrable_ && g.microbatches + 1 < storage_.weight_grad_group;
  if (g.microbatches == 0 && (!more || B == 0)) return {};  // a group of one: the plain products
  // An empty microbatch adds no rows, but may still be the one that closes the group.
  if (B == 0) return {.grouped = true, .close = !more, .row = g.rows};
  const int64_t h = shape().hidden, f = shape().ffn;
  const int64_t rows = std::max(g.rows + B, storage_.weight_grad_group * B);
  if (mixed_) {
    hold_rows(g.x16, rows, h), hold_rows(g.post16, rows, f), hold_rows(g.dy16, rows, h), hold_rows(g.dpre16, rows, f);
  } else {
    hold_rows(g.x, rows, h), hold_rows(g.post, rows, f), hold_rows(g.dy, rows, h), hold_rows(g.dpre, rows, f);
  }
  return {.grouped = true, .close = !more, .row = g.rows};
}

void LabMlp::end_weight_grad_slot(int i, const GroupSlot& slot, int64_t B) {
  if (!slot.grouped) return;
  GradGroup& g = groups_[static_cast<size_t>(i)];
  g.rows += B;
  ++g.microbatches;
  if (!slot.close) return;
  const int64_t h = shape().hidden, f = shape().ffn;
  // The step's first product of a weight writes its gradient (zero_grads left it unwritten); an
  // empty group writes nothing, so it takes the zeros first (tensor_grad).
  const auto target = [&](int which) {
    const ParamTensor& t = tensor_of(i, which);
    const size_t at = index_of(t);
    const bool write = g.rows > 0 && at < grad_unwritten_.size() && grad_unwritten_[at] && grad_at_[at] != nullptr;
    if (!write) return std::pair{tensor_grad(t), cpu::GradWrite::kAccumulate};
    grad_unwritten_[at] = 0;
    return std::pair{grad_at_[at], cpu::GradWrite::kOverwrite};
  };
  const auto [dw1, write1] = target(kFc1Weight);
  const auto [dw2, write2] = target(kFc2Weight);
  // dW2 (h, f) (+)= dy^T @ post;  dW1 (f, h) (+)= dpre^T @ x, over the group's rows.
  if (mixed_) {
    cpu::linear_weight_grad_bf16(dw2, g.dy16.data(), g.post16.data(), g.rows, f, h, write2);
    cpu::linear_weight_grad_bf16(dw1, g.dpre16.data(), g.x16.data(), g.rows, h, f, write1);
  } else {
    cpu::linear_weight_grad(dw2, g.dy.data(), g.post.data(), g.rows, f, h, write2);
    cpu::linear_weight_grad(dw1, g.dpre.data(), g.x.data(), g.rows, h, f, write1);
  }
  g.rows = 0;
  g.microbatches = 0;
}

}  // namespace parlab::model
