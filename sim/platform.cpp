#include "sim/platform.h"

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>

#include "base/errors.h"

namespace parlab::sim {
namespace sg4 = simgrid::s4u;
namespace {

double finite(double bytes_per_s) { return std::isinf(bytes_per_s) ? kInfiniteBytesPerS : bytes_per_s; }

// Links into a star zone's centre: `up` for what leaves the endpoint, `down` for what arrives.
void attach(sg4::NetZone* zone, sg4::Host* host, sg4::Link* up, sg4::Link* down) {
  zone->add_route(host->get_netpoint(), nullptr, nullptr, nullptr, {sg4::LinkInRoute(up)}, false);
  zone->add_route(nullptr, host->get_netpoint(), nullptr, nullptr, {sg4::LinkInRoute(down)}, false);
}

}  // namespace

double Layout::latency_seconds(int from, int to) const {
  return same_node(from, to) ? intra_latency_seconds : inter_latency_seconds;
}

double Layout::bytes_per_s(int from, int to) const { return same_node(from, to) ? intra_bytes_per_s : nic_bytes_per_s; }

std::array<int, 2> Layout::route(int from, int to) const {
  if (same_node(from, to)) return {2 * from, 2 * to + 1};
  const int nic_base = 2 * world;
  return {nic_base + 2 * (node_of(from) * nic_links_per_node + nic_of(from)),
          nic_base + 2 * (node_of(to) * nic_links_per_node + nic_of(to)) + 1};
}

Layout make_layout(const strategy::ClusterSpec& c, int world) {
  if (world <= 0 || world > c.devices())
    throw ConfigError("world", std::to_string(world),
                      "must be in [1, " + std::to_string(c.devices()) + "] for cluster " + c.name);
  Layout l;
  l.world = world;
  l.devices_per_node = std::max(1, c.devices_per_node);
  l.nic_links_per_node = std::max(1, std::min(c.nics_per_node, l.devices_per_node));
  l.intra_latency_seconds = c.intra.latency_seconds;
  l.inter_latency_seconds = c.inter.latency_seconds;
  l.intra_bytes_per_s = finite(c.intra.achieved_bytes_per_s());  // what NCCL's protocols deliver
  l.nic_bytes_per_s = finite(c.node_network_bytes_per_s() / l.nic_links_per_node);
  return l;
}

void configure_engine() {
  // SimGrid's default network model (LV08) is calibrated for TCP: it multiplies latencies by
  // 13.01, bandwidths by 0.97 and adds a size-dependent penalty (weight-S). We want the spec's
  // figures taken literally, so a single transfer of S bytes over a link of bandwidth B and
  // latency a takes exactly a + S/B: CM02 has no latency/bandwidth factors and weight-S 0; the
  // TCP window bound (gamma / 2a) is switched off (gamma 0); no reverse-direction ACK traffic
  // (crosstraffic off).
  sg4::Engine::set_config("network/model:CM02");
  sg4::Engine::set_config("network/latency-factor:1");
  sg4::Engine::set_config("network/bandwidth-factor:1");
  sg4::Engine::set_config("network/weight-S:0");
  sg4::Engine::set_config("network/TCP-gamma:0");
  sg4::Engine::set_config("network/crosstraffic:0");
  // Rank actors run short loops; small stacks keep thousands of them cheap.
  sg4::Engine::set_config("contexts/stack-size:256");
}

Platform::Platform(const strategy::ClusterSpec& c, const Layout& layout, double device_flops_per_s,
                   const std::vector<Fault>& faults)
    : layout_(layout), flops_per_core_(device_flops_per_s) {
  auto* zone = sg4::create_star_zone("cluster");
  const int world = layout.world;
  const int nodes = (world + layout.devices_per_node - 1) / layout.devices_per_node;
  switch_ep_.resize(world);
  nic_ep_.resize(world);
  compute_.resize(world);
  link_bytes_per_s_.assign(size_t(layout.link_count()), 0.0);
  link_latency_seconds_.assign(size_t(layout.link_count()), 0.0);

  // NIC links per node, shared by the devices mapped to them.
  std::vector<sg4::Link*> nic_up(size_t(nodes) * layout.nic_links_per_node);
  std::vector<sg4::Link*> nic_down(nic_up.size());
  for (int n = 0; n < nodes; ++n)
    for (int k = 0; k < layout.nic_links_per_node; ++k) {
      // A NIC degraded through a fault of a device that uses it.
      double slow = 1;
      for (int r = n * layout.devices_per_node; r < std::min(world, (n + 1) * layout.devices_per_node); ++r)
        if (layout.nic_of(r) == k) slow *= link_slowdown(faults, r, LinkSide::kNic);
      const std::string name = "n" + std::to_string(n) + ".nic" + std::to_string(k);
      const size_t i = size_t(n) * layout.nic_links_per_node + k;
      nic_up[i] = zone->create_link(name + ".up", layout.nic_bytes_per_s / slow)
                      ->set_latency(layout.inter_latency_seconds)
                      ->seal();
      nic_down[i] = zone->create_link(name + ".down", layout.nic_bytes_per_s / slow)->set_latency(0)->seal();
      record_link(2 * world + 2 * int(i), layout.nic_bytes_per_s / slow, layout.inter_latency_seconds);
      record_link(2 * world + 2 * int(i) + 1, layout.nic_bytes_per_s / slow, 0);
    }

  std::vector<sg4::Host*> node_cpu;
  if (c.shares_cores()) {
    // One multicore host per node runs every rank of the node, one core per exec.
    for (int n = 0; n < nodes; ++n)
      node_cpu.push_back(zone->create_host("n" + std::to_string(n) + ".cpu", device_flops_per_s)
                             ->set_core_count(c.cores_per_node)
                             ->seal());
  }

  for (int r = 0; r < world; ++r) {
    const std::string name = "r" + std::to_string(r);
    sg4::Host* ep = zone->create_host(name, device_flops_per_s)->seal();
    const double slow = link_slowdown(faults, r, LinkSide::kIntra);
    auto* up = zone->create_link(name + ".up", layout.intra_bytes_per_s / slow)
                   ->set_latency(layout.intra_latency_seconds)
                   ->seal();
    auto* down = zone->create_link(name + ".down", layout.intra_bytes_per_s / slow)->set_latency(0)->seal();
    attach(zone, ep, up, down);
    record_link(2 * r, layout.intra_bytes_per_s / slow, layout.intra_latency_seconds);
    record_link(2 * r + 1, layout.intra_bytes_per_s / slow, 0);

    sg4::Host* nic = zone->create_host(name + ".nic", device_flops_per_s)->seal();
    const size_t k = size_t(layout.node_of(r)) * layout.nic_links_per_node + layout.nic_of(r);
    attach(zone, nic, nic_up[k], nic_down[k]);

    switch_ep_[r] = ep;
    nic_ep_[r] = nic;
    compute_[r] = c.shares_cores() ? node_cpu[layout.node_of(r)] : ep;
  }
  // The CPU hosts need no route: nothing is sent to or from them.
  zone->seal();
}

void Platform::record_link(int id, double bytes_per_s, double latency_seconds) {
  link_bytes_per_s_[id] = bytes_per_s;
  link_latency_seconds_[id] = latency_seconds;
}

double Platform::alone_seconds(int from, int to, double bytes) const {
  const auto [up, down] = layout_.route(from, to);
  return link_latency_seconds_[up] + link_latency_seconds_[down] +
         bytes / std::min(link_bytes_per_s_[up], link_bytes_per_s_[down]);
}

sg4::Host* Platform::source(int from, int to) const {
  return layout_.same_node(from, to) ? switch_ep_[from] : nic_ep_[from];
}

sg4::Host* Platform::destination(int from, int to) const {
  return layout_.same_node(from, to) ? switch_ep_[to] : nic_ep_[to];
}

}  // namespace parlab::sim
