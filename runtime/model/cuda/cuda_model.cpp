#include "runtime/model/cuda/cuda_model.h"

#include <algorithm>
#include <string>
#include <utility>

#include "runtime/gpu/device.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/gpu/memory.h"
#include "base/errors.h"

namespace parlab::compute::cuda {

namespace {

// cudaMalloc under the pool (runtime/model/compute_memory.h); new buffers are zeroed on the
// model's stream, so a collective or kernel issued after them sees zeros (communicators wait
// for that stream).
class CudaRawMemory final : public model::RawMemory {
 public:
  CudaRawMemory(int device, cudaStream_t stream) : device_(device), stream_(stream) {}
  void* allocate(std::size_t bytes) override {
    DeviceGuard guard(device_);
    void* p = nullptr;
    PARLAB_CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  void free(void* p, std::size_t) noexcept override {
    try {
      DeviceGuard guard(device_);
      cudaFree(p);  // waits for the device: no kernel still reads it
    } catch (const std::exception&) {}
  }
  void zero(void* p, std::size_t bytes) override {
    DeviceGuard guard(device_);
    zero_on_device(p, bytes, stream_);
  }

 private:
  int device_;
  cudaStream_t stream_;
};

}  // namespace

CudaModel::CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device) : host_(host) {
  const model::FlatRange whole{0, host.layout().numel()};
  // A stage's parameters go to their global offsets of a whole-network (local-shape) buffer.
  const bool replica = host.owned_range() == whole;
  // What the host keeps, the device keeps (ZeRO-2/3 bind the rest); an interleaved stage keeps
  // its chunks in packed buffers instead (below).
  const bool packed = host.chunks().size() > 1;
  const DeviceMlp::Storage storage{.params = host.holds_params() && !packed, .grads = host.holds_grads() && !packed};
  device_ =
      std::make_unique<DeviceMlp>(host.shape(), storage.params && replica ? host.params() : std::span<const float>{},
                                  max_batch, device, slots, storage);
  device_->set_tp_partial(host.tp_slice().size > 1);
  memory_ = std::make_unique<model::ComputeMemory>(std::make_unique<CudaRawMemory>(device, stream()));
  const DeviceMlp::Footprint f = device_->footprint();
  model::MemoryAccount* account = &memory_->account();
  params_charge_ = model::AccountCharge(account, model::MemoryCategory::kParameters, f.params);
  grads_charge_ = model::AccountCharge(account, model::MemoryCategory::kGradients, f.grads);
  activations_charge_ = model::AccountCharge(account, model::MemoryCategory::kActivations, f.activations);
  scratch_charge_ = model::AccountCharge(account, model::MemoryCategory::kTemporary, f.scratch);
  if (packed) {
    // Interleaved: the chunks' tensors sit packed in the host's flat coordinates, not at their
    // global offsets; bind each into packed device buffers at the host's positions.
    DeviceGuard guard(device);
    const int64_t n = host.owned_range().numel();
    packed_params_ = memory_->buffer(n, model::MemoryCategory::kParameters);
    packed_grads_ = memory_->buffer(n, model::MemoryCategory::kGradients);
    for (const model::ParamTensor& t : host.layout().tensors()) {
      const int64_t at = host.position(t);
      if (at < 0) continue;
      const model::FlatRange global{t.offset, t.offset + t.numel};
      const auto local = static_cast<size_t>(at - host.owned_range().begin);
      device_->bind_params(global, packed_params_->span().subspan(local, static_cast<size_t>(t.numel)));
      device_->bind_grads(global, packed_grads_->span().subspan(local, static_cast<size_t>(t.numel)));
    }
  }
  if (!replica && host.holds_params()) push_params(host.owned_range());
  device_->synchronize();  // the zeroing of the packed buffers and the uploads are done
  slot_used_.assign(static_cast<size_t>(slots), 0);
}

std::span<float> CudaModel::compute_params() {
  if (packed()) return packed_params_->span();
  if (!host_.holds_params()) return {};  // ZeRO-3: the shard is the executor's buffer
  const model::FlatRange o = host_.owned_range();
  return device_->params().subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.numel()));
}

std::span<float> CudaModel::compute_grads() {
  if (packed()) return packed_grads_->span();
  if (!host_.holds_grads()) return {};  // ZeRO-2/3: the shard is the executor's buffer
  const model::FlatRange o = host_.owned_range();
  return device_->grads().subspan(static_cast<size_t>(o.begin), static_cast<size_t>(o.numel()));
}

float* CudaModel::device_param(model::FlatRange range) { return compute_params().data() + host_index(range); }
float* CudaModel::device_grad(model::FlatRange range) { return compute_grads().data() + host_index(range); }

void CudaModel::check_range(model::FlatRange range, const char* what) const {
  if (!host_.owned_range().contains(range))
    throw RuntimeError(std::string("CudaModel::") + what + ": range [" + std::to_string(range.begin) + ", " +
                       std::to_string(range.end) + ") lies outside the model");
}

// Flat offset i is element i of the device buffers and element i - owned.begin of the host's.
void CudaModel::pull_grads(model::FlatRange range) {
  check_range(range, "pull_grads");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.grads().data() + host_index(range), device_grad(range),
                    static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

void CudaModel::push_params(model::FlatRange range) {
  check_range(range, "push_params");
  DeviceGuard guard(device_->device());
  // From pageable memory: the call returns once the host buffer may be reused; the stream orders
  // the next forward after the copy.
  copy_to_device(device_param(range), host_.params().data() + host_index(range),
                 static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

// After device-optimizer steps (train/device_optimizer.h) the device holds the current weights.
void CudaModel::pull_params(model::FlatRange range) {
  check_range(range, "pull_params");
  DeviceGuard guard(device_->device());
  copy_to_host_sync(host_.params().data() + host_index(range), device_param(range),
                    static_cast<size_t>(range.numel()) * sizeof(float), stream());
}

void CudaModel::zero_grads() {
  device_->zero_grads();
  if (packed()) compute_zero(packed_grads_->span());
  slot_of_.clear();
  std::fill(slot_used_.begin(), slot_used_.end(), 0);
}

// ZeRO-2/3 bindings are of whole-model replicas (the trainer refuses ZeRO with pp > 1), whose flat
// coordinates are the device's.
void CudaModel::bind_params(model::FlatRange range, std::span<float> storage) {
  if (packed()) throw RuntimeError("CudaModel: an interleaved stage's parameters cannot be bound to ZeRO buffers");
  device_->bind_params(range, storage);
}

void CudaModel::bind_grads(model::FlatRange range, std::span<float> storage) {
  if (packed()) throw RuntimeError("CudaModel: an interleaved stage's gradients cannot be bound to ZeRO buffers");
  device_->bind_grads(range, storage);
}

namespace {

void check_sizes(size_t a, size_t b, const char* what) {
  if (a != b)
    throw RuntimeError(std::string("CudaModel::") + what + ": " + std::to_string(a) + " elements against " +
                       std::to_string(b));
}

}  // namespace

std::unique_ptr<model::ComputeBuffer> CudaModel::make_compute_buffer(int64_t elements, model::MemoryAccount*,
                                                                     model::MemoryCategory category,
                                                                     model::BufferInit) {
  return memory_->buffer(elements, category);
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

void CudaModel::compute_copy(std::span<float> dst, std::span<const float> src) {
  check_sizes(dst.size(), src.size(), "compute_copy");
  DeviceGuard guard(device_->device());
  copy_on_device(dst.data(), src.data(), src.size_bytes(), stream());
}

int CudaModel::select(const model::MicrobatchState& mb, bool assign) const {
  if (const auto it = slot_of_.find(&mb); it != slot_of_.end()) {
    device_->select_slot(it->second);
    return it->second;
  }
  if (!assign) throw RuntimeError("CudaModel: a microbatch reached a backward before any forward");
  for (size_t k = 0; k < slot_used_.size(); ++k)
    if (!slot_used_[k]) {
      slot_used_[k] = 1;
      slot_of_[&mb] = static_cast<int>(k);
      device_->select_slot(static_cast<int>(k));
      device_->begin_microbatch(mb.labels(), mb.global_batch());
      return static_cast<int>(k);
    }
  throw RuntimeError("CudaModel: more than " + std::to_string(slot_used_.size()) +
                     " microbatches in flight (raise the model's slots)");
}

std::span<float> CudaModel::compute_boundary(int l, bool gradient, model::MicrobatchState& mb) {
  if (mb.batch() == 0) return {};  // an empty microbatch moves nothing (as on the host)
  select(mb, true);
  return device_->boundary(l, gradient);
}

void CudaModel::release_microbatch(model::MicrobatchState& mb) {
  if (const auto it = slot_of_.find(&mb); it != slot_of_.end()) {
    slot_used_[static_cast<size_t>(it->second)] = 0;
    slot_of_.erase(it);
  }
  mb.release_activations();
}

void CudaModel::forward_layer(int layer, model::MicrobatchState& mb) const {
  if (mb.batch() == 0) return;  // an empty microbatch contributes nothing (as on the host)
  select(mb, true);
  // The data; any other first layer of a stage or chunk reads the boundary its recv wrote.
  if (layer == 0) device_->set_activation(0, mb.activation(0));
  device_->forward_layer(layer);
  if (layer == static_cast<int>(host_.shape().blocks)) mb.set_head_outputs(device_->logits(), device_->losses());
}

void CudaModel::backward_layer(int layer, model::MicrobatchState& mb) {
  if (mb.batch() == 0) return;
  select(mb, false);
  device_->backward_layer(layer);
}

// The reduced partial sum is on the device (compute_boundary): bias and residual there, with
// fc2.bias's current device value.
void CudaModel::tp_finish_forward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) const {
  if (mb.batch() == 0) return;
  select(mb, false);
  device_->tp_finish_forward(layer, row_begin, row_end);
}

void CudaModel::tp_finish_backward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) {
  if (mb.batch() == 0) return;
  select(mb, false);
  device_->tp_finish_backward(layer, row_begin, row_end);
}

}  // namespace parlab::compute::cuda
