#pragma once
// The optimizer's device twin on a GPU (train/device_optimizer.h): AdamW with exp_avg and
// exp_avg_sq resident on the device, updated by compute::cuda::adamw_step on the model's stream
// (after the backward that wrote the gradients, before the next forward: one stream orders all).
// SGD has no device version here: the trainer then updates on the host.
#include <cuda_runtime_api.h>

#include <memory>

#include "runtime/model/memory_account.h"
#include "runtime/train/device_optimizer.h"

namespace parlab::device {

// The device twin of `host` on GPU `device`, its kernels on `stream`; zero state, charged to
// `account` as optimizer state (the model's device account; null: uncounted). Null when host is
// not an AdamW. Throws CudaError when the device cannot hold the state.
std::unique_ptr<train::DeviceOptimizer> make_cuda_optimizer(const train::Optimizer& host, int device,
                                                            cudaStream_t stream,
                                                            model::MemoryAccount* account = nullptr);

}  // namespace parlab::device
