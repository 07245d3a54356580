// The analytic cost model against hand-computed alpha-beta times and closed-form bubbles.
#include <gtest/gtest.h>

#include <cmath>

#include "strategy/cost_model.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "parlab/source_dir.h"

namespace parlab::strategy {
namespace {

const std::string kData = std::string(PARLAB_SOURCE_DIR) + "/tests/strategy/data/";
std::vector<int> iota(int n, int stride = 1) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(i * stride);
  return v;
}

}  // namespace

TEST(CostModel, RingAllReduceOnOneNode) {
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 8);
  // 4 ranks, 1 GB: ring 2 (n-1) a + 2 (n-1)/n S/B = 6 x 2 us + 1.5 x 1e9 / 300e9 = 5.012 ms;
  // the tree would take 2 log2(4) x 2 us + 2 x 1e9/300e9 = 6.675 ms.
  const auto e = collective_time(CollectiveOp::kAllReduce, 1e9, iota(4), c);
  EXPECT_DOUBLE_EQ(e.seconds, 12e-6 + 1.5e9 / 300e9);
  EXPECT_EQ(e.algorithm, Algorithm::kRing);
  EXPECT_FALSE(e.crosses_nodes);
  // busbw of a ring is the link bandwidth, minus latency: 1.5 x 1e9 / 5.012 ms.
  EXPECT_NEAR(e.busbw_bytes_per_s, 1.5e9 / (12e-6 + 5e-3), 1);
}

TEST(CostModel, TreeWinsForSmallMessages) {
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 8);
  // 8 ranks, 1 KB: ring 14 x 2 us + 1.75 KB / 300 GB/s; tree 2 x 3 x 2 us + 2 KB / 300 GB/s.
  const auto e = collective_time(CollectiveOp::kAllReduce, 1e3, iota(8), c);
  EXPECT_EQ(e.algorithm, Algorithm::kTree);
  EXPECT_DOUBLE_EQ(e.seconds, 12e-6 + 2e3 / 300e9);
}

TEST(CostModel, ReduceScatterAllGatherBroadcast) {
  const ClusterSpec c = with_world(parse_cluster_toml(
      "name=\"r\"\ndevices_per_node=4\n[device]\nmemory_gb=1\npeak_tflops_fp32=1\npeak_tflops_bf16=1\n"
      "memory_bandwidth_gb_per_s=1\n[intra]\nbandwidth_gb_per_s=1\nlatency_us=10\n[inter]\nbandwidth_gb_per_s=1\n", "r"), 4);
  // (n-1) a + (n-1)/n S/B with n 4, a 10 us, S 4 MB, B 1 GB/s: 30 us + 3 ms.
  EXPECT_DOUBLE_EQ(collective_time(CollectiveOp::kReduceScatter, 4e6, iota(4), c).seconds, 30e-6 + 3e-3);
  EXPECT_DOUBLE_EQ(collective_time(CollectiveOp::kAllGather, 4e6, iota(4), c).seconds, 30e-6 + 3e-3);
  // Pipelined chain broadcast: (n-1) a + S/B.
  EXPECT_DOUBLE_EQ(collective_time(CollectiveOp::kBroadcast, 4e6, iota(4), c).seconds, 30e-6 + 4e-3);
  EXPECT_DOUBLE_EQ(collective_time(CollectiveOp::kAllReduce, 4e6, {2}, c).seconds, 0);
}

TEST(CostModel, HierarchicalAcrossNodes) {
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 16);
  // 16 ranks on 2 nodes, 1 GB all-reduce: intra ring over k = 8 then inter ring over N = 2
  // on S/8, each device using its share of the node's 8 x 25 GB/s = 25 GB/s.
  const double intra = 2 * 7 * 2e-6 + 2.0 * 7 / 8 * 1e9 / 300e9;
  const double inter = 2 * 1 * 5e-6 + 2.0 * 1 / 2 * (1e9 / 8) / 25e9;
  const auto e = collective_time(CollectiveOp::kAllReduce, 1e9, iota(16), c);
  EXPECT_TRUE(e.crosses_nodes);
  EXPECT_EQ(e.algorithm, Algorithm::kHierarchical);
  EXPECT_DOUBLE_EQ(e.seconds, intra + inter);
  // A group with one member per node (stride 8) has only the inter-node level.
  EXPECT_DOUBLE_EQ(collective_time(CollectiveOp::kAllReduce, 1e9, {0, 8}, c).seconds, 2 * 5e-6 + 1e9 / 25e9);
  EXPECT_DOUBLE_EQ(p2p_time(1e6, 0, 8, c), 5e-6 + 1e6 / 25e9);
  EXPECT_DOUBLE_EQ(p2p_time(1e6, 0, 1, c), 2e-6 + 1e6 / 300e9);
}

TEST(CostModel, IdealLinksCostNothing) {
  const ClusterSpec c = with_world(load_cluster("ideal"), 8);
  EXPECT_EQ(collective_time(CollectiveOp::kAllReduce, 1e9, iota(8), c).seconds, 0);
  EXPECT_EQ(p2p_time(1e9, 0, 7, c), 0);
}

TEST(CostModel, ComputeIsTheRooflineAndSharedCoresDivideIt) {
  ClusterSpec c = with_world(load_cluster("cpu-local"), 4);  // 4 workers on 2 cores
  c.device.peak_flops_fp32 = 50e9;
  Plan p;
  p.precision = Precision::kFp32;
  Op gemm;
  gemm.kind = OpKind::kForward;
  gemm.flops = 1e9;
  // 1 GFLOP at 50 GFLOP/s per core, two cores shared by four workers: 25 GFLOP/s each.
  EXPECT_DOUBLE_EQ(compute_time(gemm, c, p), 1e9 / 25e9);
  Op opt;
  opt.kind = OpKind::kOptimizer;
  opt.flops = 1e6;
  opt.memory_bytes = 1e9;  // 10 GB/s shared by 4 on 2 cores: 5 GB/s each
  EXPECT_DOUBLE_EQ(compute_time(opt, c, p), 1e9 / 5e9);
  const ClusterSpec two = with_world(load_cluster("cpu-local"), 2);
  EXPECT_DOUBLE_EQ(rank_flops_per_s(two, p), two.device.peak_flops_fp32);
}

// Ranks sharing cores: the step is at least the CPU work of every rank of the node (compute at a
// full core's rate plus the CPU their traffic costs) over the cores they can use.
TEST(CostModel, SharedCoresBoundTheStepByCpuDemand) {
  ClusterSpec c = with_world(load_cluster("cpu-local"), 4);  // 4 ranks, 2 cores
  c.device.peak_flops_fp32 = 50e9;
  c.intra.bytes_per_s = 1e12;  // the link itself is no bottleneck here
  c.intra.latency_seconds = 0;
  c.comm_cpu_seconds_per_byte = 1e-9;
  const ModelSpec m = load_model("lab-mlp");
  const Plan p = resolve(parse_plan("gbs=256"), m, 4);
  const StepEstimate with_cost = estimate_step(m, p, c);
  c.comm_cpu_seconds_per_byte = 0;
  const StepEstimate free_comm = estimate_step(m, p, c);
  // Per rank: compute at half a core (walked) = full-core seconds x 2; traffic 2 (3/4) x 4 bytes
  // per parameter of fp32 gradients. Bound = 4 ranks x (compute / 2 + traffic x 1 ns) / 2 cores.
  const double compute_full_core = free_comm.ranks[0].compute_seconds / 2;
  const double traffic = 2.0 * 3 / 4 * m.total_params() * 4;
  const double bound = 4 * (compute_full_core + traffic * 1e-9) / 2;
  EXPECT_NEAR(with_cost.step_seconds, bound, 1e-9 * bound);
  EXPECT_GT(with_cost.step_seconds, free_comm.step_seconds);
  // The difference is communication's: it shows up as exposed communication, not compute.
  EXPECT_DOUBLE_EQ(with_cost.ranks[0].compute_seconds, free_comm.ranks[0].compute_seconds);
  EXPECT_NEAR(with_cost.ranks[0].exposed_comm_seconds - free_comm.ranks[0].exposed_comm_seconds,
              with_cost.step_seconds - free_comm.step_seconds, 1e-9);
  // A GPU cluster has no shared cores: the bound never applies.
  const ClusterSpec gpu = with_world(load_cluster("dgx-a100"), 4);
  EXPECT_FALSE(gpu.shares_cores());
}

TEST(CostModel, BubbleClosedForms) {
  EXPECT_DOUBLE_EQ(bubble_fraction_of_ideal(4, 1, 8), 3.0 / 8);
  EXPECT_DOUBLE_EQ(bubble_fraction_of_total(4, 1, 8), 3.0 / 11);
  EXPECT_DOUBLE_EQ(bubble_fraction_of_ideal(4, 2, 8), 3.0 / 16);
  EXPECT_DOUBLE_EQ(bubble_fraction_of_total(4, 2, 8), 3.0 / 19);
}

// On ideal links a p-stage 1F1B pipeline of equal stages finishes its last backward on stage
// 0 after (m + p - 1)(t_f + t_b), so the idle share of that span is (p - 1)/(m + p - 1).
TEST(CostModel, OneFOneBOnIdealLinksTakesMPlusPMinusOneSlots) {
  const ModelSpec m = load_model(kData + "even-mlp.toml");
  const int p = 4, mb_count = 8;
  const ClusterSpec c = with_world(load_cluster("ideal"), p);
  Plan plan = resolve(parse_plan("pp=4,microbatches=8"), m, p);
  validate(plan, m, c);
  // Per stage: 2 blocks x 4 h f FLOPs per sample x 8 samples forward, twice that backward, at
  // 312 TFLOP/s x 0.7 (bf16, the preset's efficiency).
  const double rate = 312e12 * 0.7;
  const double tf = 2 * 4.0 * 1024 * 4096 * 8 / rate, tb = 2 * tf;
  const StepEstimate e = estimate_step(m, plan, c);
  double last_backward_end = 0;
  const auto prog0 = build_step(m, plan, 0);
  for (const auto& t : e.timeline)
    if (t.rank == 0 && prog0.ops[t.op_id].kind == OpKind::kBackward) last_backward_end = std::max(last_backward_end, t.end_seconds);
  EXPECT_NEAR(last_backward_end, (mb_count + p - 1) * (tf + tb), 1e-3 * (tf + tb));
  // Stage 0 computes m (t_f + t_b) of that span; the rest is bubble: (p-1)/(m+p-1) of it.
  const double busy = mb_count * (tf + tb);
  EXPECT_NEAR(1 - busy / last_backward_end, double(p - 1) / (mb_count + p - 1), 1e-3);
  EXPECT_DOUBLE_EQ(e.bubble_fraction_of_total, 3.0 / 11);
  // Interleaving with v = 2 shrinks the span to (m + (p - 1)/v) (t_f + t_b).
  Plan inter = resolve(parse_plan("pp=4,microbatches=8,schedule=interleaved,v=2"), m, p);
  validate(inter, m, c);
  const StepEstimate ei = estimate_step(m, inter, c);
  double inter_end = 0;
  const auto iprog0 = build_step(m, inter, 0);
  for (const auto& t : ei.timeline)
    if (t.rank == 0 && iprog0.ops[t.op_id].kind == OpKind::kBackward) inter_end = std::max(inter_end, t.end_seconds);
  EXPECT_NEAR(inter_end, (mb_count + (p - 1) / 2.0) * (tf + tb), 2e-3 * (tf + tb));
}

TEST(CostModel, DdpBucketsOverlapTheBackwardPass) {
  const ModelSpec m = load_model("lab-mlp");
  const ClusterSpec c = with_world(load_cluster(kData + "round-cluster.toml"), 4);
  Plan plan = resolve(parse_plan("precision=fp32"), m, 4);
  validate(plan, m, c);
  const StepEstimate e = estimate_step(m, plan, c);
  double allreduce_total = 0;
  for (const auto& col : e.collectives) allreduce_total += col.end_seconds - col.start_seconds;
  ASSERT_GT(allreduce_total, 0);
  const RankTimes& r = e.ranks[0];
  // Some of the all-reduce time hides under the backward pass, so less of it is exposed.
  EXPECT_LT(r.exposed_comm_seconds, allreduce_total);
  EXPECT_NEAR(r.compute_seconds + r.exposed_comm_seconds + r.bubble_seconds, e.step_seconds, 1e-12);
  // The 269 MB of fp32 gradients cross a 1 GB/s ring at 2 x 3/4: at least 0.4 s of all-reduce.
  EXPECT_GT(allreduce_total, 2 * 0.75 * m.total_params() * 4 / 1e9);
}

TEST(CostModel, SingleDeviceHasNoCommunicationAndMfuBelowEfficiency) {
  const ModelSpec m = load_model("gpt-22b");
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 1);
  Plan plan = resolve(parse_plan(""), m, 1);
  const StepEstimate e = estimate_step(m, plan, c);
  EXPECT_EQ(e.ranks[0].exposed_comm_seconds, 0);
  EXPECT_TRUE(e.collectives.empty());
  // By hand: forward + backward are 3 x (48 (24 h^2 + 4 s h) + 2 h V) FLOPs per token over
  // 2048 tokens at 312 TFLOP/s x 0.7; the Adam update moves 28 bytes per parameter at 2039 GB/s.
  const double h = 6144, s = 2048, V = 51200;
  const double fwd_per_token = 48 * (24 * h * h + 4 * s * h) + 2 * h * V;
  const double compute = 3 * fwd_per_token * s / (312e12 * 0.7);
  const double optimizer = m.total_params() * 28 / 2039e9;
  EXPECT_NEAR(e.step_seconds, compute + optimizer, 1e-9);
  EXPECT_NEAR(e.mfu, 3 * fwd_per_token * s / (e.step_seconds * 312e12), 1e-12);
  EXPECT_DOUBLE_EQ(e.samples_per_s, 1 / e.step_seconds);
  EXPECT_DOUBLE_EQ(e.tokens_per_s, 2048 / e.step_seconds);
}

TEST(CostModel, DeadlockedProgramsAreReportedNotHung) {
  const ModelSpec m = load_model(kData + "tiny-mlp.toml");
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 2);
  Plan plan = resolve(parse_plan("pp=2,microbatches=2"), m, 2);
  std::vector<StepProgram> programs = {build_step(m, plan, 0), build_step(m, plan, 1)};
  // Stage 0 sends its first activation to itself: stage 1 takes the second one as the first
  // (messages between a pair match in order, as in Gloo and NCCL) and then waits forever.
  auto& ops0 = programs[0].ops;
  for (auto& op : ops0)
    if (op.kind == OpKind::kSend) {
      op.peer = 0;  // sent to itself instead
      break;
    }
  try {
    walk_programs(programs, m, c);
    FAIL() << "no deadlock reported";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 waits in recv act.mb1.vs1 16 B from 0"), std::string::npos) << e.what();
  }
}

}  // namespace parlab::strategy
