#pragma once
// Checked calls at the CUDA and cuBLAS boundary. Every runtime or cuBLAS call whose status we do
// not handle ourselves goes through a macro that turns a failure into a typed exception naming
// the call, the source location and the library's own words:
//   "cudaMalloc(&ptr, bytes) failed at runtime/gpu/memory.cpp:21:
//    cudaErrorMemoryAllocation (out of memory)"
// Sticky device errors (an illegal address inside a kernel) surface at the next checked call;
// they poison the CUDA context of the process, so the only recovery is a new process.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "base/errors.h"

namespace parlab::compute::cuda {

// A CUDA runtime call failed.
class CudaError : public RuntimeError {
 public:
  CudaError(cudaError_t code, const std::string& call, const char* file, int line);
  cudaError_t code() const { return code_; }

 private:
  cudaError_t code_;
};

// A cuBLAS call failed.
class CublasError : public RuntimeError {
 public:
  CublasError(cublasStatus_t status, const std::string& call, const char* file, int line);
  cublasStatus_t status() const { return status_; }

 private:
  cublasStatus_t status_;
};

// "runtime/gpu/memory.cpp:21": __FILE__ relative to the source tree (no build paths in
// messages), as "file:line".
std::string source_location(const char* file, int line);

// For destructors and other places that must not throw: the error text of a failed call, or ""
// when `code` is cudaSuccess. The caller decides whether to log it.
std::string describe(cudaError_t code);

}  // namespace parlab::compute::cuda

// Evaluates `expr` (a cudaError_t) once; throws CudaError unless it is cudaSuccess.
#define PARLAB_CUDA_CHECK(expr)                                                                 \
  do {                                                                                          \
    const cudaError_t parlab_cuda_status_ = (expr);                                             \
    if (parlab_cuda_status_ != cudaSuccess) {                                                   \
      throw ::parlab::compute::cuda::CudaError(parlab_cuda_status_, #expr, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

// After a kernel launch: a bad launch configuration is reported at once (cudaGetLastError also
// clears it); faults inside the kernel surface at the next synchronising call.
#define PARLAB_CUDA_CHECK_LAUNCH(kernel_name)                                                                      \
  do {                                                                                                             \
    const cudaError_t parlab_cuda_status_ = cudaGetLastError();                                                    \
    if (parlab_cuda_status_ != cudaSuccess) {                                                                      \
      throw ::parlab::compute::cuda::CudaError(parlab_cuda_status_, std::string(kernel_name) + "<<<...>>> launch", \
                                               __FILE__, __LINE__);                                                \
    }                                                                                                              \
  } while (0)

// Evaluates `expr` (a cublasStatus_t) once; throws CublasError unless CUBLAS_STATUS_SUCCESS.
#define PARLAB_CUBLAS_CHECK(expr)                                                                   \
  do {                                                                                              \
    const cublasStatus_t parlab_cublas_status_ = (expr);                                            \
    if (parlab_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                           \
      throw ::parlab::compute::cuda::CublasError(parlab_cublas_status_, #expr, __FILE__, __LINE__); \
    }                                                                                               \
  } while (0)
