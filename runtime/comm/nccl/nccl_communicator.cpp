// NcclCommunicator: issuing ops (Impl::issue_locked), the Communicator overrides, split and
// shutdown. Work completion, timeouts and aborts live in nccl_work.cpp; rendezvous in
// nccl_rendezvous.cpp.
#include <algorithm>
#include <optional>
#include <thread>

#include "runtime/comm/nccl/nccl_check.h"
#include "runtime/comm/nccl/nccl_impl.h"
#include "runtime/gpu/device.h"

namespace parlab::comm {

namespace cuda = compute::cuda;
using nccl_backend::Clock;
using nccl_backend::NcclShared;
using nccl_backend::NcclWork;

namespace {

double bytes_of(std::size_t elements) { return static_cast<double>(elements) * sizeof(float); }

double seconds_of(std::chrono::milliseconds t) { return std::chrono::duration<double>(t).count(); }

void check_timeout(OpKind op, const CollectiveOptions& o) {
  if (o.timeout.count() <= 0) {
    throw ConfigError(std::string(to_string(op)) + ".timeout", std::to_string(o.timeout.count()) + " ms",
                      "must be positive");
  }
}

std::filesystem::path dump_path(const NcclOptions& o, const std::string& group, int world_rank) {
  if (o.dump_dir.empty()) return {};
  return o.dump_dir / flight_recorder_file_name(group, world_rank);
}

}  // namespace

// ---- Impl ----

NcclCommunicator::Impl::Impl(std::shared_ptr<nccl_backend::NcclWorld> w, ncclComm_t comm, std::string group_name,
                             std::vector<int> member_ranks, int group_rank, int group_size, cudaStream_t compute)
    : world(std::move(w)),
      group(std::move(group_name)),
      members(std::move(member_ranks)),
      rank(group_rank),
      size(group_size),
      device(world->device),
      compute_stream(compute),
      barrier_buf(1),
      shared(std::make_shared<NcclShared>(
          RecorderIdentity{"nccl", group, world->world_rank, world->world_size, rank, size},
          world->options.flight_recorder_capacity, world->device,
          dump_path(world->options, group, world->world_rank))) {
  shared->comm = comm;
}

std::vector<std::shared_ptr<Work>> NcclCommunicator::Impl::issue_locked(const std::vector<OpInfo>& infos,
                                                                        const Launch& launch) {
  const std::chrono::milliseconds timeout = infos.front().timeout;
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<std::shared_ptr<NcclWork>> works;
  for (const OpInfo& info : infos) {
    works.push_back(std::make_shared<NcclWork>(info, shared, shared->recorder.record(info), deadline));
  }
  try {
    // The buffers are produced on the compute stream: start only after what is queued there.
    ready.record(compute_stream);
    PARLAB_CUDA_CHECK(cudaStreamWaitEvent(stream.get(), ready.get(), 0));
    for (auto& work : works) work->start_event().record(stream.get());
    PARLAB_NCCL_CHECK(ncclGroupStart());
    try {
      launch(shared->comm, stream.get());
    } catch (...) {
      ncclGroupEnd();  // close the group; the launch error is the one to report
      throw;
    }
    PARLAB_NCCL_CHECK_ASYNC(ncclGroupEnd());
    // Nonblocking communicator: the group may still be connecting to peers.
    if (!settle(shared->comm, deadline, "ncclGroupEnd")) {
      throw CollectiveTimeout(infos.front(), seconds_of(timeout),
                              "NCCL did not finish enqueueing it (connection setup with the "
                              "peers); communicator aborted");
    }
    for (auto& work : works) {
      work->end_event().record(stream.get());
      work->mark_enqueued();
      shared->outstanding.push_back(work);
    }
  } catch (const std::exception& e) {
    const bool timed_out = dynamic_cast<const CollectiveTimeout*>(&e) != nullptr;
    for (auto& work : works) {
      if (work->ended()) continue;
      std::exception_ptr error =
          timed_out
              ? std::make_exception_ptr(CollectiveTimeout(work->info(), seconds_of(timeout), "not enqueued in time"))
              : std::make_exception_ptr(
                    CollectiveError(work->info(), work->info().describe() + " failed: " + e.what()));
      work->end_locked(timed_out ? OpState::kTimedOut : OpState::kFailed, error, e.what());
    }
    shared->abort_locked(e.what());
  }
  return {works.begin(), works.end()};
}

std::shared_ptr<Work> NcclCommunicator::Impl::collective(OpKind op, double bytes, const CollectiveOptions& o,
                                                         const Launch& launch) {
  check_timeout(op, o);
  std::lock_guard lock(shared->mu);
  shared->check_usable_locked();  // before any device call: after an abort it may be unusable
  cuda::DeviceGuard guard(device);
  shared->sweep_locked();
  shared->check_usable_locked();  // the sweep may have timed out an earlier op
  const OpInfo info{op, next_seq, group, bytes, o.tag, -1, o.timeout};
  auto works = issue_locked({info}, launch);
  ++next_seq;  // only ops that were issued consume a number (as Gloo)
  return works.front();
}

std::shared_ptr<Work> NcclCommunicator::Impl::point_to_point(OpKind op, int peer, double bytes,
                                                             const CollectiveOptions& o, const Launch& launch) {
  check_timeout(op, o);
  std::lock_guard lock(shared->mu);
  shared->check_usable_locked();  // before any device call: after an abort it may be unusable
  cuda::DeviceGuard guard(device);
  shared->sweep_locked();
  shared->check_usable_locked();  // the sweep may have timed out an earlier op
  std::uint64_t& seq = op == OpKind::kSend ? sent[peer] : received[peer];
  const OpInfo info{op, seq, group, bytes, o.tag, peer, o.timeout};
  auto works = issue_locked({info}, launch);
  ++seq;
  return works.front();
}

void NcclCommunicator::Impl::shutdown() noexcept {
  std::unique_lock lock(shared->mu);
  try {
    cuda::DeviceGuard guard(device);
    // Pending ops end by themselves or at their deadlines (sweep enforces them).
    for (;;) {
      shared->sweep_locked();
      if (shared->outstanding.empty()) break;
      lock.unlock();
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      lock.lock();
    }
    if (shared->comm == nullptr) return;
    bool clean = false;
    try {
      PARLAB_NCCL_CHECK_ASYNC(ncclCommFinalize(shared->comm));
      clean = settle(shared->comm, Clock::now() + world->options.timeout, "ncclCommFinalize");
    } catch (const NcclError&) {
      clean = false;
    }
    if (clean) {
      ncclCommDestroy(shared->comm);
    } else {
      ncclCommAbort(shared->comm);
    }
  } catch (const std::exception&) {
    if (shared->comm != nullptr) ncclCommAbort(shared->comm);
  }
  shared->comm = nullptr;
  if (shared->poison.empty()) shared->poison = "the communicator was destroyed";
}

namespace nccl_backend {

std::unique_ptr<NcclCommunicator> wrap_communicator(std::shared_ptr<NcclWorld> world, ncclComm_t comm,
                                                    std::string group, std::vector<int> members, int rank, int size,
                                                    cudaStream_t compute_stream) {
  try {
    cuda::DeviceGuard guard(world->device);
    return std::make_unique<NcclCommunicator>(std::make_unique<NcclCommunicator::Impl>(
        std::move(world), comm, std::move(group), std::move(members), rank, size, compute_stream));
  } catch (...) {
    ncclCommAbort(comm);
    throw;
  }
}

}  // namespace nccl_backend

// ---- NcclCommunicator ----

NcclCommunicator::NcclCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  impl_->shutdown();
  try {
    cuda::DeviceGuard guard(impl_->device);
    impl_.reset();  // stream, events and the barrier buffer belong to that device
  } catch (const std::exception&) {
    impl_.reset();
  }
}

int NcclCommunicator::rank() const { return impl_->rank; }
int NcclCommunicator::size() const { return impl_->size; }
const std::string& NcclCommunicator::group_name() const { return impl_->group; }
const std::vector<int>& NcclCommunicator::world_ranks() const { return impl_->members; }
const FlightRecorder& NcclCommunicator::flight_recorder() const { return impl_->shared->recorder; }
int NcclCommunicator::device() const { return impl_->device; }
cudaStream_t NcclCommunicator::stream() const { return impl_->stream.get(); }

void NcclCommunicator::set_compute_stream(cudaStream_t stream) {
  std::lock_guard lock(impl_->shared->mu);
  impl_->compute_stream = stream;
}

void NcclCommunicator::abort(const std::string& reason) {
  std::lock_guard lock(impl_->shared->mu);
  std::optional<cuda::DeviceGuard> guard;
  try {
    guard.emplace(impl_->device);
  } catch (const cuda::CudaError&) {
    // A broken context (sticky fault) must not stop the abort: NCCL selects its device itself.
  }
  impl_->shared->abort_locked(reason.empty() ? "aborted by the caller" : reason);
}

std::shared_ptr<Work> NcclCommunicator::run_all_reduce(std::span<float> buf, const CollectiveOptions& o) {
  return impl_->collective(OpKind::kAllReduce, bytes_of(buf.size()), o, [buf](ncclComm_t comm, cudaStream_t s) {
    PARLAB_NCCL_CHECK_ASYNC(ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, s));
  });
}

std::shared_ptr<Work> NcclCommunicator::run_reduce_scatter(std::span<const float> in, std::span<float> out,
                                                           const CollectiveOptions& o) {
  return impl_->collective(OpKind::kReduceScatter, bytes_of(in.size()), o, [in, out](ncclComm_t comm, cudaStream_t s) {
    PARLAB_NCCL_CHECK_ASYNC(ncclReduceScatter(in.data(), out.data(), out.size(), ncclFloat32, ncclSum, comm, s));
  });
}

std::shared_ptr<Work> NcclCommunicator::run_all_gather(std::span<const float> in, std::span<float> out,
                                                       const CollectiveOptions& o) {
  return impl_->collective(OpKind::kAllGather, bytes_of(out.size()), o, [in, out](ncclComm_t comm, cudaStream_t s) {
    PARLAB_NCCL_CHECK_ASYNC(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat32, comm, s));
  });
}

std::shared_ptr<Work> NcclCommunicator::run_broadcast(std::span<float> buf, int root, const CollectiveOptions& o) {
  return impl_->collective(OpKind::kBroadcast, bytes_of(buf.size()), o, [buf, root](ncclComm_t comm, cudaStream_t s) {
    PARLAB_NCCL_CHECK_ASYNC(ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclFloat32, root, comm, s));
  });
}

std::shared_ptr<Work> NcclCommunicator::run_send(std::span<const float> buf, int peer, const CollectiveOptions& o) {
  return impl_->point_to_point(OpKind::kSend, peer, bytes_of(buf.size()), o,
                               [buf, peer](ncclComm_t comm, cudaStream_t s) {
                                 PARLAB_NCCL_CHECK_ASYNC(ncclSend(buf.data(), buf.size(), ncclFloat32, peer, comm, s));
                               });
}

std::shared_ptr<Work> NcclCommunicator::run_recv(std::span<float> buf, int peer, const CollectiveOptions& o) {
  return impl_->point_to_point(OpKind::kRecv, peer, bytes_of(buf.size()), o,
                               [buf, peer](ncclComm_t comm, cudaStream_t s) {
                                 PARLAB_NCCL_CHECK_ASYNC(ncclRecv(buf.data(), buf.size(), ncclFloat32, peer, comm, s));
                               });
}

std::shared_ptr<Work> NcclCommunicator::run_barrier(const CollectiveOptions& o) {
  // NCCL has no barrier: all-reduce one float (as c10d); completing it means every rank got here.
  float* one = impl_->barrier_buf.data();
  return impl_->collective(OpKind::kBarrier, 0.0, o, [one](ncclComm_t comm, cudaStream_t s) {
    PARLAB_NCCL_CHECK_ASYNC(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, comm, s));
  });
}

std::vector<std::shared_ptr<Work>> NcclCommunicator::batch_send_recv(std::span<const P2POp> ops,
                                                                     const CollectiveOptions& o) {
  if (ops.empty()) return {};
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const P2POp& p = ops[i];
    const std::string field = "batch_send_recv[" + std::to_string(i) + "]";
    if (p.op != OpKind::kSend && p.op != OpKind::kRecv) {
      throw ConfigError(field + ".op", std::string(to_string(p.op)), "must be send or recv");
    }
    if (p.peer < 0 || p.peer >= size() || p.peer == rank()) {
      throw ConfigError(field + ".peer", std::to_string(p.peer),
                        "must be a group rank in [0, " + std::to_string(size()) + ") other than this rank (" +
                            std::to_string(rank()) + ") of group " + group_name());
    }
  }
  check_timeout(OpKind::kSend, o);
  Impl& impl = *impl_;
  std::lock_guard lock(impl.shared->mu);
  impl.shared->check_usable_locked();
  cuda::DeviceGuard guard(impl.device);
  impl.shared->sweep_locked();
  impl.shared->check_usable_locked();
  // Sequence numbers are taken now and kept even if the group fails: the peers took theirs.
  std::vector<OpInfo> infos;
  for (const P2POp& p : ops) {
    std::uint64_t& seq = p.op == OpKind::kSend ? impl.sent[p.peer] : impl.received[p.peer];
    infos.push_back(OpInfo{p.op, seq++, impl.group, bytes_of(p.buf.size()), o.tag, p.peer, o.timeout});
  }
  const std::vector<P2POp> batch(ops.begin(), ops.end());
  return impl.issue_locked(infos, [&batch](ncclComm_t comm, cudaStream_t s) {
    for (const P2POp& p : batch) {
      if (p.op == OpKind::kSend) {
        PARLAB_NCCL_CHECK_ASYNC(ncclSend(p.buf.data(), p.buf.size(), ncclFloat32, p.peer, comm, s));
      } else {
        PARLAB_NCCL_CHECK_ASYNC(ncclRecv(p.buf.data(), p.buf.size(), ncclFloat32, p.peer, comm, s));
      }
    }
  });
}

std::unique_ptr<Communicator> NcclCommunicator::run_split(const std::vector<int>& ranks, std::string name) {
  // Members of the new group agree on this key without talking: it depends only on the
  // arguments and on how often this exact (name, ranks) split happened before.
  std::string key = "split/" + name + "/";
  for (int r : ranks) key += std::to_string(r) + ".";
  cudaStream_t compute = nullptr;
  {
    std::lock_guard lock(impl_->shared->mu);
    impl_->shared->check_usable_locked();
    key += std::to_string(impl_->splits[key]++);
    compute = impl_->compute_stream;
  }
  const auto& world = impl_->world;
  const int me = world->world_rank;
  const int sub_rank = static_cast<int>(std::lower_bound(ranks.begin(), ranks.end(), me) - ranks.begin());
  const int sub_size = static_cast<int>(ranks.size());
  auto store = make_prefixed_store(world->store, nccl_backend::group_scope(world->options, impl_->group) + "/" + key);
  ncclComm_t comm =
      nccl_backend::connect(*world, *store, sub_rank, sub_size, "split of group " + name + " from " + impl_->group);
  return nccl_backend::wrap_communicator(world, comm, std::move(name), ranks, sub_rank, sub_size, compute);
}

}  // namespace parlab::comm
