#include "runtime/train/shards.h"

#include <string>

#include "base/errors.h"
#include "strategy/step_program.h"

namespace parlab::train {

// One cut for the programs (whose collectives are priced by their chunks) and the runtime.
model::FlatRange zero_shard(int64_t n, int dp, int r) {
  const auto [begin, end] = strategy::zero_shard(n, dp, r);
  return {begin, end};
}

std::vector<int64_t> shard_counts(model::FlatRange range, int64_t n, int dp) {
  return strategy::zero_chunk_elements(range.begin, range.end, n, dp);
}

model::ModelStorage storage_for_stage(int zero, model::MemoryAccount* account) {
  return model::ModelStorage{.params = zero < 3, .grads = zero < 2, .account = account};
}

ModelShards::ModelShards(model::Model& model, int zero, model::FlatRange shard, uint64_t seed,
                         model::MemoryAccount* account, model::MemoryCategory params_category)
    : model_(model),
      zero_(zero),
      shard_(shard),
      params_(model::counted_vector<float>(account, params_category)),
      grads_(model::counted_vector<float>(account, model::MemoryCategory::kGradients)),
      account_(account),
      params_category_(params_category) {
  const model::ModelStorage want = storage_for_stage(zero, nullptr);
  if (model.holds_params() != want.params || model.holds_grads() != want.grads)
    throw ConfigError("model storage",
                      std::string(model.holds_params() ? "parameters" : "no parameters") + ", " +
                          (model.holds_grads() ? "gradients" : "no gradients"),
                      "ZeRO stage " + std::to_string(zero) + " needs " +
                          (want.params ? "parameters" : "no parameters") + ", " +
                          (want.grads ? "gradients" : "no gradients"));
  if (!model.owned_range().contains(shard))
    throw ConfigError("ZeRO shard", std::to_string(shard.begin) + ".." + std::to_string(shard.end),
                      "must lie within the model's flat range");
  device_ = !model.compute_is_host();
  if (zero >= 3) {
    params_.assign(shard.numel(), 0.0f);
    model::LabMlp::init_values(model.layout(), seed, shard, params_, model.tp_slice());
    if (device_) {
      // Device memory is not host memory: the account (a host ledger) is not charged for it.
      compute_params_ = model.make_compute_buffer(shard.numel(), nullptr, model::MemoryCategory::kParameters,
                                                  model::BufferInit::kZero);
      push_params();
    }
  }
  if (zero >= 2) {
    if (device_)
      compute_grads_ = model.make_compute_buffer(shard.numel(), nullptr, model::MemoryCategory::kGradients,
                                                 model::BufferInit::kZero);
    else
      grads_.assign(shard.numel(), 0.0f);
  }
}

std::span<float> ModelShards::params() {
  if (zero_ >= 3) return adopted_params_.empty() ? std::span<float>(params_) : adopted_params_;
  return model_.params().subspan(shard_.begin - model_.owned_range().begin, shard_.numel());
}

std::span<const float> ModelShards::params() const { return const_cast<ModelShards*>(this)->params(); }

std::span<float> ModelShards::grads() {
  if (zero_ >= 2) return grads_;
  return model_.grads().subspan(shard_.begin - model_.owned_range().begin, shard_.numel());
}

std::span<const float> ModelShards::grads() const { return const_cast<ModelShards*>(this)->grads(); }

std::span<float> ModelShards::compute_params() {
  if (zero_ >= 3) return device_ ? compute_params_->span() : params();
  return model_.compute_params().subspan(shard_.begin - model_.owned_range().begin, shard_.numel());
}

std::span<float> ModelShards::compute_grads() {
  if (zero_ >= 2) return device_ ? compute_grads_->span() : std::span<float>(grads_);
  return model_.compute_grads().subspan(shard_.begin - model_.owned_range().begin, shard_.numel());
}

void ModelShards::adopt_params(std::span<float> storage, std::shared_ptr<void> keep) {
  if (zero_ < 3 || device_)
    throw RuntimeError("adopt_params: only a stage-3 shard on the host keeps parameters of its own");
  const auto n = static_cast<size_t>(shard_.numel());
  if (storage.size() < n)
    throw RuntimeError("adopt_params: " + std::to_string(storage.size()) + " elements for a shard of " +
                       std::to_string(n));
  const std::span<float> now = params();
  std::copy(now.begin(), now.end(), storage.begin());
  // The charge moves with the bytes: the old buffer is released first, so the peak stays one
  // shard; the new one is charged until the last holder of `adopted_keep_` goes.
  model::CountedVector<float>(params_.get_allocator()).swap(params_);
  adopted_keep_ =
      model::charge_while_held(std::move(keep), account_, params_category_, static_cast<int64_t>(n * sizeof(float)));
  adopted_params_ = storage.first(n);
}

void ModelShards::pull_params() {
  if (compute_params_) model_.compute_to_host(params_, compute_params_->span());
}

void ModelShards::push_params() {
  if (compute_params_) model_.compute_from_host(compute_params_->span(), params_);
}

void ModelShards::zero_grads() {
  std::fill(grads_.begin(), grads_.end(), 0.0f);
  if (compute_grads_) model_.compute_zero(compute_grads_->span());
  model_.zero_grads();
}

}  // namespace parlab::train
