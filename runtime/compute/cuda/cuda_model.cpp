#include "runtime/compute/cuda/cuda_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/compute/cuda/device.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/compute/cuda/memory.h"
#include "strategy/errors.h"

namespace parlab::compute::cuda {

CudaModel::CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device) : host_(host) {
  if (host.chunks().size() > 1)
    throw RuntimeError("the CUDA model holds one layer span per stage: interleaved pipeline stages are not "
                       "implemented on the GPU yet");
  const model::FlatRange whole{0, host.layout().numel()};
  staged_ = host.owned_range() != whole || host.tp_slice().size > 1;
  // A stage's parameters go to their global offsets of a whole-network (local-shape) buffer.
  const bool replica = host.owned_range() == whole;
  device_ = std::make_unique<DeviceMlp>(host.shape(),
                                        host.holds_params() && replica ? host.params() : std::span<const float>{},
                                        max_batch, device, slots);
  device_->set_tp_partial(host.tp_slice().size > 1);
  if (!replica && host.holds_params()) push_params(host.owned_range());
  slot_used_.assign(static_cast<size_t>(slots), 0);
}

std::span<float> CudaModel::compute_params() {
  const model::FlatRange o = host_.owned_range();
  return device_->params().subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.numel()));
}

std::span<float> CudaModel::compute_grads() {
  const model::FlatRange o = host_.owned_range();
  return device_->grads().subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.numel()));
}

void CudaModel::check_range(model::FlatRange range, const char* what) const {
  if (!host_.owned_range().contains(range))
    throw RuntimeError(std::string("CudaModel::") + what + ": range [" + std::to_string(range.begin) + ", " +
                       std::to_string(range.end) + ") lies outside the model");
}

// Flat offset i is element i of the device buffers and element i - owned.begin of the host's.
void CudaModel::pull_grads(model::FlatRange range) {
  check_range(range, "pull_grads");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.grads().data() + host_index(range), device_->grads().data() + range.begin,
                    static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

void CudaModel::push_params(model::FlatRange range) {
  check_range(range, "push_params");
  DeviceGuard guard(device_->device());
  // From pageable memory: the call returns once the host buffer may be reused; the stream orders
  // the next forward after the copy.
  copy_to_device(device_->params().data() + range.begin, host_.params().data() + host_index(range),
                 static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

// After device-optimizer steps (train/device_optimizer.h) the device holds the current weights.
void CudaModel::pull_params(model::FlatRange range) {
  check_range(range, "pull_params");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.params().data() + host_index(range), device_->params().data() + range.begin,
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

void CudaModel::download_boundary(std::span<float> host, bool gradient, int l) const {
  const std::vector<float> v = gradient ? device_->dactivation(l) : device_->activation(l);
  std::copy(v.begin(), v.end(), host.begin());
}

void CudaModel::forward_layer(int layer, model::MicrobatchState& mb) const {
  if (mb.batch() == 0) return;  // an empty microbatch contributes nothing (as on the host)
  const bool first = layer == host_.first_layer();
  const bool head = layer == static_cast<int>(host_.shape().blocks);
  device_->select_slot(slot_of(mb, first));
  if (first) {
    const std::span<const float> x = mb.activation(layer);
    const std::span<const int32_t> labels = std::as_const(mb).labels();
    device_->set_microbatch_at(layer, x, labels, mb.global_batch());
  } else if (staged_) {
    device_->set_activation(layer, mb.activation(layer));  // received, or reduced over the TP group
  }
  device_->forward_layer(layer);
  if (head) mb.set_head_outputs(device_->logits(), device_->losses());
  else if (staged_) download_boundary(mb.activation(layer + 1), false, layer + 1);
}

void CudaModel::backward_layer(int layer, model::MicrobatchState& mb) {
  if (mb.batch() == 0) return;
  const int slot = slot_of(mb, false);
  const bool head = layer == static_cast<int>(host_.shape().blocks);
  device_->select_slot(slot);
  if (staged_ && !head) device_->set_dactivation(layer + 1, mb.dactivation(layer + 1));
  device_->backward_layer(layer);
  if (staged_) download_boundary(mb.dactivation(layer), true, layer);
  if (layer == host_.first_layer()) {
    slot_used_[static_cast<size_t>(slot)] = 0;
    slot_of_.erase(&mb);
  }
}

// The reduced partial sum is in the host state: up to the GPU, bias and residual there (fc2.bias
// is the device's current value, which the host copy may lag behind), and the rows back.
void CudaModel::tp_finish_forward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) const {
  if (mb.batch() == 0) return;
  device_->select_slot(slot_of(mb, false));
  device_->set_activation(layer + 1, mb.activation(layer + 1));
  device_->tp_finish_forward(layer, row_begin, row_end);
  const int64_t h = host_.shape().hidden;
  const std::vector<float> y = device_->activation(layer + 1);
  std::copy(y.begin() + row_begin * h, y.begin() + row_end * h, mb.activation(layer + 1).begin() + row_begin * h);
}

// dx += dy on the rows: no parameter takes part, so the host's finish is the device's (the next
// layer's backward uploads dactivation(layer) before it computes).
void CudaModel::tp_finish_backward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) {
  host_.tp_finish_backward(layer, mb, row_begin, row_end);
}

}  // namespace parlab::compute::cuda
