// docs/validation.md is what the code predicts today (parlab validate), and the predictions meet
// the goals where the issue sets them against published figures: the simulated 8-GPU NVLink
// ring all-reduce within 10% of nccl-tests' plateau, the ledger's activations within 3% of
// Korthikanti et al.'s formulas. The Megatron step times (Table 5) are reported in the document
// with their error; the comparison with the committed file catches any change to them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parlab/source_dir.h"
#include "sim/simulate.h"
#include "sim/validation.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"

namespace parlab::sim {
namespace {

namespace fs = std::filesystem;

TEST(Validation, DocumentIsCurrent) {
  std::ifstream in(fs::path(PARLAB_SOURCE_DIR) / "docs" / "validation.md");
  ASSERT_TRUE(in) << "docs/validation.md is missing: parlab validate > docs/validation.md";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), validation_markdown())
      << "docs/validation.md is stale: regenerate it with parlab validate > docs/validation.md";
}

// 1 GiB .. 8 GiB on 8 GPUs of dgx-h100 (nccl-tests: ~370 GB/s) and dgx-a100 (~240 GB/s). At line
// rate (no protocol efficiency) the simulator gave 447 GB/s on H100, 21% high.
TEST(Validation, NvlinkAllReduceBusbwWithinTenPercentOfNcclTests) {
  int compared = 0;
  for (const BusbwRow& r : busbw_rows()) {
    if (r.published_busbw <= 0) continue;
    ++compared;
    EXPECT_LT(std::fabs(r.error()), 0.10) << r.cluster << " " << r.bytes << " B: " << r.simulated_busbw / 1e9 << " GB/s";
  }
  EXPECT_EQ(compared, 8);
}

// Every size of the all-reduce table, 1 MiB .. 8 GiB: the simulated ring (SimGrid steps plus
// NCCL's protocol time per step) agrees with the cost model's closed form within 1%, and small
// messages take LL, large ones Simple, as NCCL's tuner picks. Fails if the simulator dropped the
// protocol's step or base latency (1 MiB would run 2.6x faster) or timed every size as Simple.
TEST(Validation, SimulatedRingAgreesWithTheProtocolModelAtEverySize) {
  for (const BusbwRow& r : busbw_rows()) {
    EXPECT_NEAR(r.simulated_busbw, r.analytic_busbw, 0.01 * r.analytic_busbw) << r.cluster << " " << r.bytes << " B";
    if (r.bytes <= 1024.0 * 1024) {
      EXPECT_EQ(r.protocol, "LL") << r.cluster;
    }
    if (r.bytes >= 1024.0 * 1024 * 1024) {
      EXPECT_EQ(r.protocol, "Simple") << r.cluster;
    }
  }
}

TEST(Validation, ActivationMemoryWithinThreePercentOfThePaper) {
  for (const ActivationRow& r : activation_rows()) {
    EXPECT_LT(std::fabs(r.error()), 0.03) << r.model << " " << r.variant;
    // The ledger counts everything the formula counts, plus the embedding (and logits): never less.
    EXPECT_GE(r.ledger_bytes, r.paper_bytes) << r.model << " " << r.variant;
  }
}


// The simulator times compute ops with the cost model's wave-quantized GEMMs, so the two agree on
// a Table 5-style plan (gpt-22b, tp 8 on one DGX A100 node), and both differ from the plain-rate
// time by more than the tolerance: the agreement would fail if the simulator skipped the waves.
TEST(Validation, SimulatorAndCostModelTimeGemmsWithTheSameWaves) {
  const strategy::ModelSpec m = strategy::load_model("gpt-22b");
  const strategy::ClusterSpec c = strategy::with_world(strategy::load_cluster("dgx-a100"), 8);
  strategy::Plan plan = strategy::resolve(strategy::parse_plan("tp=8,gbs=1,mb=1,recompute=full"), m, 8);
  strategy::validate(plan, m, c);
  SimOptions o;
  o.warmup_steps = 0;
  o.steps = 1;
  const SimResult sim = simulate_plan(m, plan, c, o);
  const double analytic = strategy::estimate_step(m, plan, c, false).step_seconds;
  strategy::ClusterSpec flat = c;
  flat.device.sms = 0;
  const double plain = strategy::estimate_step(m, plan, flat, false).step_seconds;
  EXPECT_NEAR(sim.step_seconds, analytic, 0.01 * analytic);
  EXPECT_GT(analytic, 1.03 * plain);
}

}  // namespace
}  // namespace parlab::sim
