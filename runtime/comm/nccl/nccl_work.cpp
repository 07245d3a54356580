#include "runtime/comm/nccl/nccl_work.h"

#include <thread>

#include "runtime/comm/nccl/nccl_check.h"
#include "runtime/gpu/device.h"

namespace parlab::comm::nccl_backend {

namespace cuda = compute::cuda;

NcclShared::NcclShared(RecorderIdentity identity, std::size_t capacity, int device_index, std::filesystem::path dump)
    : recorder(identity, capacity), group(identity.group), device(device_index), dump_path(std::move(dump)) {}

void NcclShared::check_usable_locked() const {
  if (!poison.empty()) throw CommunicatorAborted(group, poison);
}

void NcclShared::sweep_locked() {
  // Copy: polling may abort, which walks `outstanding` itself.
  const std::vector<std::shared_ptr<NcclWork>> pending = outstanding;
  for (const auto& work : pending) work->poll_locked();
  std::erase_if(outstanding, [](const std::shared_ptr<NcclWork>& work) { return work->ended(); });
}

void NcclShared::abort_locked(const std::string& reason) {
  if (!poison.empty() && comm == nullptr) return;
  // Ops the device already finished are good: their data was complete before the abort.
  for (const auto& work : outstanding) {
    if (work->ended()) continue;
    const cudaError_t status = cudaEventQuery(work->end_event().get());
    if (status == cudaSuccess) work->end_locked(OpState::kCompleted, nullptr, "");
  }
  if (comm != nullptr) {
    // Kernels waiting for a missing peer see NCCL's abort flag and exit. The return code is not
    // actionable here: the communicator is gone either way.
    ncclCommAbort(comm);
    comm = nullptr;
  }
  if (poison.empty()) poison = reason;
  for (const auto& work : outstanding) {
    if (work->ended()) continue;
    work->end_locked(OpState::kFailed, std::make_exception_ptr(CommunicatorAborted(group, poison)),
                     "not completed: " + poison);
  }
  outstanding.clear();
  if (dump_path.empty()) return;
  try {
    std::filesystem::create_directories(dump_path.parent_path());
    recorder.dump(dump_path);
  } catch (const std::exception&) {
    // The op's own error is what the caller must see; a failed dump must not replace it.
  }
}

NcclWork::NcclWork(OpInfo info, std::shared_ptr<NcclShared> shared, std::uint64_t record_id, Clock::time_point deadline)
    : Work(std::move(info)), shared_(std::move(shared)), record_id_(record_id), deadline_(deadline) {}

void NcclWork::end_locked(OpState state, std::exception_ptr error, const std::string& message) {
  if (ended()) return;
  if (!started_) {
    started_ = true;
    shared_->recorder.started(record_id_);
    Work::start();
  }
  shared_->recorder.ended(record_id_, state, message);
  finish(std::move(error));
}

void NcclWork::fail_and_abort_locked(std::exception_ptr error, OpState state, const std::string& message) {
  end_locked(state, std::move(error), message);
  shared_->abort_locked(message);
}

bool NcclWork::poll_locked() {
  if (ended()) return true;
  if (!enqueued_) return false;
  const cudaError_t done = cudaEventQuery(end_.get());
  if (done == cudaSuccess) {
    end_locked(OpState::kCompleted, nullptr, "");
    return true;
  }
  if (done != cudaErrorNotReady) {
    cudaGetLastError();
    const CollectiveError error(info(), info().describe() + " failed: CUDA: " + cuda::describe(done));
    fail_and_abort_locked(std::make_exception_ptr(error), OpState::kFailed, error.what());
    return true;
  }
  if (!started_ && cudaEventQuery(start_.get()) == cudaSuccess) {
    started_ = true;
    shared_->recorder.started(record_id_);
    Work::start();
  }
  if (shared_->comm != nullptr) {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(shared_->comm, &async) == ncclSuccess && async != ncclSuccess &&
        async != ncclInProgress) {
      const CollectiveError error(info(), info().describe() + " failed: NCCL: " + nccl_error_text(async));
      fail_and_abort_locked(std::make_exception_ptr(error), OpState::kFailed, error.what());
      return true;
    }
  }
  if (Clock::now() >= deadline_) {
    const CollectiveTimeout error(info(), std::chrono::duration<double>(info().timeout).count(),
                                  started_ ? "NCCL op started on the device but never finished; "
                                             "communicator aborted"
                                           : "the stream never reached the op (earlier work on "
                                             "the device is stuck); communicator aborted");
    fail_and_abort_locked(std::make_exception_ptr(error), OpState::kTimedOut, error.what());
    return true;
  }
  return false;
}

void NcclWork::wait(std::chrono::milliseconds timeout) {
  const Clock::time_point caller_deadline = timeout == kWaitForever ? Clock::time_point::max() : Clock::now() + timeout;
  auto pause = std::chrono::microseconds(5);
  for (;;) {
    {
      std::lock_guard lock(shared_->mu);
      if (ended()) break;  // no device call: the context may be unusable after an abort
      cuda::DeviceGuard guard(shared_->device);
      if (poll_locked()) break;
    }
    if (Clock::now() >= caller_deadline) {
      throw CollectiveTimeout(info(), std::chrono::duration<double>(timeout).count(),
                              "Work::wait deadline; the op is still running");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(500));
  }
  Work::wait(kWaitForever);  // ended: returns at once, rethrowing the op's failure
}

bool NcclWork::completed() const {
  // Polling is logically const: it only observes the device and records what it saw.
  auto* self = const_cast<NcclWork*>(this);
  std::lock_guard lock(shared_->mu);
  if (ended()) return true;
  cuda::DeviceGuard guard(shared_->device);
  return self->poll_locked();
}

bool NcclWork::succeeded() const { return completed() && Work::succeeded(); }

double NcclWork::seconds() const {
  if (!succeeded()) return Work::seconds();
  try {
    return end_.seconds_since(start_);
  } catch (const cuda::CudaError&) {
    return Work::seconds();
  }
}

}  // namespace parlab::comm::nccl_backend
