#include "runtime/compute/cuda/cublas.h"

namespace parlab::compute::cuda {

CublasHandle::CublasHandle(cudaStream_t stream) : stream_(stream), workspace_(kWorkspaceBytes) {
  PARLAB_CUBLAS_CHECK(cublasCreate(&handle_));
  try {
    PARLAB_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
    // After cublasSetStream, which resets the handle to cuBLAS's shared default workspace.
    PARLAB_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
    PARLAB_CUBLAS_CHECK(cublasSetMathMode(handle_, CUBLAS_DEFAULT_MATH));
    PARLAB_CUBLAS_CHECK(cublasSetPointerMode(handle_, CUBLAS_POINTER_MODE_HOST));
  } catch (...) {
    cublasDestroy(handle_);
    throw;
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

}  // namespace parlab::compute::cuda
