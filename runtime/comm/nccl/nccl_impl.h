#pragma once
// Internal to the NCCL backend: what a communicator holds, and the rendezvous that makes the
// NCCL handle (shared by make_nccl_communicator and split).
#include <nccl.h>

#include <functional>
#include <map>

#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/comm/nccl/nccl_work.h"

namespace parlab::comm {

namespace nccl_backend {

// What every communicator split off one world shares.
struct NcclWorld {
  std::shared_ptr<Store> store;  // unscoped; each group scopes its own keys
  NcclOptions options;
  int world_rank = 0;
  int world_size = 1;
  int device = 0;
};

// Keys of group `group` of attempt k live under "parlab/attempt.<k>/<group>/nccl": next to the
// Gloo backend's keys of the same group, never colliding with them.
std::string group_scope(const NcclOptions& options, const std::string& group);

// Every rank announces itself in `store`, rank 0 publishes a fresh ncclUniqueId, and all ranks
// init a NONBLOCKING NCCL communicator on world.device, waiting at most options.timeout for the
// others. Throws RendezvousError (naming ranks that never joined) or NcclError.
ncclComm_t connect(const NcclWorld& world, Store& store, int rank, int size, const std::string& what);

// The communicator over a connected `comm`; aborts `comm` if anything on the way throws.
std::unique_ptr<NcclCommunicator> wrap_communicator(std::shared_ptr<NcclWorld> world, ncclComm_t comm,
                                                    std::string group, std::vector<int> members, int rank, int size,
                                                    cudaStream_t compute_stream);
}  // namespace nccl_backend

struct NcclCommunicator::Impl {
  using Launch = std::function<void(ncclComm_t, cudaStream_t)>;

  // Owns `comm` once constructed (if construction throws, the caller still owns it: see
  // wrap_communicator). Call with world->device current.
  Impl(std::shared_ptr<nccl_backend::NcclWorld> world, ncclComm_t comm, std::string group, std::vector<int> members,
       int rank, int size, cudaStream_t compute_stream);

  // Under shared->mu with the device current: orders the communicator's stream after the
  // compute stream, enqueues `launch` in one NCCL group between per-op events, and returns one
  // Work per info. A failure to enqueue fails those Works and aborts the communicator.
  std::vector<std::shared_ptr<Work>> issue_locked(const std::vector<OpInfo>& infos, const Launch& launch);
  std::shared_ptr<Work> collective(OpKind op, double bytes, const CollectiveOptions& o, const Launch& launch);
  std::shared_ptr<Work> point_to_point(OpKind op, int peer, double bytes, const CollectiveOptions& o,
                                       const Launch& launch);
  // Waits for pending ops (bounded by their deadlines), then finalizes or aborts NCCL.
  void shutdown() noexcept;

  std::shared_ptr<nccl_backend::NcclWorld> world;
  const std::string group;
  const std::vector<int> members;
  const int rank, size, device;
  cudaStream_t compute_stream;
  compute::cuda::Stream stream;
  compute::cuda::Event ready;                      // recorded on the compute stream before each op
  compute::cuda::DeviceBuffer<float> barrier_buf;  // the one float a barrier all-reduces
  std::shared_ptr<nccl_backend::NcclShared> shared;
  // Guarded by shared->mu.
  std::uint64_t next_seq = 0;
  std::map<int, std::uint64_t> sent, received;
  std::map<std::string, int> splits;
};

}  // namespace parlab::comm
