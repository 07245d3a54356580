// The device layer of a build without the GPU backend: the CPU only, and one line saying so.
#include "runtime/device/device.h"
#include "strategy/errors.h"

namespace parlab::device {

bool cuda_built() { return false; }

std::string unavailable_reason(Kind kind) {
  if (kind == Kind::kCpu) return "";
  return "this parlab was built without the GPU backend (CUDA/NCCL not found at configure time, or "
         "PARLAB_CUDA=OFF); use --device cpu";
}

CudaRank open_cuda_rank(std::shared_ptr<comm::Store>, int, int, int, const CudaRankOptions&) {
  throw ConfigError("--device", "cuda", unavailable_reason(Kind::kCuda));
}

}  // namespace parlab::device
