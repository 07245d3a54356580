// TP symmetry (sim/symmetry.h): simulating position 0 of each TP group gives every rank's result
// to the last bit where the conditions hold, and every rank is simulated where one fails.
#include <gtest/gtest.h>

#include <string>

#include "sim/simulate.h"
#include "sim/symmetry.h"
#include "tests/sim/sim_test_util.h"
#include "strategy/io.h"

namespace parlab::sim {
namespace {

using testing::resolved;

// Whole SimResults, as bytes (every key, every rank, the timeline), with and without symmetry;
// and the replicated run did simulate 1/tp of the ranks (its progress says so).
void expect_same_with_and_without(const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                                  const std::string& text, int world) {
  const auto plan = resolved(text, model, cluster, world);
  const auto programs = build_programs(model, plan);
  const auto sized = strategy::with_world(cluster, world);
  ASSERT_EQ(tp_symmetry(programs, sized, {}, {}).replicas, plan.tp)
      << text << ": " << tp_symmetry(programs, sized, {}, {}).reason;
  // Without a timeline simulate_plan builds position 0's programs only (simulate_symmetric); with
  // one it builds every program and replicates the raw run (execute_symmetric).
  for (const bool timeline : {false, true}) {
    SimOptions o;
    o.steps = 2;
    o.timeline = timeline;
    std::string said;
    o.on_progress = [&](double, std::string_view what) {
      if (what.find("TP positions") != std::string_view::npos) said = what;
    };
    const SimResult fast = simulate_plan(model, plan, cluster, o);
    o.tp_symmetry = false;
    o.on_progress = nullptr;
    const SimResult every = simulate_plan(model, plan, cluster, o);
    EXPECT_GT(fast.step_seconds, 0) << text;
    ASSERT_EQ(fast.ranks.size(), size_t(world)) << text;
    EXPECT_EQ(serialize(fast), serialize(every)) << text << " timeline " << timeline;
    EXPECT_EQ(to_json(fast).dump(), to_json(every).dump()) << text;
    EXPECT_EQ(said, "simulating " + std::to_string(world / plan.tp) + " of " + std::to_string(world) +
                        " ranks: the other TP positions are their replicas")
        << text;
  }
}

TEST(Symmetry, PositionZeroStandsForEveryPositionBitForBit) {
  const auto cluster = testing::uniform_cluster(4, 8);
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  for (const char* text :
       {"tp=4,pp=2,dp=4,microbatches=4", "tp=4,dp=8,zero=3,microbatches=2", "tp=4,pp=4,dp=2,zero=1,microbatches=8",
        "tp=4,dp=8,zero=2,microbatches=2", "tp=4,pp=2,dp=4,microbatches=4,schedule=gpipe"})
    expect_same_with_and_without(model, cluster, text, 32);
}

TEST(Symmetry, ATransformerOnDgxNodesBitForBit) {
  const auto cluster = strategy::load_cluster("dgx-a100");
  const auto model = strategy::load_model("gpt-22b");
  expect_same_with_and_without(model, cluster, "tp=8,pp=2,dp=2,mb=1,gbs=16,sp=on,recompute=selective", 32);
  expect_same_with_and_without(model, cluster, "tp=8,dp=4,zero=3,mb=1,gbs=8,precision=mixed", 32);
}

// Each failed condition keeps every rank simulated, and says which.
TEST(Symmetry, EveryRankIsSimulatedWhereAConditionFails) {
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  const auto wide = testing::uniform_cluster(8, 4);
  const auto plan = resolved("tp=4,pp=2,dp=4,microbatches=4", model, wide, 32);
  const auto programs = build_programs(model, plan);
  const auto sized = strategy::with_world(wide, 32);
  // Two TP groups per node: their DP traffic crosses NVLink links the TP collectives claim.
  EXPECT_EQ(tp_symmetry(programs, sized, {}, {}).replicas, 1);
  EXPECT_NE(tp_symmetry(programs, sized, {}, {}).reason.find("two ranks in one node"), std::string::npos);

  const auto cluster = testing::uniform_cluster(4, 8);
  auto fitted = build_programs(model, resolved("tp=4,pp=2,dp=4,microbatches=4", model, cluster, 32));
  const auto fitted_cluster = strategy::with_world(cluster, 32);
  ASSERT_EQ(tp_symmetry(fitted, fitted_cluster, {}, {}).replicas, 4);
  EXPECT_EQ(tp_symmetry(fitted, fitted_cluster, {parse_fault("slow:rank=5,factor=2")}, {}).replicas, 1);
  ExecOptions flows;
  flows.closed_form = false;
  EXPECT_EQ(tp_symmetry(fitted, fitted_cluster, {}, flows).replicas, 1);
  // One position's program does more work than its position 0's.
  fitted[6].ops[1].flops += 1e6;
  const Symmetry edited = tp_symmetry(fitted, fitted_cluster, {}, {});
  EXPECT_EQ(edited.replicas, 1);
  EXPECT_EQ(edited.reason, "rank 6's program is not its TP position 0's");
}

// Ranks sharing cores (cpu-local) compete for them, so no rank stands for another.
TEST(Symmetry, SharedCoresAreNotSymmetric) {
  const auto cluster = strategy::load_cluster("cpu-local");
  const auto model = testing::mlp(4, 256, 1024, 16, 16);
  const auto plan = resolved("tp=2,dp=2", model, cluster, 4);
  const Symmetry s = tp_symmetry(build_programs(model, plan), strategy::with_world(cluster, 4), {}, {});
  EXPECT_EQ(s.replicas, 1);
  EXPECT_FALSE(s.reason.empty());
}

}  // namespace
}  // namespace parlab::sim
