// The predictions docs/validation.md shows (tests/experiments/validation_doc_test.cpp holds the
// document to what the code predicts today) meet the goals where the issue sets them against
// published figures: the Megatron step times of Korthikanti et al. Table 5 within 5% on average,
// one layer within 10% of Table 4, the simulated 8-GPU NVLink ring all-reduce within 10% of
// nccl-tests' plateau, H100's protocol model per size against a held-out 4-GPU run (the held-out
// A100 runs are compared in the document), the ledger's activations within 3% of the paper's
// formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/simulate.h"
#include "sim/validation.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"

namespace parlab::sim {
namespace {

// The large-message plateaus, 1 GiB .. 8 GiB on 8 GPUs of dgx-h100 (nccl-tests: ~370 GB/s) and
// dgx-a100 (~240 GB/s): within 10%. At line rate (no protocol efficiency) the simulator gave
// 447 GB/s on H100, 21% high. Every held-out run is compared size by size: two A100 runs, which
// differ from the preset's measured run by up to 20% and 30% (docs/validation.md: real nodes differ
// that much from each other), compared and reported there, not held to a bound set from those
// figures; and the two H100 runs, below.
TEST(Validation, NvlinkAllReduceBusbwWithinTenPercentOfNcclTests) {
  int plateaus = 0;
  std::map<std::string, int> run_sizes;
  for (const BusbwRow& r : busbw_rows()) {
    if (!r.run.empty()) {
      EXPECT_GT(r.published_busbw, 0) << r.run << " " << r.bytes;
      ++run_sizes[r.run];
      continue;
    }
    if (r.published_busbw <= 0) continue;
    ++plateaus;
    EXPECT_EQ(r.ranks, 8);
    EXPECT_GE(r.bytes, 1024.0 * 1024 * 1024);
    EXPECT_LT(std::fabs(r.error()), 0.10)
        << r.cluster << " " << r.bytes << " B: " << r.simulated_busbw / 1e9 << " GB/s";
  }
  EXPECT_EQ(plateaus, 8);
  EXPECT_EQ(
      run_sizes,
      (std::map<std::string, int>{
          {"Galvatron", 11}, {"OCI BM.GPU4.8", 14}, {"nccl-collectives-bench", 14}, {"together-nccl-tests", 14}}));
}

// dgx-h100's protocol model per size against a held-out single-node 8-GPU ring (NCCL_ALGO=RING,
// NCCL 2.26.2, 1 MiB .. 8 GiB). The goal is 10% at every size; 11 of 14 are within it. Every Simple
// size (64 MiB and up) is within 3%: the latency and step count NCCL charges, and the plateau,
// hold at 8 GPUs. The misses are the launch-bound 1 MiB (+20%: the run's one thread takes 35 us
// even for 8 bytes) and 2-4 MiB (-18%, -14%), where NCCL's own LL128 latency on 8 GPUs (40.6 us)
// is nearly the run's whole call (42.0 us at 2 MiB). Fails if the plateau moved 3%, the Simple
// protocol lost its latency or bandwidth share, or the 8-GPU step count were the 4-GPU one.
TEST(Validation, H100ProtocolModelPerSizeAgainstAHeldOutEightGpuRingRun) {
  int sizes = 0, within = 0, simple = 0;
  for (const BusbwRow& r : busbw_rows()) {
    if (r.run != "together-nccl-tests") continue;
    ++sizes;
    EXPECT_EQ(r.cluster, "dgx-h100");
    EXPECT_EQ(r.ranks, 8);
    within += std::fabs(r.error()) <= 0.10 ? 1 : 0;
    if (r.protocol == "Simple") {
      ++simple;
      EXPECT_LT(std::fabs(r.error()), 0.03) << r.bytes << " B: " << r.simulated_busbw / 1e9 << " GB/s";
    }
  }
  EXPECT_EQ(sizes, 14);
  EXPECT_EQ(simple, 8);
  EXPECT_GE(within, 11);
}

// dgx-h100's NCCL protocol model per size against a run none of its figures came from: 4 GPUs
// of an H100 NVSwitch node, NCCL 2.29.2's ring, 1 MiB .. 8 GiB. The goal is 10% at every size;
// 13 of the 14 sizes are within it, 2 MiB is not (-12.5%: the run takes 30.3 us there, 4.3 us
// under the model's fastest protocol, LL128, whose line meets the run at 4 and 8 MiB within
// 1.1%). Fails if the protocols' latencies were dropped (1 MiB would run at the plateau's rate,
// 6x the run's), LL ran at the ring's full bandwidth (1 MiB +85%), or the plateau rose 1% (64 MiB
// past +10%).
TEST(Validation, H100ProtocolModelPerSizeAgainstAHeldOutFourGpuRun) {
  int sizes = 0, within = 0;
  for (const BusbwRow& r : busbw_rows()) {
    if (r.run != "nccl-collectives-bench") continue;
    ++sizes;
    EXPECT_EQ(r.cluster, "dgx-h100");
    EXPECT_EQ(r.ranks, 4);
    within += std::fabs(r.error()) <= 0.10 ? 1 : 0;
  }
  EXPECT_EQ(sizes, 14);
  EXPECT_GE(within, 13);
}

// Table 5 within the goals: mean absolute error <= 5%, worst <= 10%.
TEST(Validation, MegatronStepTimesWithinFivePercentOnAverage) {
  double sum = 0, worst = 0;
  const auto rows = table5_rows();
  ASSERT_EQ(rows.size(), 8u);
  for (const auto& r : rows) {
    sum += std::fabs(r.error());
    worst = std::max(worst, std::fabs(r.error()));
  }
  EXPECT_LE(sum / double(rows.size()), 0.05);
  EXPECT_LE(worst, 0.10);
}

// One layer of 22B against Table 4: every pass within 10%, and sequence parallelism's backward
// is the slowest-predicted (its overlapped collectives are synchronous in the programs): the
// re-gather all-gathers are part of it (without them the backward would be 0.8 ms shorter).
TEST(Validation, OneLayerWithinTenPercentOfTableFour) {
  const auto rows = layer_rows();
  ASSERT_EQ(rows.size(), 5u);
  for (const auto& r : rows) {
    EXPECT_LT(std::fabs(r.forward_error()), 0.10) << r.variant;
    EXPECT_LT(std::fabs(r.backward_error()), 0.10) << r.variant;
  }
  // "selective + sequence" minus "selective": the same compute but sequence-parallel regions and
  // 2 re-gathers, at least 2 x 100.7 MB all-gathers at <= 200 GB/s bus bandwidth (0.88 ms).
  const double regathers = 2 * 0.875 * 2048 * 4 * 6144 * 2 / 200e9 * 1e3;
  EXPECT_GT(rows[4].predicted_backward_ms, rows[3].predicted_backward_ms + 0.5 * regathers);
}

// Every size of the all-reduce table, 1 MiB .. 8 GiB: the simulated ring (SimGrid steps plus
// the protocol's time per step) agrees with the cost model's closed form within 1%. On dgx-h100
// small messages take LL, large ones Simple, as NCCL's tuner picks; dgx-a100 reproduces its
// measured curve at each measured size. Fails if the simulator dropped the protocol's step or
// base latency (1 MiB would run 2.6x faster), timed every size as Simple, or ignored the curve
// (16 MiB would run at the tuner's 169 GB/s instead of the measured 129.9).
TEST(Validation, SimulatedRingAgreesWithTheProtocolModelAtEverySize) {
  const auto a100 = strategy::load_cluster("dgx-a100");
  for (const BusbwRow& r : busbw_rows()) {
    EXPECT_NEAR(r.simulated_busbw, r.analytic_busbw, 0.01 * r.analytic_busbw) << r.cluster << " " << r.bytes << " B";
    if (r.cluster == "dgx-a100") {
      EXPECT_EQ(r.protocol, "measured");
      const auto& sizes = a100.intra.measured_sizes_bytes;
      const size_t i = size_t(std::find(sizes.begin(), sizes.end(), r.bytes) - sizes.begin());
      ASSERT_LT(i, sizes.size()) << r.bytes;
      EXPECT_NEAR(r.simulated_busbw, a100.intra.measured_all_reduce_busbw[i], 0.01 * r.simulated_busbw) << r.bytes;
      continue;
    }
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
