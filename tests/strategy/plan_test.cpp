// Plan parsing, defaults and every validation rule, accepted and rejected.
#include <gtest/gtest.h>

#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/plan.h"

namespace parlab::strategy {
namespace {

// Resolves and validates a plan for `world` devices of dgx-a100.
Plan check(const std::string& text, const std::string& model, int world) {
  const ModelSpec m = load_model(model);
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), world);
  Plan p = resolve(parse_plan(text), m, world);
  validate(p, m, c);
  return p;
}

// The field a rejected plan names.
std::string rejected_field(const std::string& text, const std::string& model, int world) {
  try {
    check(text, model, world);
  } catch (const ConfigError& e) {
    return e.field();
  }
  return "(accepted)";
}

}  // namespace

TEST(Plan, ParsesEveryKey) {
  const Plan p = parse_plan(
      "dp=2,tp=4,pp=8,zero=1,mb=2,microbatches=16,schedule=interleaved,v=3,recompute=selective,"
      "sp=on,precision=fp32,optimizer=sgd,bucket_mb=50");
  EXPECT_EQ(p.dp, 2);
  EXPECT_EQ(p.tp, 4);
  EXPECT_EQ(p.pp, 8);
  EXPECT_EQ(p.zero, 1);
  EXPECT_EQ(p.microbatch, 2);
  EXPECT_EQ(p.microbatches, 16);
  EXPECT_EQ(p.schedule, Schedule::kInterleaved);
  EXPECT_EQ(p.v, 3);
  EXPECT_EQ(p.recompute, Recompute::kSelective);
  EXPECT_TRUE(p.sequence_parallel);
  EXPECT_EQ(p.precision, Precision::kFp32);
  EXPECT_EQ(p.optimizer, OptimizerKind::kSgd);
  EXPECT_DOUBLE_EQ(p.bucket_bytes, 50.0 * 1024 * 1024);
  // to_string() round-trips.
  const Plan q = parse_plan(p.to_string());
  EXPECT_EQ(q.to_string(), p.to_string());
}

TEST(Plan, MalformedInputNamesTheKey) {
  auto field_of = [](const std::string& text) {
    try {
      parse_plan(text);
    } catch (const ConfigError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(field_of("tp=two"), "plan.tp");
  EXPECT_EQ(field_of("tp=0"), "plan.tp");
  EXPECT_EQ(field_of("dp=-2"), "plan.dp");
  EXPECT_EQ(field_of("zero=4"), "plan.zero");
  EXPECT_EQ(field_of("schedule=zigzag"), "plan.schedule");
  EXPECT_EQ(field_of("warp=9"), "plan.warp");
  EXPECT_EQ(field_of("tp"), "plan");
  EXPECT_EQ(field_of("bucket_mb=0"), "plan.bucket_mb");
  EXPECT_EQ(field_of("mb="), "plan.mb");
  // A key given twice would let the last silently win; a blank item is a typo.
  EXPECT_EQ(field_of("dp=1,dp=2"), "plan.dp");
  EXPECT_EQ(field_of("dp=2,,tp=1"), "plan");
  EXPECT_EQ(field_of("dp=2,"), "plan");
  EXPECT_EQ(field_of(" dp=2 , tp=1 "), "(accepted)");
  // Degrees that would wrap when narrowed to int.
  EXPECT_EQ(field_of("dp=99999999999"), "plan.dp");
  EXPECT_EQ(field_of("dp=99999999999999999999999"), "plan.dp");
}

TEST(Plan, DefaultsFollowTheWorld) {
  const Plan p = check("tp=8,pp=4", "gpt-175b", 64);
  EXPECT_EQ(p.dp, 2);  // 64 / (8 * 4)
  EXPECT_EQ(p.microbatch, 1);
  // The plan policy: lcm(dp, 4) / dp = 2 microbatches per replica, rounded up to a multiple of
  // pp = 4 (a pipeline keeps its stages busy); gbs = 1 * 4 * 2.
  EXPECT_EQ(p.microbatches, 4);
  EXPECT_EQ(p.global_batch, 8);
  // gbs implies microbatches = gbs / (mb * dp) = 512 / (2 * 2).
  const Plan q = check("tp=8,pp=4,mb=2,gbs=512", "gpt-175b", 64);
  EXPECT_EQ(q.microbatches, 128);
  EXPECT_EQ(q.global_batch, 512);
  // Interleaved defaults to v = 2; the lab MLP to its preset microbatch and fp32.
  EXPECT_EQ(check("pp=4,schedule=interleaved,microbatches=8", "gpt-175b", 8).v, 2);
  const Plan lab = check("", "lab-mlp", 2);
  EXPECT_EQ(lab.microbatch, 64);
  EXPECT_EQ(lab.precision, Precision::kFp32);
  EXPECT_EQ(check("precision=mixed", "lab-mlp", 2).precision, Precision::kMixed);
}

TEST(Plan, RankLayoutIsTensorThenDataThenPipeline) {
  Plan p;
  p.dp = 2;
  p.tp = 4;
  p.pp = 3;
  // rank = tp + 4 * (dp + 2 * pp)
  EXPECT_EQ(rank_of(p, {1, 3, 2}), 3 + 4 * (1 + 2 * 2));
  const RankCoords c = coords_of(p, 19);  // 19 = 3 + 4 * (0 + 2 * 2)
  EXPECT_EQ(c.tp, 3);
  EXPECT_EQ(c.dp, 0);
  EXPECT_EQ(c.pp, 2);
  EXPECT_EQ(tp_group(p, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(dp_group(p, 5), (std::vector<int>{1, 5}));
  EXPECT_EQ(pp_group(p, 5), (std::vector<int>{5, 13, 21}));
}

TEST(Plan, ValidationRules) {
  // Each rule, accepted then rejected.
  EXPECT_EQ(rejected_field("dp=8", "gpt-175b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("dp=4", "gpt-175b", 8), "plan.dp*tp*pp");  // dp*tp*pp = world
  EXPECT_EQ(rejected_field("tp=3", "gpt-175b", 6), "plan.tp");        // heads 96 ok, ffn ok, vocab 51200 % 3
  EXPECT_EQ(rejected_field("tp=8", "gpt-175b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("tp=16", "llama2-70b", 16), "plan.tp");  // kv_heads 8
  EXPECT_EQ(rejected_field("tp=8", "llama2-70b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("tp=3", "lab-mlp", 3), "plan.tp");  // ffn 4096
  EXPECT_EQ(rejected_field("pp=8", "lab-mlp", 8), "(accepted)");
  EXPECT_EQ(rejected_field("pp=16", "lab-mlp", 16), "plan.pp");  // pp <= layers
  EXPECT_EQ(rejected_field("pp=4,schedule=interleaved,v=2,microbatches=8", "gpt-175b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("pp=4,schedule=interleaved,v=5,microbatches=8", "gpt-175b", 8), "plan.v");  // 96 % 20
  EXPECT_EQ(rejected_field("pp=4,schedule=interleaved,v=2,microbatches=6", "gpt-175b", 8), "plan.microbatches");
  EXPECT_EQ(rejected_field("pp=1,schedule=interleaved", "gpt-175b", 8), "plan.schedule");
  EXPECT_EQ(rejected_field("v=2", "gpt-175b", 8), "plan.v");
  EXPECT_EQ(rejected_field("pp=2,zero=1", "gpt-175b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("pp=2,zero=2", "gpt-175b", 8), "plan.zero");
  EXPECT_EQ(rejected_field("tp=8,sp=on", "gpt-175b", 8), "(accepted)");
  EXPECT_EQ(rejected_field("sp=on", "gpt-175b", 8), "plan.sp");          // needs tp > 1
  EXPECT_EQ(rejected_field("tp=2,sp=on", "lab-mlp", 2), "(accepted)");   // the MLP splits its batch rows
  EXPECT_EQ(rejected_field("mb=3,gbs=100", "gpt-175b", 8), "plan.gbs");  // 100 % 24
  EXPECT_EQ(rejected_field("mb=1,gbs=64,microbatches=3", "gpt-175b", 8), "plan.microbatches");
  EXPECT_EQ(rejected_field("tp=16", "gpt-175b", 8), "plan.tp*pp");  // 16 does not divide 8
}

TEST(Plan, RejectsASplitOfABareParameterCount) {
  const ModelSpec m = params_model(7.5e9);
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 8);
  const Plan p = resolve(parse_plan("tp=2"), m, 8);
  try {
    validate(p, m, c);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "plan.tp");
  }
  const Plan z = resolve(parse_plan("zero=3"), m, 8);
  EXPECT_NO_THROW(validate(z, m, c));
}

TEST(Plan, WorldMustFillNodes) {
  const ClusterSpec a100 = load_cluster("dgx-a100");
  EXPECT_EQ(with_world(a100, 4).devices(), 4);
  EXPECT_EQ(with_world(a100, 1024).nodes, 128);
  EXPECT_THROW(with_world(a100, 12), ConfigError);
  EXPECT_THROW(with_world(a100, 0), ConfigError);
}

TEST(Plan, ShortNames) {
  EXPECT_EQ(check("", "gpt-22b", 8).short_name(), "DDP x8");
  EXPECT_EQ(check("zero=3", "gpt-22b", 8).short_name(), "ZeRO-3 x8");
  EXPECT_EQ(check("tp=8", "gpt-22b", 8).short_name(), "TP 8");
  EXPECT_EQ(check("tp=8,pp=4,zero=1", "gpt-175b", 64).short_name(), "TP 8 x PP 4 x ZeRO-1 2");
  EXPECT_EQ(check("", "gpt-22b", 1).short_name(), "single device");
}

}  // namespace parlab::strategy
