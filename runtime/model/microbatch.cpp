#include "runtime/model/microbatch.h"

#include <string>
#include <type_traits>

#include "base/errors.h"

namespace parlab::model {

MicrobatchState::MicrobatchState(const MlpShape& shape, int64_t batch, int64_t global_batch, MemoryAccount* account)
    : shape_(shape),
      batch_(batch),
      global_batch_(global_batch),
      labels_(counted_vector<int32_t>(account, MemoryCategory::kActivations)),
      logits_(counted_vector<float>(account, MemoryCategory::kActivations)),
      probs_(counted_vector<float>(account, MemoryCategory::kActivations)),
      losses_(counted_vector<float>(account, MemoryCategory::kActivations)) {
  shape_.validate();
  if (batch < 0) throw ConfigError("microbatch", std::to_string(batch), "must be >= 0");
  if (global_batch < 1 || global_batch < batch) {
    throw ConfigError("global_batch", std::to_string(global_batch),
                      "must be >= 1 and >= the microbatch (" + std::to_string(batch) + ")");
  }
  // Computed in double and rounded once, so every rank and microbatch uses the same float.
  loss_scale_ = static_cast<float>(1.0 / static_cast<double>(global_batch));
  labels_.assign(batch, 0);
  const size_t boundaries = static_cast<size_t>(shape_.blocks) + 1;
  for (size_t l = 0; l < boundaries; ++l) {
    acts_.push_back(counted_vector<float>(account, MemoryCategory::kActivations));
    // Activation gradients are the backward's transient buffers (the running layer's input and
    // output gradient), not what the forward saves: temporary, as the ledger counts them.
    dacts_.push_back(counted_vector<float>(account, MemoryCategory::kTemporary));
  }
  has_act_.assign(boundaries, 0);
  has_dact_.assign(boundaries, 0);
  for (int64_t i = 0; i < shape_.blocks; ++i)
    saved_.push_back(BlockSaved{counted_vector<float>(account, MemoryCategory::kActivations),
                                counted_vector<float>(account, MemoryCategory::kActivations), false,
                                counted_vector<uint16_t>(account, MemoryCategory::kActivations),
                                counted_vector<uint16_t>(account, MemoryCategory::kActivations),
                                counted_vector<uint16_t>(account, MemoryCategory::kActivations)});
}

void MicrobatchState::release_activations() {
  for (size_t l = 0; l < acts_.size(); ++l) {
    release_storage(acts_[l]);
    release_storage(dacts_[l]);
    has_act_[l] = has_dact_[l] = 0;
  }
  for (BlockSaved& s : saved_) {
    release_storage(s.pre);
    release_storage(s.post);
    release_storage(s.x16);
    release_storage(s.pre16);
    release_storage(s.post16);
    s.present = false;
  }
  release_storage(probs_);
  head_saved_ = false;
}

void MicrobatchState::check_boundary(int l) const {
  if (l < 0 || l > shape_.blocks) {
    throw RuntimeError("boundary index " + std::to_string(l) + " outside [0, " + std::to_string(shape_.blocks) + "]");
  }
}

std::span<float> MicrobatchState::activation(int l) {
  check_boundary(l);
  if (!has_act_[l]) {
    acts_[l].assign(batch_ * shape_.hidden, 0.0f);
    has_act_[l] = 1;
  }
  return acts_[l];
}

std::span<float> MicrobatchState::dactivation(int l) {
  check_boundary(l);
  if (!has_dact_[l]) {
    dacts_[l].assign(batch_ * shape_.hidden, 0.0f);
    has_dact_[l] = 1;
  }
  return dacts_[l];
}

bool MicrobatchState::has_activation(int l) const {
  check_boundary(l);
  return has_act_[l] != 0;
}

bool MicrobatchState::has_dactivation(int l) const {
  check_boundary(l);
  return has_dact_[l] != 0;
}

void MicrobatchState::set_head_outputs(std::span<const float> logits, std::span<const float> losses) {
  const int64_t C = shape_.classes;
  if (static_cast<int64_t>(logits.size()) != batch_ * C || static_cast<int64_t>(losses.size()) != batch_)
    throw RuntimeError("set_head_outputs: " + std::to_string(logits.size()) + " logits and " +
                       std::to_string(losses.size()) + " losses for a microbatch of " + std::to_string(batch_));
  logits_.assign(logits.begin(), logits.end());
  losses_.assign(losses.begin(), losses.end());
}

double MicrobatchState::loss_sum() const {
  double sum = 0.0;
  for (float loss : losses_) sum += loss;
  return sum;
}

int64_t MicrobatchState::allocated_bytes() const {
  auto bytes = [](const auto& v) {
    return static_cast<int64_t>(v.capacity() * sizeof(typename std::decay_t<decltype(v)>::value_type));
  };
  int64_t total = bytes(labels_) + bytes(logits_) + bytes(probs_) + bytes(losses_);
  for (const auto& a : acts_) total += bytes(a);
  for (const auto& d : dacts_) total += bytes(d);
  for (const BlockSaved& s : saved_)
    total += bytes(s.pre) + bytes(s.post) + bytes(s.x16) + bytes(s.pre16) + bytes(s.post16);
  return total;
}

int64_t MicrobatchState::correct() const {
  int64_t n = 0;
  const int64_t C = shape_.classes;
  for (int64_t b = 0; b < static_cast<int64_t>(losses_.size()); ++b) {
    const float* row = logits_.data() + b * C;
    const float mine = row[labels_[b]];
    bool best = true;
    for (int64_t c = 0; c < C; ++c) {
      if (c != labels_[b] && row[c] >= mine) best = false;
    }
    n += best ? 1 : 0;
  }
  return n;
}

}  // namespace parlab::model
