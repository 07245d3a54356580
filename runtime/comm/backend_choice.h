#pragma once
// Which backend carries a group's collectives on CPUs: shared memory for ranks of one host, Gloo
// (TCP) across hosts. `parlab train --comm auto|shm|gloo` picks the policy:
//   auto  every rank publishes its host through the store; a world on one host is a shared-memory
//         communicator (and so is every group split off it); a world across hosts is Gloo, and a
//         group split off it whose members share a host is shared memory again (DP or TP inside a
//         node, PP across nodes, as NCCL picks SHM or NET per peer)
//   shm   shared memory for every group; refused (ConfigError) when the ranks span hosts
//   gloo  Gloo for every group, as before shared memory existed (a baseline, or a test of the
//         multi-host path on one machine)
// A host is its name, its boot id and the /dev/shm it sees: two containers with private /dev/shm
// mounts on one kernel are two hosts. GlooOptions::host_id (PARLAB_HOST_ID for workers) replaces
// the detected identity, e.g. to make one machine look like two in a test.
#include <memory>
#include <string>
#include <string_view>

#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"

namespace parlab::comm {

enum class CommChoice { kAuto, kShm, kGloo };

// "auto", "shm", "gloo"; anything else is a ConfigError naming `flag`.
CommChoice parse_comm_choice(std::string_view text, const std::string& flag = "--comm");
std::string_view to_string(CommChoice choice);

// This host as described above.
std::string detect_host_id();

// Connects rank `rank` of `size` through `store` with the backend `choice` leads to (collective
// over all `size` ranks). `host_id` empty: detect_host_id().
std::unique_ptr<Communicator> make_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                const GlooOptions& options, CommChoice choice,
                                                const std::string& host_id = "");

}  // namespace parlab::comm
