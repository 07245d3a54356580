// Collectives that share links slow each other down; those that share none do not, and are
// timed in closed form (sim/executor.h) to the same result SimGrid's flows give.
//
// Max-min fair sharing by hand, on one switch of uniform links (B = 10 GB/s, a = 10 us, the
// latency on the sender's link only): a 2-rank ring all-reduce of S, its 2 identical steps merged
// (the default), is one exchange of S each way plus one more latency:
//   alone        2a + S/B
//   A = {0, 1} and B = {0, 2} at once: rank 0's up link carries 0->1 and 0->2, its down link
//   1->0 and 2->0, so all four flows get B/2:      2a + 2S/B each
#include <gtest/gtest.h>

#include "sim/simulate.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using strategy::Op;
using strategy::OpKind;
using strategy::Stream;
using testing::kUniformBytesPerS;
using testing::kUniformFlopsPerS;
using testing::kUniformLatency;

constexpr double kS = 64.0 * 1024 * 1024;

// World of 5: all-reduces of S on A = {0, 1} (rank 0's compute stream), B = {0, 2} (its comm
// stream) and C = {3, 4}. Rank 2 first computes for `b_delay` seconds, then joins B.
std::vector<strategy::StepProgram> three_groups(double b_delay) {
  strategy::Plan plan;
  plan.dp = 5;
  plan.microbatches = 1;
  plan.microbatch = 1;
  plan.global_batch = 5;
  const strategy::Group a{strategy::GroupKind::kWorld, "a", {0, 1}};
  const strategy::Group b{strategy::GroupKind::kWorld, "b", {0, 2}};
  const strategy::Group c{strategy::GroupKind::kWorld, "c", {3, 4}};
  auto all_reduce = [](int group, Stream stream, std::string tag) {
    Op op;
    op.kind = OpKind::kAllReduce;
    op.stream = stream;
    op.group = group;
    op.bytes = kS;
    op.tag = std::move(tag);
    return op;
  };
  std::vector<strategy::StepProgram> programs(5);
  for (int r = 0; r < 5; ++r) {
    programs[r].rank = r;
    programs[r].world = 5;
    programs[r].plan = plan;
  }
  programs[0].groups = {a, b};
  programs[0].ops = {all_reduce(0, Stream::kCompute, "a"), all_reduce(1, Stream::kComm, "b")};
  programs[1].groups = {a};
  programs[1].ops = {all_reduce(0, Stream::kCompute, "a")};
  programs[2].groups = {b};
  Op wait;
  wait.kind = OpKind::kForward;
  wait.flops = b_delay * kUniformFlopsPerS;
  wait.tag = "delay";
  programs[2].ops = {wait, all_reduce(0, Stream::kComm, "b")};
  programs[2].ops[1].id = 1;
  programs[2].ops[1].deps = {0};
  for (int r : {3, 4}) {
    programs[r].groups = {c};
    programs[r].ops = {all_reduce(0, Stream::kComm, "c")};
  }
  for (auto& p : programs)
    for (size_t i = 0; i < p.ops.size(); ++i) p.ops[i].id = int(i);
  return programs;
}

// Collective intervals of the run, by group name.
std::map<std::string, std::pair<double, double>> intervals(const SimResult& r) {
  std::map<std::string, std::pair<double, double>> out;
  for (const auto& c : r.collectives) out[c.group] = {c.start_seconds, c.end_seconds};
  return out;
}

SimResult run(double b_delay, bool closed_form, bool merge = true) {
  SimOptions o;
  o.warmup_steps = 0;
  o.closed_form = closed_form;
  o.coalesce_calls = o.merge_steps = merge;
  o.detail_ranks = {0, 1, 2, 3, 4};
  return simulate_programs(three_groups(b_delay), testing::mlp(1, 16, 16, 2, 1), testing::uniform_cluster(), o);
}

TEST(Contention, GroupsSharingALinkGetHalfItEach) {
  const double a = kUniformLatency, B = kUniformBytesPerS;
  for (bool closed_form : {true, false}) {
    const auto r = run(0, closed_form);
    const auto t = intervals(r);
    ASSERT_EQ(t.size(), 3u);
    EXPECT_NEAR(t.at("a").second - t.at("a").first, 2 * a + 2 * kS / B, 1e-9) << "closed form " << closed_form;
    EXPECT_NEAR(t.at("b").second - t.at("b").first, 2 * a + 2 * kS / B, 1e-9) << "closed form " << closed_form;
    // C shares no link with anyone: the lone time, in closed form when that is allowed.
    EXPECT_NEAR(t.at("c").second - t.at("c").first, 2 * a + kS / B, 1e-9) << "closed form " << closed_form;
    if (closed_form) {
      EXPECT_GE(r.closed_form_steps, 1);
      // A or B started in closed form and the other preempted it; only C stayed off SimGrid.
      EXPECT_EQ(r.flows, 4);
    } else {
      EXPECT_EQ(r.closed_form_steps, 0);
      EXPECT_EQ(r.flows, 6);
    }
  }
  // Step by step (2 steps of S/2, all four flows at B/2 in each): 2 (a + (S/2)/(B/2)), the same.
  const auto exact = intervals(run(0, false, false));
  EXPECT_NEAR(exact.at("a").second - exact.at("a").first, 2 * a + 2 * kS / B, 1e-9);
}

// B joins when A has moved for a while: A alone at B from its latency until B's flows are past
// theirs (T0 + a), then all four flows at B/2 until A's are done; B finishes alone at B.
//   A moves T0 B alone, its last S - T0 B at B/2:     A ends at T0 + a + 2 (S - T0 B)/B + a
//   B has moved S - T0 B by then, the last T0 B at B:  B ends at a + 2S/B + a
// A starts in closed form and B's first flows preempt it mid-transfer: the hand-over must keep
// what A moved alone.
TEST(Contention, ALateGroupSlowsTheOneAlreadyRunning) {
  const double a = kUniformLatency, B = kUniformBytesPerS, t0 = 2e-3;
  for (bool closed_form : {true, false}) {
    const auto r = run(t0, closed_form);
    const auto t = intervals(r);
    EXPECT_NEAR(t.at("a").first, 0, 1e-12);
    EXPECT_NEAR(t.at("a").second, t0 + a + 2 * (kS - t0 * B) / B + a, 1e-9) << "closed form " << closed_form;
    EXPECT_NEAR(t.at("b").first, t0, 1e-12);
    EXPECT_NEAR(t.at("b").second, a + 2 * kS / B + a, 1e-9) << "closed form " << closed_form;
    if (closed_form) {
      EXPECT_EQ(r.preempted_steps, 1);
    }
  }
}

// Alone on their links, the closed form gives what SimGrid's flows give, for every algorithm,
// across nodes, with a degraded link. Rings with several channels put more than one message on
// a link in a step (the closed form does not share bandwidth): they stay flows.
TEST(Contention, ClosedFormMatchesFlowsWhenAlone) {
  const auto two_nodes = testing::uniform_cluster(4, 2);
  const auto eight_nodes = testing::uniform_cluster(1, 8);
  struct Case {
    strategy::CollectiveOp op;
    double bytes;
    const strategy::ClusterSpec* cluster;
    AlgorithmChoice algorithm;
    std::vector<Fault> faults;
    bool closed = true;  // the closed form applies
  };
  const std::vector<Case> cases = {
      {strategy::CollectiveOp::kAllReduce, kS, &eight_nodes, AlgorithmChoice::kRing, {}},
      {strategy::CollectiveOp::kAllReduce, 1024, &two_nodes, AlgorithmChoice::kTree, {}},
      {strategy::CollectiveOp::kAllReduce, kS, &two_nodes, AlgorithmChoice::kAnalytic, {}},
      {strategy::CollectiveOp::kAllGather, kS, &two_nodes, AlgorithmChoice::kAnalytic, {}},
      {strategy::CollectiveOp::kBroadcast, kS, &two_nodes, AlgorithmChoice::kAuto, {}},
      {strategy::CollectiveOp::kReduceScatter,
       kS,
       &eight_nodes,
       AlgorithmChoice::kRing,
       {parse_fault("degrade-link:rank=2,factor=10")}},
      {strategy::CollectiveOp::kAllReduce, kS, &two_nodes, AlgorithmChoice::kRing, {}, false},  // 4 channels
  };
  for (const auto& c : cases) {
    const auto flows = simulate_collective(c.op, c.bytes, 8, *c.cluster, {.algorithm = c.algorithm}, c.faults, false);
    const auto closed = simulate_collective(c.op, c.bytes, 8, *c.cluster, {.algorithm = c.algorithm}, c.faults, true);
    const std::string what = std::string(strategy::to_string(c.op)) + " " + flows.algorithm;
    EXPECT_NEAR(closed.seconds, flows.seconds, 1e-9 * flows.seconds) << what;
    EXPECT_EQ(closed.messages, flows.messages) << what;
    EXPECT_EQ(flows.flows, flows.messages) << what;
    EXPECT_EQ(closed.flows, c.closed ? 0 : closed.messages) << what;
  }
}

// Plans mixing TP, PP sends and DP rings on two nodes: sends preempt the collectives they meet
// (in the first plan), and the step comes out as with every message a flow. Tolerance: SimGrid
// ends a flow when what remains is below its precision, ~1e-10 s here per collective.
TEST(Contention, ClosedFormPlanMatchesFlows) {
  const auto cluster = testing::uniform_cluster(4, 2);
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  int64_t preempted = 0;
  for (const char* text :
       {"tp=2,pp=2,dp=2,microbatches=4", "pp=2,dp=4,zero=1,microbatches=2", "tp=2,dp=4,zero=3,microbatches=2"}) {
    const auto plan = testing::resolved(text, model, cluster, 8);
    SimOptions flows;
    flows.closed_form = false;
    const auto a = simulate_plan(model, plan, cluster);
    const auto b = simulate_plan(model, plan, cluster, flows);
    EXPECT_NEAR(a.step_seconds, b.step_seconds, 1e-6 * b.step_seconds) << text;
    for (size_t r = 0; r < a.ranks.size(); ++r)
      EXPECT_NEAR(a.ranks[r].exposed_comm_seconds, b.ranks[r].exposed_comm_seconds, 1e-6 * b.step_seconds) << text;
    EXPECT_LT(a.flows, b.flows) << text;
    EXPECT_EQ(b.closed_form_steps, 0) << text;
    preempted += a.preempted_steps;
  }
  EXPECT_GT(preempted, 0);
}

}  // namespace
}  // namespace parlab::sim
