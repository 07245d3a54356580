#pragma once
// The NCCL backend of parlab::comm::Communicator (GPUs; the Gloo backend is its CPU twin).
//
// ************************************************************************************************
// *  EVERY std::span<float> PASSED TO THIS COMMUNICATOR HOLDS **DEVICE** POINTERS: memory on this *
// *  communicator's GPU (cudaMalloc, compute::cuda::DeviceBuffer::span(), DeviceMlp::grads()).   *
// *  The spans of the Communicator interface are only (pointer, count) here; a host pointer is   *
// *  not detected (checking costs a driver call per op) and makes NCCL fail or fault.            *
// ************************************************************************************************
//
// Execution model (differs from Gloo's communication thread, same observable contract):
//   issue   -- on the caller's thread: the communicator's stream first waits for everything
//              already queued on the compute stream (NcclOptions::compute_stream, or
//              set_compute_stream), so gradients are complete before they are reduced; then the
//              op is enqueued on the communicator's own stream between two CUDA events, and a Work
//              is returned at once. Sends and receives are wrapped in ncclGroupStart/End too;
//              batch_send_recv puts several in ONE group (a neighbour exchange cannot deadlock).
//   wait    -- Work::wait(timeout) polls the op's end event (no host thread is parked in the
//              driver). Once the data is on the device the op is complete: kernels queued after
//              wait() returns see it.
//   timeout -- an op that has not completed CollectiveOptions::timeout after it was issued fails
//              with CollectiveTimeout (op, sequence number, group, bytes, tag: the same typed
//              error as Gloo); the NCCL communicator is aborted (ncclCommAbort: kernels blocked
//              on a missing peer exit), every other pending op fails with CommunicatorAborted,
//              and so does every later op. The deadline is checked whenever someone waits on,
//              polls (completed()) or issues an op on the communicator -- there is no watchdog
//              thread, so a job that never looks at its ops never times out.
//   errors  -- every NCCL return code is checked (NcclError text), asynchronous NCCL errors
//              (ncclCommGetAsyncError, e.g. a peer's network died) fail the pending op at once.
//   recorder-- a FlightRecorder like Gloo's: scheduled at issue, started when the op's start
//              event fired (the stream reached it), completed / failed / timed_out; dumped to
//              NcclOptions::dump_dir after a failure.
//
// Rendezvous: rank 0 creates the ncclUniqueId and shares it through the comm::Store under
// "parlab/attempt.<k>/<group>/nccl/unique_id", after every rank announced itself (a rank that
// never joins is named in the RendezvousError). World size 1 goes down the same path.
// One GPU per rank: NCCL refuses two ranks of one communicator on the same device.
#include <cuda_runtime_api.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/flight_recorder.h"
#include "runtime/comm/rendezvous.h"

namespace parlab::comm {

struct NcclOptions {
  // Rendezvous, NCCL init (connection setup) and finalize timeout.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Generation of the job: keys live under "parlab/attempt.<attempt>/".
  int attempt = 0;
  std::string group_name = "world";
  std::size_t flight_recorder_capacity = kDefaultFlightRecorderCapacity;
  // When set, a failed or timed-out op dumps the flight recorder to
  // "<dump_dir>/flight_recorder.<group>.rank<world rank>.json" (as Gloo).
  std::filesystem::path dump_dir;
  // Stream whose queued work every op waits for on the device (the producer of the buffers,
  // e.g. DeviceMlp::stream()); it must belong to the communicator's device. nullptr: the legacy
  // default stream. Sub-groups made by split() inherit it.
  cudaStream_t compute_stream = nullptr;
};

// One send or receive of a batch_send_recv group. `buf` is DEVICE memory.
struct P2POp {
  OpKind op = OpKind::kSend;  // kSend or kRecv
  std::span<float> buf;
  int peer = -1;  // group rank
};

class NcclCommunicator final : public Communicator {
 public:
  struct Impl;  // NCCL handle, stream, counters; defined in the .cpp files
  explicit NcclCommunicator(std::unique_ptr<Impl> impl);
  // Lets pending ops finish (up to their deadlines), then ncclCommFinalize + ncclCommDestroy;
  // aborts instead when an op failed or finalize does not complete within NcclOptions::timeout.
  ~NcclCommunicator() override;

  std::string_view backend_name() const override { return "nccl"; }
  int rank() const override;
  int size() const override;
  const std::string& group_name() const override;
  const std::vector<int>& world_ranks() const override;
  const FlightRecorder& flight_recorder() const override;

  int device() const;
  // The stream the collectives run on (owned by the communicator).
  cudaStream_t stream() const;
  // Later ops wait for work queued on `stream` (e.g. DeviceMlp::stream()) before they start.
  void set_compute_stream(cudaStream_t stream);

  // Sends and receives in ONE ncclGroupStart/End: one Work per op (each with its own flight
  // recorder entry and per-peer sequence number), all completing together.
  std::vector<std::shared_ptr<Work>> batch_send_recv(std::span<const P2POp> ops, const CollectiveOptions& opts = {});

  // Aborts the NCCL communicator (ops blocked on peers exit), fails pending ops with
  // CommunicatorAborted(reason) and makes every later op fail the same way. Idempotent. For a
  // supervisor or a peer that knows the job is over.
  void abort(const std::string& reason);

 protected:
  std::shared_ptr<Work> run_all_reduce(std::span<float> buf, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_reduce_scatter(std::span<const float> input, std::span<float> output,
                                           const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_all_gather(std::span<const float> input, std::span<float> output,
                                       const CollectiveOptions& o) override;
  // Uneven chunks (ZeRO's shards), nccl_collectives_v.cpp: one ncclReduce (resp. ncclBroadcast)
  // per non-empty chunk, rooted at the chunk's rank, all in ONE group.
  std::shared_ptr<Work> run_reduce_scatter_v(std::span<const float> input, std::span<const int64_t> counts,
                                             std::span<float> output, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_all_gather_v(std::span<const float> input, std::span<float> output,
                                         std::span<const int64_t> counts, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_broadcast(std::span<float> buf, int root, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_send(std::span<const float> buf, int peer, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_recv(std::span<float> buf, int peer, const CollectiveOptions& o) override;
  std::shared_ptr<Work> run_barrier(const CollectiveOptions& o) override;
  // A new NCCL communicator over `world_ranks`, its ncclUniqueId shared through the store under a
  // key derived from (name, ranks, how often this split happened): members call it, others don't.
  std::unique_ptr<Communicator> run_split(const std::vector<int>& world_ranks, std::string name) override;

 private:
  std::unique_ptr<Impl> impl_;
};

// Connects rank `rank` of `size` on CUDA device `device` through `store`; collective over all
// `size` ranks. Throws ConfigError (bad rank/size/options, or `device` not a device of this
// machine -- the message then says why there is none, e.g. no driver), RendezvousError (a rank
// never joined, or NCCL init did not finish within options.timeout) or NcclError.
std::unique_ptr<NcclCommunicator> make_nccl_communicator(std::shared_ptr<Store> store, int rank, int size, int device,
                                                         const NcclOptions& options = {});

}  // namespace parlab::comm
