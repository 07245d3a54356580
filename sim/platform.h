#pragma once
// The simulated machine: a SimGrid platform built from a ClusterSpec.
//
//   node k:   devices r (one host each, speed = the device's achievable FLOP/s for the plan's
//             precision) -- each with its own link into the node switch (NVLink through an
//             NVSwitch): r.up carries the link latency, r.down none, both the link bandwidth, so
//             a message between two devices of a node crosses src.up + dst.down and takes
//             exactly  a_intra + S / B_intra  when alone.
//   network:  per node min(nics, devices) NIC links (bandwidth = the node's NIC bandwidth split
//             over them) into one non-blocking switch; device r uses NIC (local index mod NICs),
//             so with a NIC per device a cross-node message takes  a_inter + S / B_nic  and with
//             fewer NICs the devices sharing one contend for it. GPUDirect style: cross-node
//             traffic leaves through the NIC, not through the NVLink.
//   cpu-local (cores_per_node > 0): the ranks of a node execute on ONE host with cores_per_node
//             cores; an exec of one rank uses one core, so 4 ranks on 2 cores run at half speed
//             each. Their messages still take per-rank loopback links (intra spec).
//
// Every device has two network endpoints (hosts in one SimGrid star zone): "r<i>" for the
// node switch and "r<i>.nic" for the network; the executor picks the pair that matches the
// route, so no route ever mixes the two.
#include <array>
#include <string>
#include <vector>

#include "sim/faults.h"
#include "strategy/cluster_spec.h"

namespace simgrid::s4u {
class Host;
}

namespace parlab::sim {

// SimGrid needs finite rates: infinite bandwidth (the `ideal` cluster) becomes 1e30 B/s, which
// moves a terabyte in 1e-18 s -- far below every other time in a step -- while staying an
// ordinary double for the max-min solver.
inline constexpr double kInfiniteBytesPerS = 1e30;

// Where ranks sit and what their links nominally are (no SimGrid; the collective schedules and
// the tests use it).
struct Layout {
  int world = 0;
  int devices_per_node = 1;
  int nic_links_per_node = 1;  // min(nics_per_node, devices_per_node)
  double intra_latency_seconds = 0, inter_latency_seconds = 0;
  double intra_bytes_per_s = 0;  // one device's link into the node switch (finite)
  double nic_bytes_per_s = 0;    // one NIC link: node NIC bandwidth / nic_links_per_node (finite)

  int node_of(int rank) const { return rank / devices_per_node; }
  int local_of(int rank) const { return rank % devices_per_node; }
  int nic_of(int rank) const { return local_of(rank) % nic_links_per_node; }
  bool same_node(int a, int b) const { return node_of(a) == node_of(b); }
  // Nominal a and B of the route from -> to (no contention, no faults).
  double latency_seconds(int from, int to) const;
  double bytes_per_s(int from, int to) const;

  // Links as numbers, for the executor's bookkeeping of who uses which link: device r's NVLink
  // up 2r and down 2r + 1; NIC k of node n up 2 world + 2 (n nic_links_per_node + k), down + 1.
  int node_count() const { return (world + devices_per_node - 1) / devices_per_node; }
  int link_count() const { return 2 * world + 2 * node_count() * nic_links_per_node; }
  // The two links a message from -> to crosses: {the sender's up, the receiver's down}.
  std::array<int, 2> route(int from, int to) const;
};
// `cluster` sized to the world (strategy::with_world); world <= cluster.devices().
Layout make_layout(const strategy::ClusterSpec& cluster, int world);

// Sets SimGrid's network model so a transfer costs exactly a + S/B (see platform.cpp). Call once,
// after the Engine exists and before the platform is built.
void configure_engine();

// Builds the platform into the current SimGrid engine. Holds raw pointers owned by SimGrid.
class Platform {
 public:
  Platform(const strategy::ClusterSpec& cluster, const Layout& layout, double device_flops_per_s,
           const std::vector<Fault>& faults);

  // The host a message from `from` to `to` leaves from, and the one it arrives at.
  simgrid::s4u::Host* source(int from, int to) const;
  simgrid::s4u::Host* destination(int from, int to) const;
  // The host whose CPU runs `rank`'s compute ops (its own, or its node's shared multicore host).
  simgrid::s4u::Host* compute_host(int rank) const { return compute_[rank]; }
  // The host `rank`'s actors live on.
  simgrid::s4u::Host* home(int rank) const { return switch_ep_[rank]; }
  // FLOP/s of one core of compute_host(): an op of `seconds` at full speed executes
  // seconds * flops_per_core() FLOPs.
  double flops_per_core() const { return flops_per_core_; }
  const Layout& layout() const { return layout_; }
  // Link `id` (Layout::route) as built: faults applied.
  double link_bytes_per_s(int id) const { return link_bytes_per_s_[id]; }
  double link_latency_seconds(int id) const { return link_latency_seconds_[id]; }
  // What SimGrid's network model (configure_engine) gives a message from -> to of `bytes` when
  // nothing else uses its links: the route's latency plus bytes over its narrowest link.
  double alone_seconds(int from, int to, double bytes) const;

 private:
  void record_link(int id, double bytes_per_s, double latency_seconds);

  Layout layout_;
  double flops_per_core_ = 0;
  std::vector<double> link_bytes_per_s_, link_latency_seconds_;
  std::vector<simgrid::s4u::Host*> switch_ep_, nic_ep_, compute_;
};

}  // namespace parlab::sim
