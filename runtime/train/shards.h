#pragma once
// What a ZeRO rank keeps of the model between steps (Rajbhandari et al., SC'20).
//
// The flat parameter buffer of n elements is cut into dp contiguous shards, rank r owning
//   shard_r = [n r / dp, n (r + 1) / dp)            (strategy::zero_shard: the step programs'
//                                                    optimizer ranges and chunk sizes use it too)
// and the rank keeps, beside the optimizer state of its shard (stage 1, always):
//   stage 1  a full copy of the parameters and of the gradients (the model's own buffers);
//   stage 2  the full parameters, but only the reduced gradients of its shard (this object's
//            buffer); the model's gradients are bound to bucket buffers during backward;
//   stage 3  only its shard of the parameters too (this object's buffer); the model computes on
//            layers the executor all-gathers just before they run.
// A world (or DP group) of one has no ZeRO ops in its program: stage 0, everything replicated.
//
// On a device model (model.compute_is_host() false) the stage-2/3 shard buffers live in the
// model's compute memory, where the collectives and the device optimizer use them; params()
// keeps a host mirror of a stage-3 shard for checkpoints (pull_params / push_params move it),
// and the shard's gradients have no host copy (the update runs on the device).
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/model/lab_mlp.h"
#include "runtime/model/memory_account.h"

namespace parlab::train {

// shard_r above.
model::FlatRange zero_shard(int64_t n, int dp, int r);
// How many elements of `range` each rank's shard holds: the counts of the range's
// reduce-scatter and all-gather (some may be 0).
std::vector<int64_t> shard_counts(model::FlatRange range, int64_t n, int dp);

// What the model must hold for a ZeRO stage (stage 0 and 1: everything).
model::ModelStorage storage_for_stage(int zero, model::MemoryAccount* account);

class ModelShards {
 public:
  // `model` is borrowed and must hold what storage_for_stage(zero) says; `shard` is this rank's
  // range of the model's flat buffer (the whole model for stage 0). A stage-3 shard is
  // initialised from `seed` to the values the whole model would have there. Throws ConfigError
  // when the model's storage does not match the stage. `params_category` is where the stage-3
  // shard is charged: parameters in fp32, optimizer state under mixed precision, where the fp32
  // shard is the optimizer's master copy and the layers compute on bf16 copies of the gathers.
  ModelShards(model::Model& model, int zero, model::FlatRange shard, uint64_t seed, model::MemoryAccount* account,
              model::MemoryCategory params_category = model::MemoryCategory::kParameters);

  int zero() const { return zero_; }
  model::FlatRange shard() const { return shard_; }
  // The shard's parameters: stage 3's own buffer, else a view of the model's copy.
  std::span<float> params();
  std::span<const float> params() const;
  // The shard's reduced gradients: stage 2/3's own buffer, else a view of the model's.
  std::span<float> grads();
  std::span<const float> grads() const;
  void zero_grads();
  // The same shard in the model's COMPUTE memory (model.h), where the collectives, the layers and
  // a device optimizer (device_optimizer.h) use it: stages 0-1 (2 for the parameters) a view of
  // the model's compute buffers, stage 2/3 this object's (the host vectors on a host model).
  std::span<float> compute_params();
  std::span<float> compute_grads();
  // Stage 3 on the host: the shard's parameters move into `storage` (at least the shard's size;
  // the DP group's registered memory, where a shared-memory all-gather reads them in place), which
  // stays valid while `keep` lives. The charge moves with them: the peak stays one shard.
  void adopt_params(std::span<float> storage, std::shared_ptr<void> keep);
  // Stage 3 on a device: the shard's parameters compute -> host mirror (before a checkpoint
  // reads params()) and back (after a load wrote it). No-ops otherwise.
  void pull_params();
  void push_params();

 private:
  model::Model& model_;
  int zero_ = 0;
  model::FlatRange shard_;
  model::CountedVector<float> params_, grads_;
  std::span<float> adopted_params_;     // stage 3 on the host after adopt_params
  std::shared_ptr<void> adopted_keep_;  // keeps that memory, and its charge, alive
  model::MemoryAccount* account_ = nullptr;
  model::MemoryCategory params_category_;
  bool device_ = false;                                                   // the model computes in memory of its own
  std::unique_ptr<model::ComputeBuffer> compute_params_, compute_grads_;  // device stage 2/3
};

}  // namespace parlab::train
