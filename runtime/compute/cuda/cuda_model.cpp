#include "runtime/compute/cuda/cuda_model.h"

#include <string>
#include <utility>

#include "runtime/compute/cuda/device.h"
#include "runtime/compute/cuda/memory.h"
#include "strategy/errors.h"

namespace parlab::compute::cuda {

CudaModel::CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device) : host_(host) {
  if (!host.holds_params() || !host.holds_grads() || host.first_layer() != 0 ||
      host.end_layer() != host.layout().num_layers())
    throw RuntimeError("the CUDA model runs whole replicas only (every layer, full parameters and gradients): "
                       "pipeline stages and ZeRO-2/3 are not implemented on the GPU yet");
  device_ = std::make_unique<DeviceMlp>(host.shape(), host.params(), max_batch, device, slots);
  slot_used_.assign(static_cast<size_t>(slots), 0);
}

void CudaModel::check_range(model::FlatRange range, const char* what) const {
  if (!host_.owned_range().contains(range))
    throw RuntimeError(std::string("CudaModel::") + what + ": range [" + std::to_string(range.begin) + ", " +
                       std::to_string(range.end) + ") lies outside the model");
}

// Whole replica: flat offset i is element i of both buffers.
void CudaModel::pull_grads(model::FlatRange range) {
  check_range(range, "pull_grads");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.grads().data() + range.begin, device_->grads().data() + range.begin,
                    static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

void CudaModel::push_params(model::FlatRange range) {
  check_range(range, "push_params");
  DeviceGuard guard(device_->device());
  // From pageable memory: the call returns once the host buffer may be reused; the stream orders
  // the next forward after the copy.
  copy_to_device(device_->params().data() + range.begin, host_.params().data() + range.begin,
                 static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

// After device-optimizer steps (train/device_optimizer.h) the device holds the current weights.
void CudaModel::pull_params(model::FlatRange range) {
  check_range(range, "pull_params");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.params().data() + range.begin, device_->params().data() + range.begin,
                    static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

void CudaModel::zero_grads() {
  device_->zero_grads();
  slot_of_.clear();
  std::fill(slot_used_.begin(), slot_used_.end(), 0);
}

void CudaModel::bind_params(model::FlatRange, std::span<float>) {
  throw RuntimeError("ZeRO-3 parameter gathering is not implemented on the GPU yet (the CUDA model holds a whole replica)");
}

void CudaModel::bind_grads(model::FlatRange, std::span<float>) {
  throw RuntimeError("ZeRO-2/3 gradient buckets are not implemented on the GPU yet (the CUDA model holds a whole replica)");
}

int CudaModel::slot_of(const model::MicrobatchState& mb, bool assign) const {
  if (const auto it = slot_of_.find(&mb); it != slot_of_.end()) return it->second;
  if (!assign) throw RuntimeError("CudaModel: a microbatch reached a later layer before its first forward");
  for (size_t k = 0; k < slot_used_.size(); ++k)
    if (!slot_used_[k]) {
      slot_used_[k] = 1;
      slot_of_[&mb] = static_cast<int>(k);
      return static_cast<int>(k);
    }
  throw RuntimeError("CudaModel: more than " + std::to_string(slot_used_.size()) +
                     " microbatches in flight (raise the model's slots)");
}

void CudaModel::forward_layer(int layer, model::MicrobatchState& mb) const {
  if (mb.batch() == 0) return;  // an empty microbatch contributes nothing (as on the host)
  const bool first = layer == host_.first_layer();
  device_->select_slot(slot_of(mb, first));
  if (first) {
    const std::span<const float> x = mb.activation(0);
    const std::span<const int32_t> labels = std::as_const(mb).labels();
    device_->set_microbatch(x, labels, mb.global_batch());
  }
  device_->forward_layer(layer);
  if (layer == static_cast<int>(host_.shape().blocks)) mb.set_head_outputs(device_->logits(), device_->losses());
}

void CudaModel::backward_layer(int layer, model::MicrobatchState& mb) {
  if (mb.batch() == 0) return;
  const int slot = slot_of(mb, false);
  device_->select_slot(slot);
  device_->backward_layer(layer);
  if (layer == host_.first_layer()) {
    slot_used_[static_cast<size_t>(slot)] = 0;
    slot_of_.erase(&mb);
  }
}

}  // namespace parlab::compute::cuda
