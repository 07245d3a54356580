#pragma once
// ClusterSpec: the machines a plan runs on. nodes x devices_per_node devices, each with a memory,
// peak FLOP/s per dtype and memory bandwidth; an intra-node link between devices of a node
// (NVLink through an NVSwitch, PCIe, or loopback) and an inter-node network (NICs per node).
#include <string>
#include <vector>

#include "strategy/collectives.h"
#include "strategy/model_spec.h"

namespace parlab::strategy {

// One measured GEMM rate of a CPU worker process: the lab MLP's whole step (forward, backward)
// at one microbatch and one width (hidden x ffn), in fp32 matmul FLOPs per second.
struct GemmRatePoint {
  int64_t microbatch = 0, hidden = 0, ffn = 0;
  double flops_per_s = 0;
  // The forward alone, in its own matmul FLOPs (a third of the step's) per second: what separates
  // the weight-gradient products from the rest (gemm_rate_factors). 0: not measured.
  double forward_flops_per_s = 0;
};

// The rate at (microbatch, hidden, ffn) of a full grid (every microbatch with every width): the
// log-rate interpolated bilinearly over log(microbatch) x log(width), width = sqrt(hidden ffn);
// outside the grid the nearest edge. Throws ConfigError on an empty or partial grid.
double gemm_rate_at(const std::vector<GemmRatePoint>& grid, int64_t microbatch, int64_t hidden, int64_t ffn);

struct DeviceSpec {
  std::string name;
  double memory_bytes = 0;
  // Peak dense FLOP/s per dtype, from the vendor's data sheet (no sparsity).
  double peak_flops_fp32 = 0;
  double peak_flops_bf16 = 0;  // also used for fp16
  double memory_bytes_per_s = 0;
  // Fraction of peak that large GEMMs reach in practice: a measured quantity (the presets cite
  // theirs). The cost model's compute rate is peak x gemm_efficiency; calibration measures it on
  // this machine.
  double gemm_efficiency = 1.0;
  // Fraction of memory_bytes_per_s that bandwidth-bound kernels (elementwise ops, norms, softmax,
  // the optimizer) reach: a measured streaming bandwidth over the data-sheet figure.
  double memory_efficiency = 1.0;
  // Streaming multiprocessors and the output tile one of them computes at a time in a large
  // GEMM: what wave quantization needs (GemmTimes, cost_model.h). 0: not modelled (CPUs).
  int sms = 0;
  int gemm_tile_rows = 0, gemm_tile_cols = 0;
  // How fast a worker makes and zeroes memory it has just allocated (each page first touched
  // traps into the kernel, which zeroes it): a calibrated CPU measures it (calibrate_profile.h);
  // reported, priced by nothing (ZeRO's buckets stay in a ring across steps). 0: not measured.
  double first_touch_bytes_per_s = 0;
  // A CPU's GEMM rate by shape (`parlab calibrate` measures it; empty elsewhere). A core runs a
  // microbatch of 1 through a layer as matrix-vector products bound by memory -- several times
  // slower per FLOP than a microbatch of 32 -- so one rate for every shape ranks plans of small
  // microbatches far too high. Where given, an MLP's forward and backward run at the grid's rate
  // for the plan's microbatch and its rank's slice of the width (GemmTimes, cost_model.h), and
  // peak_flops_* x gemm_efficiency is the rate at the calibration model's own shape.
  std::vector<GemmRatePoint> gemm_rates;
  double achieved_memory_bytes_per_s() const { return memory_bytes_per_s * memory_efficiency; }
};

struct LinkSpec {
  std::string kind;        // "nvlink3", "hdr-ib", "loopback", "ideal", ...
  double bytes_per_s = 0;  // line rate: one direction, one link; may be +inf (the `ideal` cluster)
  double latency_seconds = 0;
  // Fraction of the line rate a collective library's protocols deliver (NCCL's headers, flags
  // and chunking on NVLink: about 0.8, measured as nccl-tests' ring busbw over the line rate).
  // Every transfer the cost model and the simulator time moves at achieved_bytes_per_s().
  double protocol_efficiency = 1.0;
  double achieved_bytes_per_s() const { return bytes_per_s * protocol_efficiency; }
  // nccl-tests' bus bandwidth measured on one node of this link, by message size (ascending, at
  // least two points): all-reduce, and where measured all-gather and reduce-scatter (empty: the
  // all-reduce curve). Where given, single-node rings on the link are timed from these curves
  // (cost_model_nccl.cpp: nccl_ring_time) instead of NCCL's protocol model.
  std::vector<double> measured_sizes_bytes;
  std::vector<double> measured_all_reduce_busbw, measured_all_gather_busbw, measured_reduce_scatter_busbw;
  bool has_measured_ring() const { return !measured_sizes_bytes.empty(); }
  // Reduce-scatter and all-gather fitted on their own, t = (n-1) a + (n-1)/n S / B over ZeRO's
  // uneven calls: on one host's shared memory they are not halves of the all-reduce (they copy
  // through staging slots in rounds of their own), and `parlab calibrate` measures them. Their
  // time follows the whole message S, not the ring's busiest link S - c_min: each rank copies its
  // own chunk in and every other chunk out, so a bucket one rank owns whole costs about what an
  // evenly cut one does. A prediction on W workers carries the fit of W ranks
  // (experiments/lib/predict_cluster.h).
  // 0: the link's latency and bandwidth.
  double reduce_scatter_latency_seconds = 0, reduce_scatter_bytes_per_s = 0;
  double all_gather_latency_seconds = 0, all_gather_bytes_per_s = 0;
  // {latency, bytes/s} of `op`'s own fit; false when it has none.
  bool op_fit(CollectiveOp op, double& latency_seconds, double& bytes_per_s) const {
    if (op == CollectiveOp::kReduceScatter && reduce_scatter_bytes_per_s > 0) {
      latency_seconds = reduce_scatter_latency_seconds, bytes_per_s = reduce_scatter_bytes_per_s;
      return true;
    }
    if (op == CollectiveOp::kAllGather && all_gather_bytes_per_s > 0) {
      latency_seconds = all_gather_latency_seconds, bytes_per_s = all_gather_bytes_per_s;
      return true;
    }
    return false;
  }
  // The measured curve that times `op` (all-reduce's where the op has none of its own).
  const std::vector<double>& measured_busbw(CollectiveOp op) const {
    if (op == CollectiveOp::kAllGather && !measured_all_gather_busbw.empty()) return measured_all_gather_busbw;
    if (op == CollectiveOp::kReduceScatter && !measured_reduce_scatter_busbw.empty())
      return measured_reduce_scatter_busbw;
    return measured_all_reduce_busbw;
  }
};

struct ClusterSpec {
  std::string name;
  std::string description;
  int nodes = 1;
  int devices_per_node = 1;
  DeviceSpec device;
  LinkSpec intra;  // device <-> device inside a node (each device's own link)
  LinkSpec inter;  // one NIC; a node has nics_per_node of them
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
  // Inter-node bandwidth of a whole node (all NICs), as the collective library achieves it.
  double node_network_bytes_per_s() const { return inter.achieved_bytes_per_s() * nics_per_node; }
  bool shares_cores() const { return cores_per_node > 0; }
  // Whether a rank's communication and its compute take turns instead of overlapping: where
  // ranks share a host's cores and fill them, loopback communication is CPU work (copies, the
  // transport's threads and their wake-ups) that has no idle core to run on. What runs of it
  // during compute takes the core from compute; the latency-bound rest waits for a core. Either
  // way a step pays for about all of it (measured: DDP's exposed all-reduce time on 2 cores is the
  // whole all-reduce time at 2-4 workers; docs/DESIGN.md, "Shared-core hosts"). The cost model
  // and the simulator then run each rank's communication-stream collectives and its compute on
  // one timeline, compute first.
  bool serializes_comm_with_compute() const { return shares_cores() && devices_per_node >= cores_per_node; }
};

// The cluster resized to hold `world` devices: one node when world <= devices_per_node (a partial
// node), else world / devices_per_node nodes. Throws ConfigError when world does not fill whole
// nodes or is not positive.
ClusterSpec with_world(const ClusterSpec& cluster, int world);

void validate(const ClusterSpec& cluster, const std::string& where = "cluster");

}  // namespace parlab::strategy
