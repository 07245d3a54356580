// Rendezvous of the NCCL backend: ranks announce themselves in the comm::Store (so a rank that
// never comes is named), rank 0 publishes the ncclUniqueId, and every rank inits a nonblocking
// NCCL communicator with a deadline.
#include <cstring>

#include "runtime/comm/nccl/nccl_check.h"
#include "runtime/comm/nccl/nccl_impl.h"
#include "runtime/gpu/device.h"
#include "base/units.h"

namespace parlab::comm {
namespace nccl_backend {

namespace {

using Millis = std::chrono::milliseconds;

double to_seconds(Millis t) { return std::chrono::duration<double>(t).count(); }

const char kUniqueIdKey[] = "unique_id";

ncclUniqueId exchange_unique_id(Store& store, int rank, Millis timeout, const std::string& what) {
  ncclUniqueId id{};
  if (rank == 0) {
    PARLAB_NCCL_CHECK(ncclGetUniqueId(&id));
    store.set(kUniqueIdKey, std::vector<char>(id.internal, id.internal + sizeof id.internal));
    return id;
  }
  std::vector<char> bytes;
  try {
    store.wait({kUniqueIdKey}, timeout);
    bytes = store.get(kUniqueIdKey);
  } catch (const StoreError& e) {
    throw RendezvousError(what + ": rank 0 never published the NCCL unique id (" + e.what() + ")", true);
  }
  if (bytes.size() != sizeof id.internal) {
    throw RendezvousError(what + ": the NCCL unique id in the store has " + std::to_string(bytes.size()) +
                              " bytes, expected " + std::to_string(sizeof id.internal),
                          false);
  }
  std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  return id;
}

}  // namespace

std::string group_scope(const NcclOptions& o, const std::string& group) {
  return "parlab/attempt." + std::to_string(o.attempt) + "/" + group + "/nccl";
}

ncclComm_t connect(const NcclWorld& world, Store& store, int rank, int size, const std::string& what) {
  const Millis timeout = world.options.timeout;
  join_rendezvous(store, rank, size, timeout, what);
  const ncclUniqueId id = exchange_unique_id(store, rank, timeout, what);
  compute::cuda::DeviceGuard guard(world.device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // init and connection setup return at once; settle() bounds them
  ncclComm_t comm = nullptr;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  try {
    PARLAB_NCCL_CHECK_ASYNC(ncclCommInitRankConfig(&comm, size, id, rank, &config));
    if (!settle(comm, deadline, "ncclCommInitRankConfig")) {
      throw RendezvousError(what + ": NCCL init did not complete within " + units::format_seconds(to_seconds(timeout)) +
                                " (a peer died after joining, or cannot be reached)",
                            true);
    }
  } catch (const RendezvousError&) {
    if (comm != nullptr) ncclCommAbort(comm);
    throw;
  } catch (const NcclError& e) {
    if (comm != nullptr) ncclCommAbort(comm);
    throw RendezvousError(what + ": " + e.what(), false);
  }
  return comm;
}

}  // namespace nccl_backend

std::unique_ptr<NcclCommunicator> make_nccl_communicator(std::shared_ptr<Store> store, int rank, int size, int device,
                                                         const NcclOptions& options) {
  if (!store) throw ConfigError("store", "null", "a rendezvous store is required");
  if (size < 1) throw ConfigError("world_size", std::to_string(size), "must be at least 1");
  if (rank < 0 || rank >= size) {
    throw ConfigError("rank", std::to_string(rank), "must be in [0, " + std::to_string(size) + ")");
  }
  if (options.timeout.count() <= 0) {
    throw ConfigError("nccl.timeout", std::to_string(options.timeout.count()) + " ms", "must be positive");
  }
  if (options.attempt < 0) {
    throw ConfigError("attempt", std::to_string(options.attempt), "must be >= 0");
  }
  if (options.group_name.empty()) throw ConfigError("group_name", "\"\"", "must not be empty");
  const compute::cuda::DeviceList devices = compute::cuda::cuda_devices();
  const int n_devices = static_cast<int>(devices.devices.size());
  if (device < 0 || device >= n_devices) {
    throw ConfigError("device", std::to_string(device),
                      n_devices == 0 ? "the NCCL backend needs a CUDA device and there is none (" + devices.reason + ")"
                                     : "must be a CUDA device ordinal in [0, " + std::to_string(n_devices) + ")");
  }

  auto world = std::make_shared<nccl_backend::NcclWorld>();
  world->store = store;
  world->options = options;
  world->world_rank = rank;
  world->world_size = size;
  world->device = device;
  auto scoped = make_prefixed_store(store, nccl_backend::group_scope(options, options.group_name));
  ncclComm_t comm = nccl_backend::connect(
      *world, *scoped, rank, size,
      "rendezvous of NCCL group " + options.group_name + " (attempt " + std::to_string(options.attempt) + ")");
  std::vector<int> members(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) members[static_cast<std::size_t>(r)] = r;
  return nccl_backend::wrap_communicator(std::move(world), comm, options.group_name, std::move(members), rank, size,
                                         options.compute_stream);
}

}  // namespace parlab::comm
