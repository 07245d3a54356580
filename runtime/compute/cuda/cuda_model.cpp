#include "runtime/compute/cuda/cuda_model.h"

#include <string>
#include <utility>

#include "runtime/compute/cuda/device.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/compute/cuda/memory.h"
#include "strategy/errors.h"

namespace parlab::compute::cuda {

CudaModel::CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device) : host_(host) {
  if (host.first_layer() != 0 || host.end_layer() != host.layout().num_layers() || host.tp_slice().size > 1)
    throw RuntimeError("the CUDA model runs the whole network only: pipeline stages and tensor-parallel slices "
                       "are not implemented on the GPU yet");
  device_ = std::make_unique<DeviceMlp>(host.shape(), host.holds_params() ? host.params() : std::span<const float>{},
                                        max_batch, device, slots);
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

void CudaModel::bind_params(model::FlatRange range, std::span<float> storage) { device_->bind_params(range, storage); }

void CudaModel::bind_grads(model::FlatRange range, std::span<float> storage) { device_->bind_grads(range, storage); }

namespace {

// Device memory for the executor and the shards, zeroed on the model's stream (so a collective
// or a kernel issued after it sees zeros: the communicators wait for that stream).
class CudaBuffer final : public model::ComputeBuffer {
 public:
  CudaBuffer(int64_t n, int device, cudaStream_t stream) : device_(device), values_(static_cast<size_t>(n)) {
    values_.zero(stream);
  }
  ~CudaBuffer() override {
    try {
      DeviceGuard guard(device_);
      values_ = DeviceBuffer<float>();  // cudaFree waits for the device: no kernel still reads it
    } catch (const std::exception&) {
    }
  }
  std::span<float> span() override { return values_.span(); }

 private:
  int device_;
  DeviceBuffer<float> values_;
};

void check_sizes(size_t a, size_t b, const char* what) {
  if (a != b) throw RuntimeError(std::string("CudaModel::") + what + ": " + std::to_string(a) + " elements against " + std::to_string(b));
}

}  // namespace

std::unique_ptr<model::ComputeBuffer> CudaModel::make_compute_buffer(int64_t elements, model::MemoryAccount*,
                                                                     model::MemoryCategory) {
  DeviceGuard guard(device_->device());
  return std::make_unique<CudaBuffer>(elements, device_->device(), stream());
}

// The host's dst[i] += src[i] as a kernel (residual_backward: dinp1 += dout, one fp32 add).
void CudaModel::compute_accumulate(std::span<float> dst, std::span<const float> src) {
  check_sizes(dst.size(), src.size(), "compute_accumulate");
  DeviceGuard guard(device_->device());
  residual_backward(stream(), dst.data(), nullptr, src.data(), static_cast<int64_t>(dst.size()));
}

void CudaModel::compute_to_host(std::span<float> host, std::span<const float> compute) {
  check_sizes(host.size(), compute.size(), "compute_to_host");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host.data(), compute.data(), host.size_bytes(), stream());
}

void CudaModel::compute_from_host(std::span<float> compute, std::span<const float> host) {
  check_sizes(compute.size(), host.size(), "compute_from_host");
  DeviceGuard guard(device_->device());
  copy_to_device(compute.data(), host.data(), host.size_bytes(), stream());
}

void CudaModel::compute_zero(std::span<float> compute) {
  DeviceGuard guard(device_->device());
  zero_on_device(compute.data(), compute.size_bytes(), stream());
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
