// Faults: parsing, a straggler, and a stopped rank reported as the hang it causes.
#include <gtest/gtest.h>

#include "sim/simulate.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::resolved;

std::string rejected_field(const std::string& spec) {
  try {
    parse_fault(spec);
  } catch (const ConfigError& e) {
    return e.field();
  }
  return "(accepted)";
}

TEST(Faults, ParseAndPrintBack) {
  const Fault s = parse_fault("slow:rank=3,factor=3");
  EXPECT_EQ(s.kind, FaultKind::kSlow);
  EXPECT_EQ(s.rank, 3);
  EXPECT_DOUBLE_EQ(s.factor, 3);
  const Fault d = parse_fault("degrade-link: rank=2, factor=10, link=nic");
  EXPECT_EQ(d.kind, FaultKind::kDegradeLink);
  EXPECT_EQ(d.link, LinkSide::kNic);
  const Fault t = parse_fault("stop:rank=1,step=2,op=5");
  EXPECT_EQ(t.kind, FaultKind::kStop);
  EXPECT_EQ(t.step, 2);
  EXPECT_EQ(t.op, 5);
  for (const auto& f : {s, d, t}) EXPECT_EQ(to_string(parse_fault(to_string(f))), to_string(f));
}

TEST(Faults, BadSpecsNameTheKey) {
  EXPECT_EQ(rejected_field("slow"), "--fault");
  EXPECT_EQ(rejected_field("melt:rank=1"), "--fault");
  EXPECT_EQ(rejected_field("slow:rank=1"), "--fault slow.factor");
  EXPECT_EQ(rejected_field("slow:rank=x,factor=2"), "--fault slow.rank");
  EXPECT_EQ(rejected_field("slow:rank=1,factor=-2"), "--fault slow.factor");
  EXPECT_EQ(rejected_field("stop:rank=1"), "--fault stop.step");
  EXPECT_EQ(rejected_field("stop:rank=1,step=1,factor=2"), "--fault stop.factor");
  EXPECT_EQ(rejected_field("degrade-link:rank=1,factor=2,link=pcie"), "--fault degrade-link.link");
  EXPECT_THROW(validate({parse_fault("slow:rank=4,factor=2")}, 4), ConfigError);
}

TEST(Faults, FromAnExperimentFile) {
  const auto faults = parse_faults_toml(R"(
name = "straggler and a dead rank"
[[fault]]
kind = "slow"
rank = 3
factor = 2.5
[[fault]]
kind = "stop"
rank = 1
step = 2
)",
                                        "exp.toml");
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(to_string(faults[0]), "slow:rank=3,factor=2.5");
  EXPECT_EQ(to_string(faults[1]), "stop:rank=1,step=2");
  EXPECT_THROW(parse_faults_toml("[[fault]]\nkind = \"slow\"\nrank = 1\n", "bad.toml"), ConfigError);
}

// A rank three times slower computes three times longer; the others wait for it in the
// gradient all-reduce, which shows as their exposed communication.
TEST(Faults, SlowRankComputesFactorTimesLonger) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 1024, 4096, 16, 64);
  const auto plan = resolved("dp=4", model, cluster, 4);
  SimOptions o;
  o.faults = {parse_fault("slow:rank=3,factor=3")};
  const auto healthy = simulate_plan(model, plan, cluster);
  const auto slow = simulate_plan(model, plan, cluster, o);
  EXPECT_NEAR(slow.ranks[3].compute_seconds, 3 * slow.ranks[0].compute_seconds, 1e-9);
  EXPECT_NEAR(slow.ranks[0].compute_seconds, healthy.ranks[0].compute_seconds, 1e-12);
  EXPECT_GT(slow.step_seconds, healthy.step_seconds + slow.ranks[0].compute_seconds);
  EXPECT_GT(slow.ranks[0].exposed_comm_seconds, healthy.ranks[0].exposed_comm_seconds);
}

// Rank 1 stops at step 1: ranks 0, 2, 3 reach the first gradient all-reduce of step 1 and wait
// for it forever. The simulator says so, naming the collective and the missing rank.
TEST(Faults, StoppedRankIsReportedAsTheCollectiveOthersWaitIn) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 1024, 4096, 16, 64);
  const auto plan = resolved("dp=4", model, cluster, 4);
  SimOptions o;
  o.faults = {parse_fault("stop:rank=1,step=1")};
  const auto r = simulate_plan(model, plan, cluster, o);
  ASSERT_TRUE(r.hang.deadlock);
  EXPECT_EQ(r.hang.stopped_ranks, std::vector<int>({1}));
  EXPECT_EQ(r.hang.missing_ranks, std::vector<int>({1}));
  EXPECT_EQ(r.measured_steps, 0);
  ASSERT_EQ(r.step_seconds_each.size(), 1u);  // the warm-up step completed
  int in_allreduce = 0;
  for (const auto& w : r.hang.waiting) {
    EXPECT_NE(w.rank, 1);
    if (w.stream != "comm") continue;
    ++in_allreduce;
    EXPECT_EQ(w.op, "all-reduce");
    EXPECT_EQ(w.group, "dp.0");
    EXPECT_EQ(w.call, 0);
    EXPECT_EQ(w.step, 1);
    EXPECT_EQ(w.tag.rfind("grad.bucket", 0), 0u) << w.tag;
    EXPECT_EQ(w.waiting_for, std::vector<int>({1}));
  }
  EXPECT_EQ(in_allreduce, 3);
  ASSERT_FALSE(r.hang.lines.empty());
  EXPECT_NE(r.hang.lines[0].find("missing: rank 1"), std::string::npos) << r.hang.lines[0];
}

// In a pipeline the first stage waits for the gradient the stopped last stage never sends.
TEST(Faults, StoppedStageLeavesItsNeighbourWaitingInARecv) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 256, 1024, 16, 16);
  const auto plan = resolved("pp=2,microbatches=2", model, cluster, 2);
  SimOptions o;
  o.warmup_steps = 0;
  o.faults = {parse_fault("stop:rank=1,step=0")};
  const auto r = simulate_plan(model, plan, cluster, o);
  ASSERT_TRUE(r.hang.deadlock);
  bool recv = false;
  for (const auto& w : r.hang.waiting)
    if (w.rank == 0 && w.op == "recv") {
      recv = true;
      EXPECT_EQ(w.waiting_for, std::vector<int>({1}));
    }
  EXPECT_TRUE(recv);
  EXPECT_EQ(r.hang.missing_ranks, std::vector<int>({1}));
}

// The lab's failure: one rank skips a gradient all-reduce (here its first becomes a no-op). Its
// next call meets the others' first one with a different size -- a collective library cannot
// tell, so everybody hangs. The simulator names the mismatch and the odd rank out.
TEST(Faults, SkippedCollectiveHangsAndNamesTheOddRank) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 1024, 4096, 16, 64);
  auto programs = build_programs(model, resolved("dp=4", model, cluster, 4));
  for (auto& op : programs[2].ops)
    if (op.kind == strategy::OpKind::kAllReduce) {
      op.kind = strategy::OpKind::kForward;  // no FLOPs: a no-op on the comm stream
      op.flops = 0;
      break;
    }
  SimOptions o;
  o.warmup_steps = 0;
  const auto r = simulate_programs(programs, model, cluster, o);
  ASSERT_TRUE(r.hang.deadlock);
  EXPECT_TRUE(r.hang.stopped_ranks.empty());
  EXPECT_EQ(r.hang.missing_ranks, std::vector<int>({2}));
  ASSERT_EQ(r.hang.mismatches.size(), 1u);
  const std::string& m = r.hang.mismatches[0];
  EXPECT_NE(m.find("group dp.0 call #0"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 0, 1, 3 called all-reduce grad.bucket0"), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2 called all-reduce grad.bucket1"), std::string::npos) << m;
}

}  // namespace
}  // namespace parlab::sim
