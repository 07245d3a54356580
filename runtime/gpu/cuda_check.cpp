#include "runtime/gpu/cuda_check.h"

#include <cstring>
#include "parlab/source_dir.h"

namespace parlab::compute::cuda {

std::string source_location(const char* file, int line) {
  std::string path = file;
#ifdef PARLAB_SOURCE_DIR
  const std::string root = std::string(PARLAB_SOURCE_DIR) + "/";
  if (path.compare(0, root.size(), root) == 0) path.erase(0, root.size());
#endif
  return path + ":" + std::to_string(line);
}

std::string describe(cudaError_t code) {
  if (code == cudaSuccess) return "";
  return std::string(cudaGetErrorName(code)) + " (" + cudaGetErrorString(code) + ")";
}

CudaError::CudaError(cudaError_t code, const std::string& call, const char* file, int line)
    : RuntimeError(call + " failed at " + source_location(file, line) + ": " + describe(code)), code_(code) {}

namespace {
std::string cublas_text(cublasStatus_t status) {
  // Both strings come from cuBLAS itself: the enum name, then its description.
  return std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")";
}
}  // namespace

CublasError::CublasError(cublasStatus_t status, const std::string& call, const char* file, int line)
    : RuntimeError(call + " failed at " + source_location(file, line) + ": " + cublas_text(status)), status_(status) {}

}  // namespace parlab::compute::cuda
