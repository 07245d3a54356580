#pragma once
// Internal to the NCCL backend: the state a communicator shares with the Work handles it issued,
// and the Work itself (an op between two CUDA events on the communicator's stream).
#include <nccl.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/flight_recorder.h"
#include "runtime/gpu/memory.h"

namespace parlab::comm::nccl_backend {

using Clock = std::chrono::steady_clock;
class NcclWork;

// Everything below is guarded by `mu`, and every NCCL call on `comm` is made under it (NCCL
// communicators are not thread-safe).
struct NcclShared {
  NcclShared(RecorderIdentity identity, std::size_t capacity, int device, std::filesystem::path dump_path);

  std::mutex mu;
  ncclComm_t comm = nullptr;  // null once aborted or destroyed
  std::string poison;         // why the communicator is unusable; empty while usable
  FlightRecorder recorder;
  const std::string group;
  const int device;
  const std::filesystem::path dump_path;  // empty: no dump after a failure
  // Issued, not yet seen complete. Held strongly: an op whose Work the caller dropped still gets
  // its recorder entry finished and its deadline enforced. Drained by the communicator's
  // shutdown (which breaks the Work -> NcclShared -> Work cycle).
  std::vector<std::shared_ptr<NcclWork>> outstanding;

  // Throws CommunicatorAborted when poisoned.
  void check_usable_locked() const;
  // Polls every outstanding op (completing, timing out or failing it), drops finished ones.
  void sweep_locked();
  // Ops whose end event already fired complete normally; then ncclCommAbort, poison = reason,
  // every other outstanding op fails with CommunicatorAborted(reason), and the recorder is
  // dumped. Idempotent.
  void abort_locked(const std::string& reason);
};

class NcclWork final : public Work {
 public:
  NcclWork(OpInfo info, std::shared_ptr<NcclShared> shared, std::uint64_t record_id, Clock::time_point deadline);

  void wait(std::chrono::milliseconds timeout = kWaitForever) override;
  bool completed() const override;
  bool succeeded() const override;
  // Device time from the op's start event to its end event once it succeeded.
  double seconds() const override;

  // Issuer side, under shared->mu.
  compute::cuda::Event& start_event() { return start_; }
  compute::cuda::Event& end_event() { return end_; }
  void mark_enqueued() { enqueued_ = true; }
  // Ends the op: recorder entry, then the Work (so a waiter that wakes up sees the final entry).
  void end_locked(OpState state, std::exception_ptr error, const std::string& message);
  // Observes the device: completion, start, asynchronous NCCL errors, the deadline. Returns true
  // once the op has ended (successfully or not).
  bool poll_locked();
  bool ended() const { return Work::completed(); }

 private:
  void fail_and_abort_locked(std::exception_ptr error, OpState state, const std::string& message);

  std::shared_ptr<NcclShared> shared_;
  const std::uint64_t record_id_;
  const Clock::time_point deadline_;
  compute::cuda::Event start_, end_;
  bool enqueued_ = false;
  bool started_ = false;
};

}  // namespace parlab::comm::nccl_backend
