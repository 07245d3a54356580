#pragma once
// Rendezvous: how ranks find each other before the first collective.
//
//   store  --  a key-value store every rank can reach:
//                make_file_store(dir)       one machine, or a shared filesystem (Gloo FileStore)
//                TcpStoreServer + TcpStore  several hosts; rank 0 hosts it at MASTER_ADDR:PORT
//                make_in_process_store()    threads-as-ranks tests (Gloo HashStore)
//   scope  --  keys of a communicator live under "parlab/attempt.<k>/<group>/...", so a restarted
//              job (attempt k) never reads the addresses of attempt k-1's dead processes.
//   connect -- make_gloo_communicator(): every rank announces itself, waits until all `size`
//              ranks did (naming the missing ones on timeout), then Gloo connects the full mesh.
//
// Launchers: from_env() reads torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
// or Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID) conventions.
#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "runtime/comm/communicator.h"
#include "runtime/comm/flight_recorder.h"

namespace parlab::comm {

// A store failed (unreachable server, I/O error).
class StoreError : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};
// Store::wait ran out of time. Names the keys still missing.
class StoreTimeout : public StoreError {
 public:
  using StoreError::StoreError;
};

// A Gloo store that can also say, without blocking, whether keys exist (so a rendezvous that
// times out can name the ranks that never joined). wait() throws StoreTimeout; get() waits for
// the key up to kDefaultTimeout first.
class Store : public gloo::rendezvous::Store {
 public:
  virtual bool check(const std::vector<std::string>& keys) = 0;
  void wait(const std::vector<std::string>& keys) override { wait(keys, kDefaultTimeout); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override = 0;
};

// Files in `dir` (created if missing); one file per key, written atomically by Gloo.
std::shared_ptr<Store> make_file_store(const std::filesystem::path& dir);
// A map in this process, for ranks that are threads.
std::shared_ptr<Store> make_in_process_store();
// Every key of `store` seen through the returned store is "<prefix>/<key>".
// Every rank of a group announces itself ("joined/<rank>"), then waits for all; on timeout the
// RendezvousError names the ranks that never came. A key that already exists means a process of
// this attempt joined as this rank before (a restart that reused the attempt): refused, since
// its stale addresses would be read. Shared by the Gloo and NCCL backends; `store` is scoped to
// the group and attempt by the caller.
void join_rendezvous(Store& store, int rank, int size, std::chrono::milliseconds timeout, const std::string& what);

std::shared_ptr<Store> make_prefixed_store(std::shared_ptr<Store> store, std::string prefix);

// Launcher variables of this process.
struct RendezvousEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr;  // empty when not given (a file store needs none)
  int master_port = 0;      // 0 when not given
  std::string launcher;     // "torchrun" or "slurm"
  // Under srun without MASTER_ADDR / MASTER_PORT: what they were derived from ("MASTER_ADDR from
  // SLURM_STEP_NODELIST, MASTER_PORT from SLURM_JOB_ID"); empty when they were given.
  std::string master_derived;
  // PARLAB_STORE_TOKEN: a per-job secret every TCP store request must carry (give every rank the
  // same one, e.g. `export PARLAB_STORE_TOKEN=$(openssl rand -hex 16)` before torchrun). When it is
  // unset, resolve_store_token (store_token.h) reads it from PARLAB_STORE_TOKEN_FILE or the run
  // directory; make_tcp_rendezvous refuses to start without one.
  std::string store_token;
  std::string store_token_file;    // PARLAB_STORE_TOKEN_FILE, empty when unset
  std::string store_token_source;  // where store_token came from, for messages
};

// torchrun variables win over Slurm's. Under Slurm, MASTER_ADDR defaults to the first host of
// SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST, SLURM_NODELIST) and MASTER_PORT to 15000 + the
// last four digits of SLURM_JOB_ID, as PyTorch Lightning derives them. Throws ConfigError naming the missing or
// malformed variable (e.g. "RANK = abc: must be an integer in [0, WORLD_SIZE)").
RendezvousEnv from_env();
// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01".
std::string first_slurm_host(const std::string& list);
// Same, reading variables through `lookup` (tests, or a launcher's prepared environment).
RendezvousEnv from_env(const std::function<std::optional<std::string>(const std::string&)>& lookup);

struct GlooOptions {
  // Address the Gloo TCP pairs of this rank listen on; loopback by default. Set a routable
  // hostname/IP for several hosts, or `interface` ("eth0"), which then wins.
  std::string hostname = "127.0.0.1";
  std::string interface;
  // Rendezvous, connect and split timeout; also the Gloo context default.
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Generation of the job: keys live under "parlab/attempt.<attempt>/".
  int attempt = 0;
  std::string group_name = "world";
  std::size_t flight_recorder_capacity = kDefaultFlightRecorderCapacity;
  // When set, a failed or timed-out op dumps the flight recorder to
  // "<dump_dir>/flight_recorder.<group>.rank<world rank>.json" (what `parlab analyze hang` reads).
  std::filesystem::path dump_dir;
  // Set by make_communicator (comm/backend_choice.h) for --comm auto on a world that spans hosts:
  // the host of every world rank. A split whose members all share one host then gets a
  // shared-memory communicator instead of a Gloo one. Empty: every split is Gloo.
  std::vector<std::string> hosts;
};

// Connects rank `rank` of `size` through `store`; collective over all `size` ranks. Throws
// RendezvousError (naming the ranks that never joined on timeout) or ConfigError.
std::unique_ptr<Communicator> make_gloo_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                     const GlooOptions& options = {});

// File name of a rank's flight-recorder dump inside GlooOptions::dump_dir.
std::string flight_recorder_file_name(const std::string& group, int world_rank);

}  // namespace parlab::comm
