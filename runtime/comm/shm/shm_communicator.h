#pragma once
// The shared-memory backend: a Communicator for ranks of one host, whose collectives copy
// through one /dev/shm segment per group at memory speed instead of through loopback TCP
// (shm_group.h has the algorithms, shm_segment.h the segment and its lifetime).
//
// Behaves as the Gloo backend does where a caller can tell: ops queue on one thread per
// communicator (OpQueue), every op has a flight-recorder entry, a timed-out op raises
// CollectiveTimeout and poisons the communicator, a peer that left (or was killed) raises
// CollectiveError, ranks that disagree on collective #k time out instead of combining data,
// and a failure dumps the recorder into `dump_dir` for `parlab analyze hang`.
//
// Rendezvous through the job's store, scoped as Gloo's ("parlab/attempt.<k>/<group>"): every
// rank joins, rank 0 creates the segment and publishes its name, the others map it, and rank 0
// unlinks the name once all did.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"

namespace parlab::comm {

struct ShmOptions {
  // Rendezvous and split timeout (each op has its own CollectiveOptions::timeout).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  int attempt = 0;
  std::string group_name = "world";
  std::size_t flight_recorder_capacity = kDefaultFlightRecorderCapacity;
  std::filesystem::path dump_dir;  // as GlooOptions::dump_dir
  // Bytes each rank publishes per round (two such slots per rank). Big enough that a round's
  // barrier is amortised, small enough that a round's data stays in cache between the copy in
  // and the reads of the peers. 512 KiB measured best on 2 ranks (4-64 MB all-reduce, against
  // 256 KiB-4 MiB; `parlab bench collective` shows the effect).
  std::size_t slot_bytes = std::size_t{512} << 10;
  // Bytes per slice of a point-to-point message (two slices in flight per direction).
  std::size_t channel_bytes = std::size_t{1} << 20;
};

// The Gloo options' shared fields (timeout, attempt, group, recorder, dump dir).
ShmOptions shm_options_from(const GlooOptions& gloo);

// Connects rank `rank` of `size` ranks, all on this host, through `store`. Collective over all
// of them. Throws RendezvousError (a rank never joined, or could not map rank 0's segment: not
// on one host) or ConfigError.
std::unique_ptr<Communicator> make_shm_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                    const ShmOptions& options = {});

// A shared-memory group split off another backend's communicator (a Gloo world whose members
// of one host form a group): `scoped` is the store already scoped to the new group, `members`
// its world ranks (sorted, the caller among them).
std::unique_ptr<Communicator> connect_shm_group(std::shared_ptr<Store> world_store, std::shared_ptr<Store> scoped,
                                                int world_rank, int world_size, std::vector<int> members,
                                                std::string name, const ShmOptions& options);

}  // namespace parlab::comm
