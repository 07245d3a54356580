#include "runtime/device/cuda_optimizer.h"

#include <string>

#include "runtime/gpu/device.h"
#include "runtime/gpu/memory.h"
#include "runtime/compute/cuda/optimizer_kernels.h"
#include "runtime/model/compute_memory.h"
#include "base/errors.h"

namespace parlab::device {
namespace {

namespace cuda = compute::cuda;

cuda::AdamWScalars kernel_scalars(const train::AdamWStepScalars& s) {
  return cuda::AdamWScalars{.step_size = s.step_size,
                            .bias_correction2_sqrt = s.bias_correction2_sqrt,
                            .decay = s.decay,
                            .w = s.w,
                            .beta2 = s.beta2,
                            .one_minus_beta2 = s.one_minus_beta2,
                            .eps = s.eps,
                            .decays = s.decays,
                            .near_m = s.near_m};
}

class CudaAdamW final : public train::DeviceOptimizer {
 public:
  CudaAdamW(const train::AdamW& host, int device, cudaStream_t stream, model::MemoryAccount* account)
      : device_(device),
        stream_(stream),
        n_(static_cast<size_t>(host.range().numel())),
        charge_(account, model::MemoryCategory::kOptimizer, static_cast<int64_t>(2 * n_ * sizeof(float))) {
    cuda::DeviceGuard guard(device_);
    exp_avg_ = cuda::DeviceBuffer<float>(n_);
    exp_avg_sq_ = cuda::DeviceBuffer<float>(n_);
    exp_avg_.zero(stream_);
    exp_avg_sq_.zero(stream_);
  }

  void step(const train::Optimizer& host, std::span<float> params, std::span<const float> grads) override {
    const auto* adamw = dynamic_cast<const train::AdamW*>(&host);
    if (adamw == nullptr) throw RuntimeError("the CUDA AdamW was handed a " + std::string(host.kind()) + " optimizer");
    if (params.size() != n_ || grads.size() != n_)
      throw RuntimeError("CUDA AdamW step: got " + std::to_string(params.size()) + " params and " +
                         std::to_string(grads.size()) + " grads for a range of " + std::to_string(n_));
    cuda::DeviceGuard guard(device_);
    cuda::adamw_step(stream_, params.data(), grads.data(), exp_avg_.data(), exp_avg_sq_.data(),
                     static_cast<int64_t>(n_), kernel_scalars(adamw->step_scalars()));
  }

  void download_state(train::Optimizer& host) const override {
    cuda::DeviceGuard guard(device_);
    exp_avg_.download(host.mutable_buffer("exp_avg"), stream_);
    exp_avg_sq_.download(host.mutable_buffer("exp_avg_sq"), stream_);
  }

  void upload_state(const train::Optimizer& host) override {
    cuda::DeviceGuard guard(device_);
    exp_avg_.upload(host.buffer("exp_avg"), stream_);
    exp_avg_sq_.upload(host.buffer("exp_avg_sq"), stream_);
  }

 private:
  int device_;
  cudaStream_t stream_;
  size_t n_;
  model::AccountCharge charge_;  // the two moments, on the device's account
  cuda::DeviceBuffer<float> exp_avg_, exp_avg_sq_;
};

}  // namespace

std::unique_ptr<train::DeviceOptimizer> make_cuda_optimizer(const train::Optimizer& host, int device,
                                                            cudaStream_t stream, model::MemoryAccount* account) {
  const auto* adamw = dynamic_cast<const train::AdamW*>(&host);
  if (adamw == nullptr) return nullptr;
  return std::make_unique<CudaAdamW>(*adamw, device, stream, account);
}

}  // namespace parlab::device
