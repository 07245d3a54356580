#pragma once
// One cuBLAS handle bound to one stream, set up for reproducible fp32:
//   - CUBLAS_DEFAULT_MATH: sgemm in true fp32 (no TF32 tensor-core downconversion, which would
//     change results at the 1e-3 level and differ from the CPU reference);
//   - a workspace owned by the handle (cublasSetWorkspace): cuBLAS then never picks a different
//     algorithm because its internal workspace pool was shared with another stream, which is
//     the documented source of run-to-run differences with several streams.
// cuBLAS documents bit-identical results run to run for a given toolkit, architecture and SM
// count under these conditions (cuBLAS docs, "Results reproducibility").
#include <cublas_v2.h>

#include "runtime/gpu/memory.h"

namespace parlab::compute::cuda {

class CublasHandle {
 public:
  // Workspace size: cuBLAS recommends 32 MiB on Hopper for best kernel choice.
  static constexpr std::size_t kWorkspaceBytes = 32u << 20;

  // On the current device; every call of this handle runs on `stream` (not owned).
  explicit CublasHandle(cudaStream_t stream);
  ~CublasHandle();
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  cudaStream_t stream() const { return stream_; }

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceAllocation workspace_;
};

}  // namespace parlab::compute::cuda
