// Each ledger category as its formula with the numbers in (explain_ledger), and the scaling
// lab's t_W likewise (explain_scaling): the text comes from the pass that computes the number,
// so every explained value equals compute_ledger's, and the formula ends in that value.
#include <gtest/gtest.h>

#include "strategy/io.h"
#include "strategy/ledger.h"
#include "strategy/scaling_lab.h"
#include "base/units.h"

namespace parlab::strategy {
namespace {

struct Case {
  std::string model, cluster, plan;
  int world;
};

ExplainedLedger explain(const Case& c, int rank, MemoryLedger* computed) {
  const ModelSpec m = load_model(c.model);
  const ClusterSpec cl = with_world(load_cluster(c.cluster), c.world);
  const Plan p = resolve(parse_plan(c.plan), m, c.world);
  validate(p, m, cl);
  *computed = compute_ledger(m, m.layer_list(), p, cl, rank);
  return explain_ledger(m, m.layer_list(), p, cl, rank);
}

TEST(LedgerExplain, EveryCategoryIsTheLedgersNumberWithItsFormula) {
  const Case cases[] = {
      {"lab-mlp", "cpu-local", "zero=1", 4},
      {"lab-mlp", "cpu-local", "zero=3,precision=mixed", 4},
      {"lab-mlp", "cpu-local", "tp=2", 2},
      {"gpt-175b", "dgx-a100", "tp=8,pp=8,zero=1", 1024},
      {"gpt-175b", "dgx-a100", "tp=8,pp=16,schedule=interleaved,v=2,microbatches=64", 1024},
      {"llama2-7b", "dgx-a100", "zero=3", 8},
  };
  for (const Case& c : cases) {
    MemoryLedger L;
    const ExplainedLedger e = explain(c, 0, &L);
    SCOPED_TRACE(c.model + " " + c.plan);
    ASSERT_EQ(e.terms.size(), 5u);
    const double want[5] = {L.params_bytes, L.grads_bytes, L.optimizer_bytes, L.activations_bytes, L.temp_bytes};
    const char* names[5] = {"parameters", "gradients", "optimizer", "activations", "temporary"};
    double sum = 0;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(e.terms[size_t(i)].category, names[i]);
      EXPECT_DOUBLE_EQ(e.terms[size_t(i)].bytes, want[i]) << e.terms[size_t(i)].formula;
      const std::string tail = "= " + units::format_bytes(want[i]);
      EXPECT_EQ(e.terms[size_t(i)].formula.rfind(names[i], 0), 0u) << e.terms[size_t(i)].formula;
      EXPECT_TRUE(e.terms[size_t(i)].formula.ends_with(tail)) << e.terms[size_t(i)].formula << " vs " << tail;
      sum += e.terms[size_t(i)].bytes;
    }
    EXPECT_DOUBLE_EQ(sum, L.total_bytes());
    EXPECT_DOUBLE_EQ(e.ledger.total_bytes(), L.total_bytes());
  }
}

TEST(LedgerExplain, ZeroOneNamesTheShardAndTheCount) {
  MemoryLedger L;
  const ExplainedLedger e = explain({"lab-mlp", "cpu-local", "zero=1", 4}, 0, &L);
  const std::string& opt = e.terms[2].formula;
  // fp32 AdamW: 8 B of moments per parameter, sharded 4 ways by ZeRO-1; gradients are not.
  EXPECT_NE(opt.find("optimizer = 8 B x " + units::format_count(L.params_held) + " params / 4 (ZeRO-1 over dp 4)"),
            std::string::npos)
      << opt;
  EXPECT_DOUBLE_EQ(L.optimizer_bytes, 8 * L.params_held / 4);
  EXPECT_EQ(e.terms[1].formula.find("ZeRO"), std::string::npos) << e.terms[1].formula;
  EXPECT_NE(e.terms[1].formula.find("gradients = 4 B x "), std::string::npos) << e.terms[1].formula;
}

TEST(ScalingExplain, TheSeedsTwoAndEightWorkerSteps) {
  const ScalingLabInputs in;
  const auto two = explain_scaling(in, 2);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_EQ(two[0], "t_1 = c 120 ms + o 0.3 ms = 120.3 ms");  // the chapter's table
  // The header's hand-checked example: t_2 = 125.695 ms, speedup 1.914.
  EXPECT_TRUE(two[1].ends_with("t_2 = 125.7 ms")) << two[1];
  EXPECT_NE(two[1].find("ring 2(2-1) x 0.183 ms"), std::string::npos) << two[1];
  EXPECT_NE(two[1].find("2(2-1)/2 x 2.00 MB"), std::string::npos) << two[1];
  EXPECT_NE(two[2].find("speedup = 2 x t_1 / t_2 = 1.91x"), std::string::npos) << two[2];
  const auto eight = explain_scaling(in, 8);
  const double eff = scaling_step_seconds(in, 1) / scaling_step_seconds(in, 8);
  char want[32];
  std::snprintf(want, sizeof want, "efficiency = t_1 / t_8 = %.3f", eff);
  EXPECT_NE(eight[2].find(want), std::string::npos) << eight[2];
  EXPECT_NE(eight[1].find("log2 8"), std::string::npos) << eight[1];
  EXPECT_TRUE(eight[1].ends_with("t_8 = 137.8 ms")) << eight[1];  // the chapter's table
}

}  // namespace
}  // namespace parlab::strategy
