// The plan policy (strategy::resolve): each default is decided in one place and gives way to what
// the plan sets. These are the rules every entry point inherits (tests/gui/plan_entry_points_test
// resolves the same inputs through each of them).
#include <gtest/gtest.h>

#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/plan.h"

namespace parlab::strategy {
namespace {

Plan resolved(const std::string& text, const ModelSpec& m, int world) { return resolve(parse_plan(text), m, world); }

ModelSpec model_with_microbatch(int64_t mb) {
  ModelSpec m = load_model("lab-mlp");
  m.default_microbatch = mb;
  return m;
}

TEST(PlanPolicy, DefaultBatchIsTheSameOnOneTwoAndFourReplicas) {
  const ModelSpec m = model_with_microbatch(8);
  for (int w : {1, 2, 4}) {
    const Plan p = resolved("", m, w);
    EXPECT_EQ(p.global_batch, 32) << w << " workers";
    EXPECT_EQ(p.microbatch, 8);
    EXPECT_EQ(p.microbatches, 4 / w);
  }
  EXPECT_EQ(resolved("", m, 8).global_batch, 64);  // one microbatch per replica from 4 up
  EXPECT_EQ(default_global_batch(m, 4), 32);
  EXPECT_EQ(default_global_batch(m, 1024), 8 * 1024);
}

TEST(PlanPolicy, PipelineDefaultsToAMultipleOfItsStages) {
  const ModelSpec m = model_with_microbatch(4);
  EXPECT_EQ(default_microbatches(2, 4), 4);
  EXPECT_EQ(default_microbatches(16, 8), 8);
  const Plan p = resolved("pp=4", m, 8);  // dp 2: lcm(2, 4) / 2 = 2 microbatches, rounded up to 4
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.microbatches, 4);
  EXPECT_EQ(p.global_batch, 4 * 4 * 2);
}

// Issue 36's case: no microbatch was asked for, so the default microbatch (32) gives way to the
// set global batch: 64 samples over 4 replicas is 16 each, one microbatch of 16.
TEST(PlanPolicy, SetGlobalBatchPicksTheMicrobatch) {
  const ModelSpec m = model_with_microbatch(32);
  const Plan p = resolved("gbs=64", m, 4);
  EXPECT_EQ(p.microbatch, 16);
  EXPECT_EQ(p.microbatches, 1);
  EXPECT_EQ(p.global_batch, 64);
  // The largest microbatch up to the default that divides each replica's share: 96 / 2 = 48 -> 24.
  EXPECT_EQ(resolved("gbs=96", m, 2).microbatch, 24);
  // A set microbatch count decides it.
  const Plan q = resolved("gbs=64,microbatches=4", m, 2);
  EXPECT_EQ(q.microbatch, 8);
  // Under a pipeline the share is cut into a multiple of pp microbatches: 32 / 4 stages -> mb 8.
  const Plan r = resolved("gbs=32,pp=4", m, 4);
  EXPECT_EQ(r.microbatches % 4, 0);
  EXPECT_EQ(r.microbatch * r.microbatches, 32);
  // A set microbatch is kept, and a batch it cannot make is refused naming the rule.
  try {
    resolved("gbs=64,mb=32", m, 4);
    ADD_FAILURE() << "gbs=64 with mb=32 on 4 replicas must be refused";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "plan.gbs");
    EXPECT_NE(std::string(e.what()).find("mb * dp (32 * 4 = 128)"), std::string::npos) << e.what();
  }
}

TEST(PlanPolicy, ImpossibleBatchesAreRefusedNamingTheKey) {
  const ModelSpec m = model_with_microbatch(32);
  auto field_of = [&](const std::string& text, int world) {
    try {
      resolved(text, m, world);
    } catch (const ConfigError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(field_of("gbs=6", 4), "plan.gbs");                           // not a multiple of dp
  EXPECT_EQ(field_of("gbs=64,microbatches=3", 4), "plan.microbatches");  // 16 is not cut in 3
  EXPECT_EQ(field_of("gbs=6,pp=4", 4), "plan.gbs");                      // 6 samples make no 4 microbatches
}

TEST(PlanPolicy, GivenTextKeepsOnlyTheGivenKeysLaterWinning) {
  EXPECT_EQ(parse_plan("zero=3,gbs=64").given_text(), "zero=3,gbs=64");
  EXPECT_EQ(parse_plan("zero=3", parse_plan("gbs=64,zero=1")).given_text(), "zero=3,gbs=64");
  EXPECT_EQ(parse_plan("").given_text(), "");
  const Plan round = parse_plan(parse_plan("bucket_mb=4,tp=2,mb=8").given_text());
  EXPECT_EQ(round.tp, 2);
  EXPECT_EQ(round.microbatch, 8);
  EXPECT_DOUBLE_EQ(round.bucket_bytes, 4.0 * 1024 * 1024);
  EXPECT_EQ(round.given.size(), 3u);
}

}  // namespace
}  // namespace parlab::strategy
