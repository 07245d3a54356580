#include "strategy/cluster_spec.h"

#include <cmath>

#include "base/errors.h"
#include "strategy/plan.h"

namespace parlab::strategy {

double ClusterSpec::device_flops_per_s(Precision precision) const {
  const double peak = precision == Precision::kFp32 ? device.peak_flops_fp32 : device.peak_flops_bf16;
  return peak * device.gemm_efficiency;
}

ClusterSpec with_world(const ClusterSpec& c, int world) {
  if (world <= 0) throw ConfigError("world", std::to_string(world), "must be a positive number of devices");
  ClusterSpec out = c;
  if (world <= c.devices_per_node) {
    out.nodes = 1;
    out.devices_per_node = world;
    return out;
  }
  if (world % c.devices_per_node != 0)
    throw ConfigError("world", std::to_string(world),
                      "must be at most devices_per_node (" + std::to_string(c.devices_per_node) +
                          ") or a multiple of it for cluster " + c.name);
  out.nodes = world / c.devices_per_node;
  return out;
}

void validate(const ClusterSpec& c, const std::string& where) {
  auto positive = [&](const std::string& field, double v) {
    if (!(v > 0)) throw ConfigError(where + "." + field, std::to_string(v), "must be positive");
  };
  if (c.nodes <= 0) throw ConfigError(where + ".nodes", std::to_string(c.nodes), "must be a positive integer");
  if (c.devices_per_node <= 0)
    throw ConfigError(where + ".devices_per_node", std::to_string(c.devices_per_node), "must be a positive integer");
  if (c.nics_per_node <= 0)
    throw ConfigError(where + ".nics_per_node", std::to_string(c.nics_per_node), "must be a positive integer");
  if (c.comm_cpu_seconds_per_byte < 0 || std::isnan(c.comm_cpu_seconds_per_byte))
    throw ConfigError(where + ".comm_cpu_ns_per_byte", std::to_string(c.comm_cpu_seconds_per_byte * 1e9),
                      "must be >= 0");
  if (c.cores_per_node < 0)
    throw ConfigError(where + ".cores_per_node", std::to_string(c.cores_per_node),
                      "must be >= 0 (0: one device per host)");
  positive("device.memory", c.device.memory_bytes);
  positive("device.peak_flops_fp32", c.device.peak_flops_fp32);
  positive("device.peak_flops_bf16", c.device.peak_flops_bf16);
  positive("device.memory_bandwidth", c.device.memory_bytes_per_s);
  if (!(c.device.gemm_efficiency > 0 && c.device.gemm_efficiency <= 1))
    throw ConfigError(where + ".device.gemm_efficiency", std::to_string(c.device.gemm_efficiency), "must be in (0, 1]");
  if (!(c.device.memory_efficiency > 0 && c.device.memory_efficiency <= 1))
    throw ConfigError(where + ".device.memory_efficiency", std::to_string(c.device.memory_efficiency),
                      "must be in (0, 1]");
  for (const auto& [name, link] : {std::pair<const char*, const LinkSpec&>{"intra", c.intra}, {"inter", c.inter}})
    if (!(link.protocol_efficiency > 0 && link.protocol_efficiency <= 1))
      throw ConfigError(where + "." + name + ".protocol_efficiency", std::to_string(link.protocol_efficiency),
                        "must be in (0, 1]");
  positive("intra.bandwidth", c.intra.bytes_per_s);
  positive("inter.bandwidth", c.inter.bytes_per_s);
  if (c.intra.latency_seconds < 0 || std::isnan(c.intra.latency_seconds))
    throw ConfigError(where + ".intra.latency", std::to_string(c.intra.latency_seconds), "must be >= 0");
  if (c.inter.latency_seconds < 0 || std::isnan(c.inter.latency_seconds))
    throw ConfigError(where + ".inter.latency", std::to_string(c.inter.latency_seconds), "must be >= 0");
}

}  // namespace parlab::strategy
