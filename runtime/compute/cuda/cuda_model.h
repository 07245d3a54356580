#pragma once
// CudaModel: model::Model (runtime/model/model.h) on one GPU, around a DeviceMlp. Its host
// buffers are those of a host LabMlp (borrowed), so the optimizer, checkpoints and exports work on
// host copies in the same global names; its compute buffers are the DeviceMlp's (device memory,
// for an NcclCommunicator).
//
// Microbatches: the executor hands in host MicrobatchStates; the first layer's forward uploads
// the inputs and labels of a state into a free device slot, the head's forward copies logits and
// losses back into it, and the first layer's backward frees the slot. zero_grads (the start of a
// step) forgets every slot. Whole network, whole replica only: pipeline stages and ZeRO-2/3
// bindings are refused (RuntimeError naming what is missing).
#include <map>
#include <memory>

#include "runtime/compute/cuda/device_mlp.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/model/model.h"

namespace parlab::compute::cuda {

class CudaModel final : public model::Model {
 public:
  // `host`: the whole network with full parameters and gradients, borrowed; its parameters are
  // copied to `device`. `max_batch`: the largest microbatch; `slots`: how many microbatches may be
  // live at once (the plan's microbatches is always enough). Throws ConfigError / CudaError.
  CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device);

  std::string_view device_name() const override { return "cuda"; }
  const model::ParamLayout& layout() const override { return host_.layout(); }
  int first_layer() const override { return host_.first_layer(); }
  int end_layer() const override { return host_.end_layer(); }
  model::FlatRange owned_range() const override { return host_.owned_range(); }
  bool holds_params() const override { return true; }
  bool holds_grads() const override { return true; }
  std::span<float> params() override { return host_.params(); }
  std::span<const float> params() const override { return host_.params(); }
  std::span<float> grads() override { return host_.grads(); }
  std::span<const float> grads() const override { return host_.grads(); }
  std::span<float> compute_params() override { return device_->params(); }
  std::span<float> compute_grads() override { return device_->grads(); }
  void pull_grads(model::FlatRange range) override;
  void push_params(model::FlatRange range) override;
  void pull_params(model::FlatRange range) override;
  void zero_grads() override;
  void bind_params(model::FlatRange range, std::span<float> storage) override;
  void bind_grads(model::FlatRange range, std::span<float> storage) override;
  void forward_layer(int layer, model::MicrobatchState& mb) const override;
  void backward_layer(int layer, model::MicrobatchState& mb) override;
  void synchronize() const override { device_->synchronize(); }

  DeviceMlp& device_mlp() { return *device_; }
  cudaStream_t stream() const { return device_->stream(); }

 private:
  int slot_of(const model::MicrobatchState& mb, bool assign) const;
  void check_range(model::FlatRange range, const char* what) const;

  model::LabMlp& host_;
  std::unique_ptr<DeviceMlp> device_;  // mutable through the pointer: forward_layer is const
  mutable std::map<const model::MicrobatchState*, int> slot_of_;
  mutable std::vector<char> slot_used_;
};

}  // namespace parlab::compute::cuda
