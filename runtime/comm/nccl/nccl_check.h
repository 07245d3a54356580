#pragma once
// Checked calls at the NCCL boundary: every ncclResult_t we do not handle ourselves goes through
// PARLAB_NCCL_CHECK, which throws NcclError naming the call, file:line, NCCL's text for the code
// (ncclGetErrorString) and NCCL's last error message (ncclGetLastError), e.g.
//   "ncclCommInitRankConfig(...) failed at runtime/comm/nccl/rendezvous.cpp:80: invalid usage
//    (run with NCCL_DEBUG=WARN for details) [NCCL: Duplicate GPU detected: rank 1 and rank 0
//    both on CUDA device 0]"
// Our communicators are NONBLOCKING (ncclConfig_t::blocking = 0), so calls may also return
// ncclInProgress; PARLAB_NCCL_CHECK_ASYNC accepts it, and settle() then waits for the call to
// finish with a deadline, which is what lets rendezvous and connection setup time out instead of
// hanging forever.
#include <nccl.h>

#include <chrono>
#include <string>

#include "base/errors.h"

namespace parlab::comm {

class NcclError : public RuntimeError {
 public:
  NcclError(ncclResult_t code, const std::string& call, const char* file, int line);
  ncclResult_t code() const { return code_; }

 private:
  ncclResult_t code_;
};

// "invalid usage (run with NCCL_DEBUG=WARN for details) [NCCL: <last error>]".
std::string nccl_error_text(ncclResult_t code);

// Waits until `comm` has no NCCL call in progress (ncclCommGetAsyncError leaves ncclInProgress).
// Returns true when it settled with ncclSuccess, false when `deadline` passed first; throws
// NcclError (naming `what`) when the communicator reports an error.
bool settle(ncclComm_t comm, std::chrono::steady_clock::time_point deadline, const char* what);

}  // namespace parlab::comm

#define PARLAB_NCCL_CHECK(expr)                                                        \
  do {                                                                                 \
    const ncclResult_t parlab_nccl_status_ = (expr);                                   \
    if (parlab_nccl_status_ != ncclSuccess) {                                          \
      throw ::parlab::comm::NcclError(parlab_nccl_status_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)

// For calls on a nonblocking communicator: ncclInProgress is not a failure (settle() follows).
#define PARLAB_NCCL_CHECK_ASYNC(expr)                                                  \
  do {                                                                                 \
    const ncclResult_t parlab_nccl_status_ = (expr);                                   \
    if (parlab_nccl_status_ != ncclSuccess && parlab_nccl_status_ != ncclInProgress) { \
      throw ::parlab::comm::NcclError(parlab_nccl_status_, #expr, __FILE__, __LINE__); \
    }                                                                                  \
  } while (0)
