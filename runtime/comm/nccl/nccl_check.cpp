#include "runtime/comm/nccl/nccl_check.h"

#include <algorithm>
#include <thread>

#include "runtime/gpu/cuda_check.h"

namespace parlab::comm {

std::string nccl_error_text(ncclResult_t code) {
  std::string text = ncclGetErrorString(code);
  // The last error is process-wide and may belong to an earlier call: shown as context only.
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += std::string(" [NCCL: ") + last + "]";
  return text;
}

NcclError::NcclError(ncclResult_t code, const std::string& call, const char* file, int line)
    : RuntimeError(call + " failed at " + compute::cuda::source_location(file, line) + ": " + nccl_error_text(code)),
      code_(code) {}

bool settle(ncclComm_t comm, std::chrono::steady_clock::time_point deadline, const char* what) {
  auto pause = std::chrono::microseconds(10);
  for (;;) {
    ncclResult_t state = ncclSuccess;
    PARLAB_NCCL_CHECK(ncclCommGetAsyncError(comm, &state));
    if (state == ncclSuccess) return true;
    if (state != ncclInProgress) {
      throw NcclError(state, std::string(what) + " (asynchronous completion)", __FILE__, __LINE__);
    }
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }
}

}  // namespace parlab::comm
