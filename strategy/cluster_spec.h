#pragma once
// ClusterSpec: the machines a plan runs on. nodes x devices_per_node devices, each with a memory,
// peak FLOP/s per dtype and memory bandwidth; an intra-node link between devices of a node
// (NVLink through an NVSwitch, PCIe, or loopback) and an inter-node network (NICs per node).
#include <string>

#include "strategy/model_spec.h"

namespace parlab::strategy {


struct DeviceSpec {
  std::string name;
  double memory_bytes = 0;
  // Peak dense FLOP/s per dtype, from the vendor's data sheet (no sparsity).
  double peak_flops_fp32 = 0;
  double peak_flops_bf16 = 0;  // also used for fp16
  double memory_bytes_per_s = 0;
  // Fraction of peak that large GEMMs reach in practice (e.g. ~0.7 for bf16 on A100). The cost
  // model's compute rate is peak x gemm_efficiency; calibration measures it on this machine.
  double gemm_efficiency = 1.0;
};

struct LinkSpec {
  std::string kind;          // "nvlink3", "hdr-ib", "loopback", "ideal", ...
  double bytes_per_s = 0;    // one direction, one link; may be +inf (the `ideal` cluster)
  double latency_seconds = 0;
};

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int devices_per_node = 1;
  DeviceSpec device;
  LinkSpec intra;          // device <-> device inside a node (each device's own link)
  LinkSpec inter;          // one NIC; a node has nics_per_node of them
  int nics_per_node = 1;
  // > 0 when the "devices" are worker processes sharing a host's CPU cores (cpu-local): the
  // simulator builds one multicore host per node and the cost model divides the cores.
  int cores_per_node = 0;
  // CPU time a rank's process spends per byte it sends (kernel copies of loopback TCP, say). Zero
  // where the network engine does the work (NVLink, RDMA NICs). On shared cores it competes with
  // compute: `parlab calibrate` measures it for cpu-local.
  double comm_cpu_seconds_per_byte = 0;
  bool calibrated = false;  // written by `parlab calibrate`

  int devices() const { return nodes * devices_per_node; }
  // Achievable compute rate of one device for the given precision.
  double device_flops_per_s(Precision precision) const;
  // Inter-node bandwidth of a whole node (all NICs).
  double node_network_bytes_per_s() const { return inter.bytes_per_s * nics_per_node; }
  bool shares_cores() const { return cores_per_node > 0; }
};

// The cluster resized to hold `world` devices: one node when world <= devices_per_node (a partial
// node), else world / devices_per_node nodes. Throws ConfigError when world does not fill whole
// nodes or is not positive.
ClusterSpec with_world(const ClusterSpec& cluster, int world);

void validate(const ClusterSpec& cluster, const std::string& where = "cluster");

}  // namespace parlab::strategy
