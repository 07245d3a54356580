// Data and tensor parallelism in the simulator: overlap, ZeRO-3 traffic, coalesced TP calls,
// oversubscribed CPU cores.
#include <gtest/gtest.h>

#include "sim/simulate.h"
#include "strategy/collectives.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/step_program.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::resolved;
using testing::timed_from_start;

using strategy::OpKind;

// The same programs with every gradient all-reduce waiting for the last backward op: DDP
// without overlap.
std::vector<strategy::StepProgram> without_overlap(std::vector<strategy::StepProgram> programs) {
  for (auto& p : programs) {
    int last_backward = -1;
    for (const auto& op : p.ops)
      if (op.kind == OpKind::kBackward) last_backward = op.id;
    for (auto& op : p.ops)
      if (op.kind == OpKind::kAllReduce) op.deps.push_back(last_backward);
  }
  return programs;
}

TEST(DataParallel, OverlapIsNeverSlowerThanNoOverlap) {
  const auto cluster = testing::uniform_cluster();
  const int h = 1024, f = 4096, layers = 8;
  for (int mb : {16, 64, 512}) {
    const auto model = testing::mlp(layers, h, f, 16, mb);
    const auto plan = resolved("dp=4", model, cluster, 4);
    const auto programs = build_programs(model, plan);
    const auto overlap = simulate_programs(programs, model, cluster);
    const auto serial = simulate_programs(without_overlap(programs), model, cluster);
    EXPECT_LE(overlap.step_seconds, serial.step_seconds * (1 + 1e-12)) << "mb " << mb;
    EXPECT_LE(overlap.ranks[0].exposed_comm_seconds, serial.ranks[0].exposed_comm_seconds * (1 + 1e-12));
    // Without overlap the whole backward comes before the first all-reduce; with it, all but the
    // last layer's backward (the first bucket's) can hide under communication or vice versa.
    const double layer_backward = 2.0 * mb * 4.0 * h * f / testing::kUniformFlopsPerS;
    EXPECT_GT(serial.step_seconds - overlap.step_seconds, 0.5 * (layers - 1) * std::min(layer_backward, 1e-3))
        << "mb " << mb;
  }
}

// ZeRO-3 gathers the parameters before forward and backward and reduce-scatters the gradients:
// 3 x (n-1)/n x the parameter bytes per rank against DDP's all-reduce 2 (n-1)/n: 1.5x.
TEST(DataParallel, ZeroThreeMovesOneAndAHalfTimesDdpBytes) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 512, 2048, 16, 32);
  auto bus_bytes = [](const strategy::StepProgram& p) {
    double sum = 0;
    for (const auto& op : p.ops)
      if (op.is_collective())
        sum += op.bytes * op.count *
               strategy::bus_bandwidth_factor(strategy::collective_of(op.kind), p.group_of(op).size());
    return sum;
  };
  const auto ddp_plan = resolved("dp=4,microbatches=1", model, cluster, 4);
  const auto z3_plan = resolved("dp=4,zero=3,microbatches=1", model, cluster, 4);
  // ZeRO's layers and buckets lie unevenly across the shards: each collective's busiest link
  // carries S - c_min (strategy::ring_link_bytes), and the simulator's ring moves that on every
  // link.
  auto busiest_link_bytes = [](const strategy::StepProgram& p) {
    double sum = 0;
    for (const auto& op : p.ops)
      if (op.is_collective())
        sum += op.count * strategy::ring_link_bytes(strategy::collective_of(op.kind), op.bytes, p.group_of(op).size(),
                                                    op.min_chunk_bytes);
    return sum;
  };
  const auto ddp = simulate_plan(model, ddp_plan, cluster);
  const auto z3 = simulate_plan(model, z3_plan, cluster);
  for (int r = 0; r < 4; ++r) {
    const double ddp_bus = bus_bytes(strategy::build_step(model, ddp_plan, r));
    const double z3_bus = bus_bytes(strategy::build_step(model, z3_plan, r));
    EXPECT_NEAR(z3_bus / ddp_bus, 1.5, 1e-9);
    // What the simulator put on each rank's links: DDP's bus bytes exactly; ZeRO-3's busiest
    // links' bytes, more than its bus bytes (here about 2x DDP's: most of its calls have an empty
    // chunk, so their busiest link carries all S).
    const double z3_busiest = busiest_link_bytes(strategy::build_step(model, z3_plan, r));
    EXPECT_GT(z3_busiest, z3_bus);
    EXPECT_NEAR(ddp.sent_bytes[r], ddp_bus, 1e-6 * ddp_bus);
    EXPECT_NEAR(z3.sent_bytes[r], z3_busiest, 1e-6 * z3_busiest);
  }
}

// One ZeRO all-gather or reduce-scatter of S bytes on n ranks of the uniform cluster, alone in
// the step, with the chunks' smallest `min_chunk_bytes` (-1: balanced).
double one_collective_step(OpKind kind, double bytes, int n, double min_chunk_bytes) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(2, 64, 256, 16, 8);
  strategy::Group group{strategy::GroupKind::kDP, "dp.0", {}};
  for (int r = 0; r < n; ++r) group.ranks.push_back(r);
  std::vector<strategy::StepProgram> programs(n);
  for (int r = 0; r < n; ++r) {
    auto& p = programs[r];
    p.rank = r;
    p.world = n;
    p.plan = resolved("dp=" + std::to_string(n), model, cluster, n);
    p.groups = {group};
    strategy::Op op;
    op.kind = kind;
    op.stream = strategy::Stream::kComm;
    op.group = 0;
    op.bytes = bytes;
    op.min_chunk_bytes = min_chunk_bytes;
    op.tag = "param.layer";
    p.ops.push_back(op);
  }
  return simulate_programs(programs, model, cluster).step_seconds;
}

// A layer wholly in one rank's ZeRO shard is gathered as a broadcast from it: every other rank
// must receive all S bytes, S/B plus the ring's (n-1) latencies, where the balanced ring moves
// (n-1)/n S (strategy::ring_link_bytes). The analytic model says the same; balanced calls are
// priced as before.
TEST(DataParallel, UnevenZeroCollectivesTakeTheirBusiestLink) {
  const double S = 64.0 * 1024 * 1024, a = testing::kUniformLatency, B = testing::kUniformBytesPerS;
  const auto cluster = strategy::with_world(testing::uniform_cluster(), 4);
  for (OpKind kind : {OpKind::kAllGather, OpKind::kReduceScatter}) {
    const auto op = strategy::collective_of(kind);
    struct Case {
      int n;
      double min_chunk, expected;
    };
    for (const Case& c : {Case{2, 0, a + S / B}, Case{2, -1, a + S / (2 * B)}, Case{2, S / 4, a + 0.75 * S / B},
                          Case{4, 0, 3 * a + S / B}, Case{4, -1, 3 * (a + S / (4 * B))}}) {
      const double simulated = one_collective_step(kind, S, c.n, c.min_chunk);
      EXPECT_NEAR(simulated, c.expected, 0.01 * c.expected)
          << strategy::to_string(op) << " n " << c.n << " min " << c.min_chunk;
      std::vector<int> ranks;
      for (int r = 0; r < c.n; ++r) ranks.push_back(r);
      EXPECT_NEAR(strategy::collective_time(op, S, ranks, cluster, c.min_chunk).seconds, c.expected, 1e-12)
          << strategy::to_string(op) << " n " << c.n << " min " << c.min_chunk;
    }
  }
}

// A TP plan's collectives with count > 1 and the rings' identical steps: coalesced and merged
// (the default) or call by call and step by step. With only TP traffic the links carry one
// collective at a time and both take the same time, with fewer simulated messages. With DP
// all-reduces sharing the NVLink links with TP collectives, step-by-step synchronisation makes a
// small difference (ScheduleOptions): within 1% here.
TEST(TensorParallel, CoalescedCallsAgreeWithExactCalls) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(8, 1024, 4096, 16, 64);
  SimOptions exact;
  exact.coalesce_calls = false;
  exact.merge_steps = false;
  for (const auto& [text, tolerance] :
       {std::pair{"tp=8,microbatches=2", 1e-9}, std::pair{"tp=4,dp=2,microbatches=2", 0.01}}) {
    const auto plan = resolved(text, model, cluster, 8);
    const auto a = simulate_plan(model, plan, cluster);
    const auto b = simulate_plan(model, plan, cluster, exact);
    EXPECT_NEAR(a.step_seconds, b.step_seconds, tolerance * b.step_seconds) << text;
    for (size_t r = 0; r < a.ranks.size(); ++r)
      EXPECT_NEAR(a.ranks[r].exposed_comm_seconds, b.ranks[r].exposed_comm_seconds, tolerance * b.step_seconds) << text;
    EXPECT_LT(a.messages, b.messages) << text;
  }
}

// Four ranks in one group: a forward, `calls` collectives on the group right after it (the
// shape sequence parallelism writes per layer: reduce-scatter, all-gather, ...), then a forward
// that needs the last of them.
std::vector<strategy::StepProgram> run_of_collectives(const strategy::ModelSpec& model,
                                                      const strategy::ClusterSpec& cluster, int calls, double bytes) {
  const int n = 4;
  strategy::Group group{strategy::GroupKind::kTP, "tp.0", {0, 1, 2, 3}};
  std::vector<strategy::StepProgram> programs(n);
  for (int r = 0; r < n; ++r) {
    auto& p = programs[r];
    p.rank = r;
    p.world = n;
    p.plan = resolved("tp=4", model, cluster, n);
    p.groups = {group};
    auto add = [&](strategy::Op op) {
      op.id = int(p.ops.size());
      p.ops.push_back(std::move(op));
    };
    strategy::Op fwd;
    fwd.kind = OpKind::kForward;
    fwd.flops = 1e9;
    fwd.tag = "first";
    add(fwd);
    for (int k = 0; k < calls; ++k) {
      strategy::Op c;
      c.kind = k % 2 == 0 ? OpKind::kReduceScatter : OpKind::kAllGather;
      c.group = 0;
      c.bytes = bytes;
      c.tag = "c" + std::to_string(k);
      c.deps = {0};
      add(c);
    }
    fwd.tag = "last";
    fwd.deps = {calls};
    add(fwd);
  }
  return programs;
}

// The simulator drives such a run as one meeting of the members (sim/executor.cpp, next_call):
// every call still gets its own record, back to back, each as long as the collective alone.
TEST(TensorParallel, ARunOfCollectivesTimesEveryCall) {
  const auto cluster = testing::uniform_cluster(4);
  const auto model = testing::mlp(4, 1024, 4096, 16, 64);
  const double bytes = 8e6;
  const int calls = 6;
  SimOptions o;
  o.warmup_steps = 0;
  o.timeline = true;
  const auto r = simulate_programs(run_of_collectives(model, cluster, calls, bytes), model, cluster, o);
  ASSERT_FALSE(r.hang.deadlock);
  const double rs =
      simulate_collective(strategy::CollectiveOp::kReduceScatter, bytes, 4, cluster, {}, {}, true).seconds;
  const double ag = simulate_collective(strategy::CollectiveOp::kAllGather, bytes, 4, cluster, {}, {}, true).seconds;
  ASSERT_GT(rs, 0);
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<const trace::Event*> ops;
    for (const auto& e : r.timeline)
      if (e.rank == rank) ops.push_back(&e);
    ASSERT_EQ(ops.size(), size_t(calls + 2));
    EXPECT_NEAR(ops[0]->end_seconds, 1e-3, 1e-12);  // 1e9 FLOPs at 1 TFLOP/s
    for (int k = 1; k <= calls; ++k) {
      EXPECT_DOUBLE_EQ(ops[k]->start_seconds, ops[k - 1]->end_seconds) << "rank " << rank << " call " << k;
      EXPECT_NEAR(ops[k]->end_seconds - ops[k]->start_seconds, k % 2 == 1 ? rs : ag, 1e-12)
          << "rank " << rank << " call " << k;
    }
    EXPECT_DOUBLE_EQ(ops[calls + 1]->start_seconds, ops[calls]->end_seconds);
  }
}

// A member that calls something else in the middle of a run ends the run there; the mismatch is
// reported as it is for lone calls.
TEST(TensorParallel, ARunStopsWhereAMemberCallsSomethingElse) {
  const auto cluster = testing::uniform_cluster(4);
  const auto model = testing::mlp(4, 1024, 4096, 16, 64);
  auto programs = run_of_collectives(model, cluster, 6, 8e6);
  programs[2].ops[3].bytes = 4e6;  // rank 2's third call of the run differs
  SimOptions o;
  o.warmup_steps = 0;
  const auto r = simulate_programs(programs, model, cluster, o);
  ASSERT_TRUE(r.hang.deadlock);
  EXPECT_EQ(r.hang.missing_ranks, std::vector<int>({2}));
  ASSERT_EQ(r.hang.mismatches.size(), 1u);
  EXPECT_NE(r.hang.mismatches[0].find("group tp.0 call #2"), std::string::npos) << r.hang.mismatches[0];
  EXPECT_EQ(r.ops, 4 * 3);  // the forward and the two calls before the mismatch, on every rank
}

// On one switch with uniform links every collective is a ring (or the tuner's tree on both
// sides), so the simulation and the analytic walk agree.
TEST(DataParallel, AgreesWithTheAnalyticWalkOnOneNode) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(8, 1024, 4096, 16, 256);
  for (const char* text : {"dp=8", "dp=8,zero=1", "dp=4,tp=2", "dp=2,pp=2,tp=2,microbatches=4"}) {
    const auto plan = resolved(text, model, cluster, 8);
    const auto sim = simulate_plan(model, plan, cluster);
    const auto est = strategy::estimate_step(model, plan, strategy::with_world(cluster, 8));
    EXPECT_NEAR(sim.step_seconds, est.step_seconds, 0.01 * est.step_seconds) << text;
  }
}

// cpu-local: ranks share cores_per_node = 2 cores of one host. Four ranks computing at once get
// half a core each, so an op takes twice as long as with two ranks (one core each). Lab MLP
// forward of one microbatch of 64: 8 blocks x 4 h f + 2 h C FLOPs per sample at 0.05 TFLOP/s.
TEST(CpuLocal, FourRanksOnTwoCoresComputeAtHalfSpeed) {
  const auto cluster = strategy::load_cluster("cpu-local");
  const auto model = strategy::load_model("lab-mlp");
  const double forward_flops = 64.0 * (8 * 4.0 * 1024 * 4096 + 2.0 * 1024 * 16);
  const double core = cluster.device.peak_flops_fp32 * cluster.device.gemm_efficiency;
  double seconds[2] = {0, 0};
  int i = 0;
  for (int world : {2, 4}) {
    const auto r = timed_from_start(model, resolved("dp=" + std::to_string(world), model, cluster, world), cluster);
    for (const auto& e : r.timeline)
      if (e.rank == 0 && e.name == "forward fwd.mb0.c0") seconds[i] = e.end_seconds - e.start_seconds;
    ++i;
  }
  EXPECT_NEAR(seconds[0], forward_flops / core, 1e-9 * seconds[0]);
  EXPECT_NEAR(seconds[1], 2 * forward_flops / core, 1e-9 * seconds[1]);
}

// Two ranks of lab-mlp on the two cores of a cpu-local host, communication costing no CPU (the
// walk alone, no CPU-demand bound), warm-up left out: `plan` resolved on it.
struct FilledCores {
  strategy::ClusterSpec cluster = [] {
    auto c = strategy::with_world(strategy::load_cluster("cpu-local"), 2);
    c.comm_cpu_seconds_per_byte = 0;
    return c;
  }();
  strategy::ModelSpec model = strategy::load_model("lab-mlp");
  strategy::Plan plan;
  SimOptions o;
  explicit FilledCores(const std::string& text) : plan(resolved(text, model, cluster, 2)) { o.warmup_steps = 0; }
};

// Four ranks on the two cores of a cpu-local host, communication costing no CPU (the walk alone,
// no CPU-demand bound).
strategy::ClusterSpec four_ranks_on_two_cores() {
  auto c = strategy::with_world(strategy::load_cluster("cpu-local"), 4);
  c.comm_cpu_seconds_per_byte = 0;
  return c;
}

// A gradient sync whose meeting has more ranks than the host has cores takes turns with compute,
// in the simulator as in the cost model (strategy::overlaps_compute_on): DDP on four ranks of two
// cores exposes every all-reduce (the simulated step is the analytic one), and where the cores
// hold the whole group the buckets overlap the backward again.
TEST(CpuLocal, MeetingsOfMoreRanksThanCoresTakeTurnsWithCompute) {
  const auto cluster = four_ranks_on_two_cores();
  ASSERT_GT(cluster.devices_per_node, cluster.cores_per_node);
  const auto model = strategy::load_model("lab-mlp");
  const auto plan = resolved("dp=4,gbs=256,bucket_mb=4", model, cluster, 4);
  SimOptions o;
  o.warmup_steps = 0;
  const auto filled = simulate_plan(model, plan, cluster, o);
  const auto analytic = strategy::estimate_step(model, plan, cluster, false);
  EXPECT_NEAR(filled.step_seconds, analytic.step_seconds, 1e-6 * analytic.step_seconds);
  EXPECT_NEAR(filled.ranks[0].exposed_comm_seconds, analytic.ranks[0].exposed_comm_seconds,
              1e-6 * analytic.step_seconds);
  auto spare = cluster;
  spare.cores_per_node = 4;
  const auto overlapped = simulate_plan(model, plan, spare, o);
  EXPECT_LT(overlapped.step_seconds, filled.step_seconds);
  EXPECT_LT(overlapped.ranks[0].exposed_comm_seconds, 0.9 * filled.ranks[0].exposed_comm_seconds);
}

// Only the meeting's own ranks count (strategy::overlaps_compute_on): under PP 2 x DP 2 on four
// ranks of two cores each stage's DP pair fits the cores, so stage 0's bucket all-reduces run
// beside its last backward (a trace of fresh58, stop 59: they ended 3 ms after it, where taking
// turns priced 18 ms after it), in the simulator as in the walk. DDP on two ranks of two cores
// overlaps too.
TEST(CpuLocal, DataParallelPairsOverlapComputeBesideTheOtherRanks) {
  const auto cluster = four_ranks_on_two_cores();
  ASSERT_GT(cluster.devices_per_node, cluster.cores_per_node);
  const auto model = strategy::load_model("lab-mlp");
  const auto first_sync_before_last_backward_ends = [&](const strategy::Plan& plan, const strategy::ClusterSpec& c) {
    const auto r = timed_from_start(model, plan, c);
    double last_backward_end = 0, first_all_reduce = 1e30;
    for (const auto& e : r.timeline) {
      if (e.rank != 0) continue;
      if (e.name.rfind("backward", 0) == 0) last_backward_end = std::max(last_backward_end, e.end_seconds);
      if (e.name.rfind("all-reduce", 0) == 0) first_all_reduce = std::min(first_all_reduce, e.start_seconds);
    }
    EXPECT_LT(first_all_reduce, 1e30) << "an all-reduce ran";
    // The walk's rank 0 as well.
    const auto analytic = strategy::estimate_step(model, plan, c);
    const auto program = strategy::build_step(model, plan, 0);
    double walk_backward_end = 0, walk_all_reduce = 1e30;
    for (const auto& t : analytic.timeline) {
      if (t.rank != 0) continue;
      const auto kind = program.ops.at(t.op_id).kind;
      if (kind == strategy::OpKind::kBackward) walk_backward_end = std::max(walk_backward_end, t.end_seconds);
      if (kind == strategy::OpKind::kAllReduce) walk_all_reduce = std::min(walk_all_reduce, t.start_seconds);
    }
    EXPECT_LT(walk_all_reduce, walk_backward_end) << "the walk";
    return first_all_reduce < last_backward_end;
  };
  EXPECT_TRUE(first_sync_before_last_backward_ends(
      resolved("pp=2,dp=2,schedule=1f1b,gbs=256,mb=32,bucket_mb=4", model, cluster, 4), cluster));
  const auto two = FilledCores("dp=2,gbs=256,bucket_mb=4");
  EXPECT_TRUE(first_sync_before_last_backward_ends(two.plan, two.cluster));
}

// ZeRO-2's gradient reduce-scatters read the buckets where they lie (Op::overlaps_compute): on filled
// cores they overlap the later microbatches in the simulator as in the cost model (the same step
// without a CPU cost per byte), where taking turns would expose every one of them.
TEST(CpuLocal, Zero2ReduceScattersOverlapComputeOnFilledCores) {
  FilledCores k("zero=2,gbs=256,mb=32,bucket_mb=4");
  k.o.timeline = true;
  const auto& [cluster, model, plan, o] = k;
  const auto r = simulate_plan(model, plan, cluster, o);
  const auto analytic = strategy::estimate_step(model, plan, cluster, false);
  EXPECT_NEAR(r.step_seconds, analytic.step_seconds, 1e-6 * analytic.step_seconds);
  double last_backward_start = 0, overlapped = 0, reduce_scatters = 0;
  for (const auto& e : r.timeline)
    if (e.rank == 0 && e.name.rfind("backward", 0) == 0)
      last_backward_start = std::max(last_backward_start, e.start_seconds);
  for (const auto& e : r.timeline) {
    if (e.rank != 0 || e.name.rfind("reduce-scatter", 0) != 0) continue;
    reduce_scatters += e.end_seconds - e.start_seconds;
    if (e.end_seconds <= last_backward_start) overlapped += e.end_seconds - e.start_seconds;
  }
  ASSERT_GT(reduce_scatters, 0);
  EXPECT_GT(overlapped, 0.5 * reduce_scatters) << "the earlier microbatches' buckets overlap the later backwards";
  EXPECT_LT(r.ranks[0].exposed_comm_seconds, 0.5 * reduce_scatters + 1e-9);
}

// Where the ranks outnumber the cores, ZeRO-2's reduce-scatters take turns with compute as every
// other collective does (strategy::overlaps_compute_on): each meeting needs every rank's
// communication thread on a core while the compute threads hold them all. None ends before the
// last backward starts, and every one is exposed, in the simulator as in the cost model.
TEST(CpuLocal, Zero2ReduceScattersTakeTurnsWhereRanksOutnumberTheCores) {
  const auto cluster = four_ranks_on_two_cores();
  ASSERT_GT(cluster.devices_per_node, cluster.cores_per_node);
  const auto model = strategy::load_model("lab-mlp");
  const auto plan = resolved("zero=2,gbs=256,mb=32,bucket_mb=4", model, cluster, 4);
  const auto r = timed_from_start(model, plan, cluster);
  const auto analytic = strategy::estimate_step(model, plan, cluster, false);
  EXPECT_NEAR(r.step_seconds, analytic.step_seconds, 0.02 * analytic.step_seconds);
  std::vector<std::pair<double, double>> backwards;
  for (const auto& e : r.timeline)
    if (e.rank == 0 && e.name.rfind("backward", 0) == 0) backwards.emplace_back(e.start_seconds, e.end_seconds);
  double reduce_scatters = 0, beside_a_backward = 0;
  for (const auto& e : r.timeline) {
    if (e.rank != 0 || e.name.rfind("reduce-scatter", 0) != 0) continue;
    reduce_scatters += e.end_seconds - e.start_seconds;
    for (const auto& [b0, b1] : backwards)
      beside_a_backward += std::max(0.0, std::min(b1, e.end_seconds) - std::max(b0, e.start_seconds));
  }
  ASSERT_GT(backwards.size(), 0u);
  ASSERT_GT(reduce_scatters, 0);
  EXPECT_LT(beside_a_backward, 1e-9) << "a reduce-scatter ran beside a backward";
  EXPECT_GE(r.ranks[0].exposed_comm_seconds, reduce_scatters * (1 - 1e-6));
  EXPECT_GE(analytic.ranks[0].exposed_comm_seconds, reduce_scatters * 0.98);
}

// Over loopback TCP every byte sent costs CPU on the cores the ranks compute on. Two ranks on two
// cores: a step cannot take less than the CPU work of both ranks (their compute plus their
// communication's CPU) spread over the two cores.
TEST(CpuLocal, CommunicationCpuCompetesWithCompute) {
  auto cluster = strategy::load_cluster("cpu-local");
  const auto model = strategy::load_model("lab-mlp");
  const auto plan = resolved("dp=2", model, cluster, 2);
  SimOptions o;
  o.warmup_steps = 0;
  const auto free_comm = simulate_plan(model, plan, cluster, o);
  cluster.comm_cpu_seconds_per_byte = 2e-9;  // 0.5 GB/s of copying per core
  const auto costly = simulate_plan(model, plan, cluster, o);
  // Each rank sends 2 (n-1)/n x the gradient bytes = all of them for n = 2 (fp32: 4 per parameter).
  const double comm_cpu = model.total_params() * 4 * 2e-9;
  const double compute = free_comm.ranks[0].compute_seconds;  // one core each: the full-core time
  EXPECT_GE(costly.step_seconds, (2 * compute + 2 * comm_cpu) / 2 * (1 - 1e-6));
  EXPECT_GT(costly.step_seconds, free_comm.step_seconds + 0.5 * comm_cpu);
}

}  // namespace
}  // namespace parlab::sim
