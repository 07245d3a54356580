#pragma once
// The analytic cost model: closed-form times for collectives (alpha-beta per algorithm) and
// compute (FLOPs over the achievable rate, bandwidth-bound ops over memory bandwidth), and a
// walk of the step programs that takes the critical path through one compute and one
// communication stream per rank, so overlap and pipeline bubbles are modelled, not assumed.
#include <string>
#include <vector>

#include "strategy/cluster_spec.h"
#include "strategy/collectives.h"
#include "strategy/step_program.h"

namespace parlab::strategy {

enum class Algorithm { kRing, kTree, kHierarchical, kPointToPoint, kNone };
std::string_view to_string(Algorithm a);

// NCCL's ring protocols on NVLink inside one node (cost_model_nccl.cpp: NCCL's own tuning
// constants). LL: low latency, a quarter of the bandwidth; LL128: more latency, 92% of it;
// Simple: the most latency, all of it. Small messages take LL, mid-size LL128, large Simple.
// kMeasured: the link's measured nccl-tests curve (LinkSpec::measured_*) in place of the model.
enum class NcclProtocol { kLL, kLL128, kSimple, kMeasured };
std::string_view to_string(NcclProtocol p);
struct ProtocolTime {
  NcclProtocol protocol = NcclProtocol::kSimple;
  double base_seconds = 0;     // once per call (kernel launch and setup)
  double step_seconds = 0;     // every ring step, in place of the link's latency
  double bus_bytes_per_s = 0;  // what each link moves under this protocol
  double seconds = 0;          // base + ring_steps(op, n) step + factor(op, n) S / bus
};
// True when the intra-node link is NVLink (kind "nvlink*"): single-node rings of all-reduce,
// reduce-scatter and all-gather are timed with NCCL's protocols; loopback (Gloo), `ideal` and
// multi-node levels keep collective_time's alpha-beta formulas.
bool uses_nccl_protocols(const ClusterSpec& cluster);
// `min_chunk_bytes`: an uneven reduce-scatter's or all-gather's smallest chunk (ring_link_bytes
// in collectives.h); the bandwidth term is then (S - c_min) / bus instead of factor(op, n) S / bus.
ProtocolTime nccl_ring_protocol_time(CollectiveOp op, double bytes, int n, const ClusterSpec& cluster, NcclProtocol p,
                                     double min_chunk_bytes = -1);
// The fastest of the three, as NCCL's tuner picks -- or, where the link carries a measured
// all-reduce curve, that curve's bus bandwidth at this size (kMeasured).
ProtocolTime nccl_ring_time(CollectiveOp op, double bytes, int n, const ClusterSpec& cluster,
                            double min_chunk_bytes = -1);
// Bus bandwidth of the link's measured curve at `bytes`: interpolated linearly in log(size)
// between measured sizes, the largest size's beyond them; below the smallest, the time is
// extrapolated along the first two points (latency-bound: the time falls no faster than the
// measured rate between them). Requires LinkSpec::has_measured_ring().
double measured_ring_busbw(const LinkSpec& link, CollectiveOp op, double bytes, int n);

struct CollectiveEstimate {
  double seconds = 0;
  Algorithm algorithm = Algorithm::kNone;
  bool crosses_nodes = false;
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  std::string_view protocol;  // NCCL protocol of a single-node NVLink ring ("LL", ...); empty otherwise
};

// Where ranks live: world rank r on node r / devices_per_node (Megatron's order keeps TP groups
// inside a node).
int node_of(const ClusterSpec& cluster, int rank);

// Time of one collective of `bytes` (nccl-tests convention) over `ranks`:
//   ring       all-reduce      2(n-1) a + 2 (n-1)/n S/B
//              reduce-scatter, all-gather  (n-1) a + (n-1)/n S/B
//              broadcast (pipelined chain) (n-1) a + S/B
//   tree       (double binary tree, NCCL) all-reduce 2 log2(n) a + 2 S/B; wins for small S
//   hierarchical, when the group spans N nodes with k members each: the intra-node ring over k
//              ranks, then the inter-node ring over N nodes on S/k bytes, then intra again:
//              all-reduce 2(k-1) a_i + 2 (k-1)/k S/B_i + 2(N-1) a_e + 2 (N-1)/N (S/k)/B_e.
// B_i is a device's intra-node link; B_e a device's share of its node's NICs (every device of a
// node communicates at once in a symmetric plan). The cheaper of ring/tree is taken, as NCCL's
// tuner does. Inside one NVLink node (uses_nccl_protocols) all-reduce, reduce-scatter and
// all-gather are instead NCCL's ring under its fastest protocol (nccl_ring_time): NCCL_ALGO=RING,
// the algorithm the published busbw figures use (NVLS, NVLink SHARP on Hopper, is not modelled).
// `min_chunk_bytes` (>= 0) prices an uneven reduce-scatter or all-gather (a ZeRO bucket or layer,
// Op::min_chunk_bytes): its ring's busiest link carries S - c_min, not (n-1)/n S
// (ring_link_bytes); a hierarchical one's levels scale their bytes by the same ratio. busbw stays
// nccl-tests' (balanced) normalisation, so an uneven call shows a lower busbw.
CollectiveEstimate collective_time(CollectiveOp op, double bytes, const std::vector<int>& ranks,
                                   const ClusterSpec& cluster, double min_chunk_bytes = -1);
// One message between two ranks: a + S/B on the link they share.
double p2p_time(double bytes, int from, int to, const ClusterSpec& cluster);

// Factors on an MLP's forward and backward FLOPs (gemm_rate_factors below).
struct GemmRateFactors {
  double forward = 1, backward = 1;
};

// GEMM FLOPs as a device spends them: each transformer layer's forward and backward GEMMs
// (Megatron's shapes for the plan's microbatch and tensor split) lose the idle SMs of their
// last wave (wave quantization, cost_model_gemm.cpp). effective_flops(op) is op.flops scaled
// by that loss, to be divided by the best-shape GEMM rate; op.flops itself where the device has
// no SM count (CPUs), for the optimizer and for non-transformer models. Default: no loss.
class GemmTimes {
 public:
  GemmTimes() = default;
  GemmTimes(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster);
  // The same from model.layer_list() already built.
  GemmTimes(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
            const ClusterSpec& cluster);
  double effective_flops(const Op& op) const;

 private:
  GemmRateFactors uniform_;    // an MLP on a rate grid: every layer's forward and backward (gemm_rate_factors)
  std::vector<double> flops_;  // forward FLOPs per token, per layer (the split of an op's FLOPs)
  std::vector<double> forward_factor_, backward_factor_;
};

// An MLP's forward and backward on a device with a measured GEMM-rate grid (DeviceSpec::gemm_rates,
// a calibrated CPU): the device's rate over the grid's at the plan's microbatch and its rank's
// slice of the width (hidden x ffn / tp), so FLOPs x factor / device rate is their time at the
// grid's rate. 1 elsewhere.
double gemm_rate_factor(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster);
// The same for the forward and the backward apart, where they differ: a plan with weight-gradient
// groups (weight_grad_group G > 1) reduces each block's weight-gradient products over G
// microbatches at once, at the grid's rate for G x microbatch rows, while its forwards and
// input-gradient products run at the microbatch's. Per microbatch, in units of the forward's
// FLOPs F: the forward takes 1/Rf(m) (the grid's forward rate), the input gradients as long (the
// same products, transposed), the weight gradients 3/R(Gm) - 2/Rf(Gm) (the step's time at Gm
// rows less its forward and input gradients there). Without groups, or a grid without forward
// rates, both are gemm_rate_factor. Measured on held2 (12 x 512/2048 blocks, microbatch 8) on 4
// workers: one rate for all priced DDP 1.5x its profile and measured steps.
GemmRateFactors gemm_rate_factors(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster);
// Achievable compute rate of one rank: peak x efficiency, divided among ranks that share a
// host's cores (cpu-local with more workers than cores).
double rank_flops_per_s(const ClusterSpec& cluster, const Plan& plan);
// Duration of a compute op on a device of its own: a forward or backward takes FLOPs / GEMM rate
// + memory bytes / achieved memory bandwidth (its GEMMs and its bandwidth-bound kernels run one
// after another); the optimizer, one fused kernel, the roofline max of the two. The simulator
// times compute ops with this function too.
// `gemms` (when given) times the GEMM FLOPs with wave quantization.
double compute_seconds_alone(const Op& op, const ClusterSpec& cluster, Precision precision,
                             const GemmTimes* gemms = nullptr);
// What a backward's ZeRO-2/3 bucket work adds (Op::zeroed_bytes, accumulated_bytes): buckets
// zeroed as a clear is, reduced chunks added into the shard at the memory rate. 0 for any other op.
double bucket_work_seconds(const Op& op, const ClusterSpec& cluster);

// The bytes a rank's part of one call of collective `op` on `n` ranks costs CPU for on a host
// where communication is CPU work (ClusterSpec::comm_cpu_seconds_per_byte): what its busiest ring
// link carries (ring_link_bytes), except for one that overlaps compute (Op::overlaps_compute: over
// registered memory), whose chunks are each summed once, by the rank whose shard holds them: over
// a step's buckets a rank's pass is the balanced ring's share, not the uneven ring's busiest link
// (up to n/(n-1) x it).
double comm_cpu_bytes(const Op& op, int n);

// The same on this plan's share of a host whose cores more ranks share (cpu-local).
double compute_time(const Op& op, const ClusterSpec& cluster, const Plan& plan, const GemmTimes* gemms = nullptr);

// Whether collective `op` of `program` overlaps compute on `cluster` (Op::overlaps_compute) rather
// than taking turns with it where ranks fill the cores: only while its group's members can all
// hold a core at once (the group no larger than cores_per_node), however many ranks the host runs
// besides.
bool overlaps_compute_on(const Op& op, const StepProgram& program, const ClusterSpec& cluster);

// Per-rank result of the walk, in the same keys the simulator and the runtime report.
struct RankTimes {
  int rank = 0;
  int stage = 0;
  double step_seconds = 0;
  double compute_seconds = 0;  // forward + backward + optimizer
  double forward_seconds = 0;
  double backward_seconds = 0;
  double optimizer_seconds = 0;
  double exposed_comm_seconds = 0;  // compute stream waiting for (or running) communication
  double bubble_seconds = 0;        // idle: waiting for pipeline neighbours, start and end
};

struct CollectiveTiming {
  int rank = 0;
  int op_id = 0;
  std::string op;     // "all-reduce"
  std::string group;  // "dp.0"
  std::string tag;
  double bytes = 0;
  int count = 1;
  int ranks = 0;
  double start_seconds = 0, end_seconds = 0;
  double seconds = 0;  // per call
  std::string algorithm;
};

// One op's interval on its rank and stream (the analytic timeline; the simulator writes the
// same schema).
struct OpTiming {
  int rank = 0;
  int op_id = 0;
  double start_seconds = 0, end_seconds = 0;
};

struct StepEstimate {
  double step_seconds = 0;
  std::vector<OpTiming> timeline;
  std::vector<RankTimes> ranks;  // one per rank walked
  std::vector<CollectiveTiming> collectives;
  // Pipeline bubble, both definitions: over the ideal time (p-1)/(v m), and over the total
  // time (p-1)/(v m + p - 1) — closed forms; plus the walked bubble over the step.
  double bubble_fraction_of_ideal = 0;
  double bubble_fraction_of_total = 0;
  double walked_bubble_fraction = 0;
  double samples_per_s = 0;
  double tokens_per_s = 0;
  double mfu = 0;  // model FLOPs (6 N T-style, from the model's forward+backward FLOPs) / peak
};

// Walks the programs of one representative rank per pipeline stage (dp = tp = 0: ranks of a
// stage are symmetric). Throws RuntimeError naming the stuck ops if the programs deadlock.
// `detail` fills `timeline` and `collectives`; the planner walks many plans without them, and
// without detail the programs are built untagged (BuildOptions::tags: a deadlock then names its
// stuck ops by kind, bytes and group, not by tag).
StepEstimate estimate_step(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster, bool detail = true);
// The same from model.layer_list() already built (the planner walks many plans of one model).
StepEstimate estimate_step(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
                           const ClusterSpec& cluster, bool detail = true);
// Walks exactly the given programs (tests, the simulator's comparisons). Collectives whose
// members are not all among them are assumed symmetric: they start when the rank reaches them.
StepEstimate walk_programs(const std::vector<StepProgram>& programs, const ModelSpec& model, const ClusterSpec& cluster,
                           bool detail = true);

// Closed forms for the pipeline bubble.
double bubble_fraction_of_ideal(int pp, int v, int64_t microbatches);
double bubble_fraction_of_total(int pp, int v, int64_t microbatches);

}  // namespace parlab::strategy
