// Collectives on uniform links against their alpha-beta closed forms, written out here:
//   ring all-reduce                    2(n-1) (a + S/(n B))
//   ring all-gather, reduce-scatter    (n-1) (a + S/(n B))
// and the schedules' traffic against the bus-bandwidth factors.
#include <gtest/gtest.h>

#include "sim/schedule.h"
#include "sim/simulate.h"
#include "strategy/collectives.h"
#include "strategy/io.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using strategy::CollectiveOp;
using testing::kUniformBytesPerS;
using testing::kUniformLatency;
using testing::uniform_cluster;

constexpr double kS = 64.0 * 1024 * 1024;
const ScheduleOptions kRing{.algorithm = AlgorithmChoice::kRing};

TEST(Collective, RingAllReduceMatchesAlphaBeta) {
  for (int n : {2, 3, 4, 8}) {
    const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, n, uniform_cluster(), kRing);
    const double expected = 2.0 * (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS));
    EXPECT_EQ(r.algorithm, "ring");
    EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << "n = " << n;
    // 2(n-1) steps of n messages.
    EXPECT_EQ(r.messages, 2 * (n - 1) * n);
  }
}

// Inside one NVLink node the ring runs under NCCL's protocols. 8 x H100 (dgx-h100, 369.9 GB/s
// achieved), by hand from NCCL's tuning constants:
//   1 MiB   LL      6.6 + 14 x 0.6 us + 1.75 MiB / (369.9 / 4 GB/s)  = 34.84 us
//   16 MiB  LL128   14 + 14 x 1.9 us + 1.75 x 16 MiB / (0.92 x 369.9) = 126.87 us
// A simulator that timed the ring's steps on the links alone (0.6 us + S/(8 B) each) would give
// 1 MiB in 13.4 us and 16 MiB in 87.8 us.
TEST(Collective, NvlinkRingTakesNcclProtocolTimes) {
  const auto c = strategy::with_world(strategy::load_cluster("dgx-h100"), 8);
  const double mib = 1024.0 * 1024;
  const auto small = simulate_collective(CollectiveOp::kAllReduce, mib, 8, c, kRing);
  EXPECT_EQ(small.protocol, "LL");
  const double ll = 15.0e-6 + 1.75 * mib / 92.475e9;
  EXPECT_NEAR(small.seconds, ll, 0.01 * ll);
  // Five coalesced calls with merged steps: five times one call (the protocol is one call's).
  const ScheduleOptions coalesce{.algorithm = AlgorithmChoice::kRing, .coalesce_calls = true, .merge_steps = true};
  const double ll128 = 40.6e-6 + 1.75 * 16 * mib / 340.308e9;
  const auto mid = simulate_collective(CollectiveOp::kAllReduce, 16 * mib, 8, c, kRing);
  EXPECT_EQ(mid.protocol, "LL128");
  EXPECT_NEAR(mid.seconds, ll128, 0.01 * ll128);
  const Layout layout = make_layout(c, 8);
  const std::vector<int> members = {0, 1, 2, 3, 4, 5, 6, 7};
  const Schedule five = collective_schedule(CollectiveOp::kAllReduce, 16 * mib, 5, members, layout, c, coalesce);
  double extra = 0;
  for (const auto& step : five.steps) extra += step.extra_seconds;
  // On idle links each (merged) step takes its link latency and its bytes at B; the rest is extra.
  const double links = double(five.steps.size()) * 0.6e-6 + 14 * 5 * 2 * mib / 369.9e9;
  EXPECT_NEAR(links + extra, 5 * ll128, 1e-3 * 5 * ll128);
}

TEST(Collective, RingAllGatherAndReduceScatterMatchAlphaBeta) {
  for (auto op : {CollectiveOp::kAllGather, CollectiveOp::kReduceScatter})
    for (int n : {2, 4, 8}) {
      const auto r = simulate_collective(op, kS, n, uniform_cluster(), kRing);
      const double expected = (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS));
      EXPECT_NEAR(r.seconds, expected, 0.01 * expected) << strategy::to_string(op) << " n = " << n;
    }
}

// A ring whose members sit on different nodes (one per node) crosses NICs of the same a and B:
// the same closed form.
TEST(Collective, RingAcrossNodesUsesTheNics) {
  const int n = 4;
  const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, n, uniform_cluster(1, n), kRing);
  const double expected = 2.0 * (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS));
  EXPECT_NEAR(r.seconds, expected, 0.01 * expected);
}

// The analytic tuner's two-level algorithm on 2 nodes of 4: rings of 4 inside the nodes on S,
// then rings of 2 across on S/4:
//   2(k-1)(a + S/(k B)) + 2(N-1)(a + S/(k N B)),  k = 4, N = 2.
TEST(Collective, HierarchicalMatchesTheTwoLevelFormula) {
  const int k = 4, N = 2;
  const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, k * N, uniform_cluster(k, N),
                                     {.algorithm = AlgorithmChoice::kAnalytic});
  EXPECT_EQ(r.algorithm, "hierarchical");
  const double expected = 2.0 * (k - 1) * (kUniformLatency + kS / (k * kUniformBytesPerS)) +
                          2.0 * (N - 1) * (kUniformLatency + kS / (k * N * kUniformBytesPerS));
  EXPECT_NEAR(r.seconds, expected, 0.01 * expected);
}

// With the analytic tuner's choice, large all-reduces take the ring and agree with
// collective_time() on one node; small ones take halving-doubling, whose 2 log2(n) latency
// steps match the tree formula's latency term.
TEST(Collective, AutoFollowsTheAnalyticTuner) {
  const auto big = simulate_collective(CollectiveOp::kAllReduce, kS, 8, uniform_cluster());
  EXPECT_EQ(big.algorithm, "ring");
  EXPECT_NEAR(big.seconds, big.analytic.seconds, 0.01 * big.analytic.seconds);
  const double small_bytes = 1024;
  const auto small = simulate_collective(CollectiveOp::kAllReduce, small_bytes, 8, uniform_cluster());
  EXPECT_EQ(small.algorithm, "halving-doubling");
  // 2 log2(8) = 6 steps; S/2 + S/4 + S/8 twice = 2 (7/8) S bytes through each link.
  const double expected = 6 * kUniformLatency + 2.0 * 7 / 8 * small_bytes / kUniformBytesPerS;
  EXPECT_NEAR(small.seconds, expected, 0.01 * expected);
}

// A host whose reduce-scatter and all-gather were calibrated on their own (LinkSpec::op_fit): each
// ring step takes the fit's latency and bandwidth where they are slower than the link's, as the
// analytic model does; faster fits and the all-reduce keep the link's (written out per step).
TEST(Collective, ReduceScatterAndAllGatherTakeTheirOwnFitWhereItIsSlower) {
  auto c = uniform_cluster();
  c.intra.reduce_scatter_latency_seconds = 30e-6, c.intra.reduce_scatter_bytes_per_s = 4e9;
  c.intra.all_gather_latency_seconds = 1e-6, c.intra.all_gather_bytes_per_s = 20e9;  // faster than the link
  const int n = 4;
  const auto rs = simulate_collective(CollectiveOp::kReduceScatter, kS, n, c, kRing);
  const double rs_fit = (n - 1) * (30e-6 + kS / (n * 4e9));
  EXPECT_NEAR(rs.seconds, rs_fit, 0.01 * rs_fit);
  EXPECT_NEAR(rs.analytic.seconds, rs_fit, 1e-9 * rs_fit);
  const double link = (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS));
  const auto ag = simulate_collective(CollectiveOp::kAllGather, kS, n, c, kRing);
  EXPECT_NEAR(ag.seconds, link, 0.01 * link);
  EXPECT_NEAR(ag.analytic.seconds, link, 1e-9 * link);
  const auto ar = simulate_collective(CollectiveOp::kAllReduce, kS, n, c, kRing);
  EXPECT_NEAR(ar.seconds, 2 * link, 0.01 * 2 * link);
}

// Every schedule puts exactly bus-bandwidth-factor x S bytes on each rank's links.
TEST(Collective, SchedulesMoveTheBusBytes) {
  const auto cluster = uniform_cluster(4, 2);
  const Layout layout = make_layout(cluster, 8);
  const std::vector<int> members = {0, 1, 2, 3, 4, 5, 6, 7};
  for (auto op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather})
    for (auto choice : {AlgorithmChoice::kRing, AlgorithmChoice::kTree}) {
      const Schedule s = collective_schedule(op, kS, 1, members, layout, cluster, {.algorithm = choice});
      for (double sent : sent_bytes(s, members))
        EXPECT_NEAR(sent, strategy::bus_bandwidth_factor(op, 8) * kS, 1e-6 * kS)
            << strategy::to_string(op) << " " << s.algorithm;
    }
}

// Two nodes of four: four channels, each leaving a node through a different member's NIC.
TEST(Collective, RingsAcrossNodesUseOneChannelPerNic) {
  const auto cluster = uniform_cluster(4, 2);
  const Layout layout = make_layout(cluster, 8);
  const Schedule s =
      collective_schedule(CollectiveOp::kAllReduce, kS, 1, {0, 1, 2, 3, 4, 5, 6, 7}, layout, cluster, kRing);
  EXPECT_EQ(s.channels, 4);
  std::set<int> exits;
  for (const auto& m : s.steps.front().messages)
    if (!layout.same_node(m.from, m.to) && layout.node_of(m.from) == 0) exits.insert(layout.nic_of(m.from));
  EXPECT_EQ(exits.size(), 4u);
}

// count back-to-back calls: coalesced into one call plus the other calls' latency, or run one by
// one; on idle links both take count x one call.
TEST(Collective, CoalescedCallsTakeCountTimesOneCall) {
  const auto cluster = uniform_cluster();
  const Layout layout = make_layout(cluster, 4);
  const std::vector<int> members = {0, 1, 2, 3};
  const ScheduleOptions coalesce{.algorithm = AlgorithmChoice::kRing, .coalesce_calls = true};
  const auto one = collective_schedule(CollectiveOp::kAllReduce, kS, 1, members, layout, cluster, kRing);
  const auto merged = collective_schedule(CollectiveOp::kAllReduce, kS, 5, members, layout, cluster, coalesce);
  const auto exact = collective_schedule(CollectiveOp::kAllReduce, kS, 5, members, layout, cluster, kRing);
  EXPECT_EQ(merged.repeat, 1);
  EXPECT_EQ(exact.repeat, 5);
  ASSERT_EQ(merged.steps.size(), one.steps.size());
  EXPECT_DOUBLE_EQ(merged.steps[0].messages[0].bytes, 5 * one.steps[0].messages[0].bytes);
  EXPECT_DOUBLE_EQ(merged.steps[0].extra_seconds, 4 * kUniformLatency);
}

// A ring's 2(n-1) identical steps merged into one step of 2(n-1) x the bytes plus 2(n-1) - 1
// latencies: n messages instead of 2(n-1) n, the same time on idle links.
TEST(Collective, MergedRingStepsTakeTheSameTime) {
  const int n = 8;
  const ScheduleOptions merged{.algorithm = AlgorithmChoice::kRing, .coalesce_calls = true, .merge_steps = true};
  const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, n, uniform_cluster(), merged);
  const double expected = 2.0 * (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS));
  EXPECT_NEAR(r.seconds, expected, 1e-6 * expected);
  EXPECT_EQ(r.messages, n);
  // Halving-doubling's steps differ (partners, sizes) except the reduce-scatter's last and the
  // all-gather's first (both exchange S/8 with the partner at distance 1): 6 steps become 5.
  const Layout layout = make_layout(uniform_cluster(), n);
  std::vector<int> members(n);
  for (int i = 0; i < n; ++i) members[i] = i;
  const auto hd = collective_schedule(CollectiveOp::kAllReduce, 1024, 1, members, layout, uniform_cluster(),
                                      {.algorithm = AlgorithmChoice::kTree, .merge_steps = true});
  EXPECT_EQ(hd.steps.size(), 5u);
}

// One rank's link at a tenth of its bandwidth: every ring step has a message out of it and one
// into it, so every step runs at B/10.
TEST(Collective, DegradedLinkPacesTheRing) {
  const int n = 4;
  const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, n, uniform_cluster(), kRing,
                                     {parse_fault("degrade-link:rank=2,factor=10")});
  const double expected = 2.0 * (n - 1) * (kUniformLatency + kS / (n * kUniformBytesPerS / 10));
  EXPECT_NEAR(r.seconds, expected, 0.01 * expected);
}

TEST(Collective, IdealLinksTakeNoTime) {
  const auto r = simulate_collective(CollectiveOp::kAllReduce, kS, 8, strategy::load_cluster("ideal"));
  EXPECT_LT(r.seconds, 1e-12);
}

}  // namespace
}  // namespace parlab::sim
