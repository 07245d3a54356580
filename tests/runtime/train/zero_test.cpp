// What ZeRO must show beyond learning the same thing (equivalence_test.cpp): each rank really
// holds less, by the memory ledger's arithmetic, and moves exactly the bytes its step program
// says it moves.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/memory_report.h"
#include "strategy/ledger.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using model::MemoryCategory;
using testing::tiny_config;

struct RankResult {
  MemoryReport memory;
  int64_t temporary_now = 0;                     // temporary bytes held after the last step
  std::map<comm::OpKind, double> recorded_bytes;  // flight recorders, summed per collective kind
};

// `steps` steps on `world` threads, each rank reporting its memory and its recorders' bytes.
std::vector<RankResult> run(int world, const TrainConfig& config, int steps) {
  auto store = comm::make_in_process_store();
  std::vector<RankResult> out(world);
  comm::testing::run_rank_threads(world, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, world, go);
    Trainer trainer(config, *c, {});
    for (int s = 0; s < steps; ++s) trainer.step();
    out[r].memory = memory_report(trainer, strategy::load_cluster("cpu-local"));
    out[r].temporary_now = trainer.memory().current(MemoryCategory::kTemporary);
    for (const comm::Communicator* k : trainer.communicators())
      for (const comm::FlightRecord& e : k->flight_recorder().snapshot().entries) out[r].recorded_bytes[e.op] += e.bytes;
    sync.arrive_and_wait();
  });
  return out;
}

comm::OpKind comm_kind(strategy::OpKind k) {
  switch (k) {
    case strategy::OpKind::kAllReduce: return comm::OpKind::kAllReduce;
    case strategy::OpKind::kReduceScatter: return comm::OpKind::kReduceScatter;
    case strategy::OpKind::kAllGather: return comm::OpKind::kAllGather;
    case strategy::OpKind::kBroadcast: return comm::OpKind::kBroadcast;
    default: return comm::OpKind::kBarrier;
  }
}

class ZeroStageTest : public ::testing::TestWithParam<int> {};

// Parameters, gradients and optimizer state within 5% of the ledger, activations within 15%
// (4 workers, one microbatch per rank: the ledger's one microbatch in flight). The ledger is an
// independent computation: formulas over the model spec, never the runtime's buffers.
TEST_P(ZeroStageTest, EveryRankHoldsWhatTheLedgerPredicts) {
  const int zero = GetParam();
  const TrainConfig cfg = tiny_config("gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(zero), 4, 64,
                                      AdamWConfig{.lr = 1e-2});
  const auto ranks = run(4, cfg, 2);
  const int64_t n = model::ParamLayout(mlp_shape(cfg.model)).numel();
  for (const RankResult& rr : ranks) {
    const MemoryReport& m = rr.memory;
    for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer,
                             MemoryCategory::kActivations, MemoryCategory::kTemporary})
      std::printf("  zero=%d rank %d %-11s measured %8lld B, ledger %8.0f B\n", zero, m.rank,
                  std::string(model::to_string(c)).c_str(), static_cast<long long>(m.measured(c)), m.ledger(c));
    for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer}) {
      ASSERT_TRUE(m.deviation(c)) << model::to_string(c);
      EXPECT_LE(std::abs(*m.deviation(c)), 0.05) << "rank " << m.rank << " " << model::to_string(c) << ": measured "
                                                  << m.measured(c) << " B, ledger " << m.ledger(c) << " B";
    }
    ASSERT_TRUE(m.deviation(MemoryCategory::kActivations));
    EXPECT_LE(std::abs(*m.deviation(MemoryCategory::kActivations)), 0.15)
        << "rank " << m.rank << " activations: measured " << m.measured(MemoryCategory::kActivations) << " B, ledger "
        << m.ledger(MemoryCategory::kActivations) << " B";
    // The sharded categories are a quarter of the model (up to one element of rounding).
    const int64_t quarter = n * 4 / 4;
    if (zero >= 3) {
      EXPECT_LE(m.measured(MemoryCategory::kParameters), quarter + 4);
    }
    if (zero >= 2) {
      EXPECT_LE(m.measured(MemoryCategory::kGradients), quarter + 4);
    }
    if (zero >= 1) {
      EXPECT_LE(m.measured(MemoryCategory::kOptimizer), 2 * (quarter + 4));
    }
    // Between steps nothing of the step's buffers remains but the backward scratch (B x f).
    EXPECT_LE(rr.temporary_now, 4 * 64 * int64_t(sizeof(float)));
  }
}

// Sim and runtime agree on bytes: what every rank's flight recorders saw per collective kind is
// exactly what its step programs say, step after step.
TEST_P(ZeroStageTest, RecordedBytesPerCollectiveEqualTheProgramsExactly) {
  const int zero = GetParam();
  constexpr int kSteps = 3;
  for (int world : {2, 4}) {
    const TrainConfig cfg = tiny_config("gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(zero), world, 64);
    const auto ranks = run(world, cfg, kSteps);
    for (int r = 0; r < world; ++r) {
      std::map<comm::OpKind, double> expected;
      const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, r, {.per_layer_ops = true});
      for (const strategy::Op& op : p.ops)
        if (op.is_collective()) expected[comm_kind(op.kind)] += kSteps * op.bytes * op.count;
      EXPECT_EQ(ranks[r].recorded_bytes, expected) << "zero=" << zero << ", " << world << " workers, rank " << r;
      const auto bytes = [&](comm::OpKind k) { return expected.count(k) ? expected.at(k) : 0.0; };
      if (zero == 0) {
        EXPECT_GT(bytes(comm::OpKind::kAllReduce), 0);
      }
      if (zero >= 1) {
        EXPECT_GT(bytes(comm::OpKind::kReduceScatter), 0);
        EXPECT_GT(bytes(comm::OpKind::kAllGather), 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStageTest, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "zero" + std::to_string(info.param); });

}  // namespace
}  // namespace parlab::train
