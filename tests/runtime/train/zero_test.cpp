// What ZeRO must show beyond learning the same thing (equivalence_test.cpp): each rank really
// holds less, by the memory ledger's arithmetic, and moves exactly the bytes its step program
// says it moves.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "runtime/comm/flight_recorder.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/train/memory_report.h"
#include "strategy/ledger.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using model::MemoryCategory;
using testing::tiny_config;

struct RankResult {
  MemoryReport memory;
  int64_t temporary_now = 0;                      // temporary bytes held after the last step
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
      for (const comm::FlightRecord& e : k->flight_recorder().snapshot().entries)
        out[r].recorded_bytes[e.op] += e.bytes;
    sync.arrive_and_wait();
  });
  return out;
}

comm::OpKind comm_kind(strategy::OpKind k) {
  switch (k) {
    case strategy::OpKind::kAllReduce:
      return comm::OpKind::kAllReduce;
    case strategy::OpKind::kReduceScatter:
      return comm::OpKind::kReduceScatter;
    case strategy::OpKind::kAllGather:
      return comm::OpKind::kAllGather;
    case strategy::OpKind::kBroadcast:
      return comm::OpKind::kBroadcast;
    default:
      return comm::OpKind::kBarrier;
  }
}

// (ZeRO stage, precision): fp32, and mixed where this CPU has bf16 matmuls.
class ZeroStageTest : public ::testing::TestWithParam<std::tuple<int, std::string>> {
 protected:
  void SetUp() override {
    if (precision() == "mixed" && !compute::cpu::bf16_supported())
      GTEST_SKIP() << compute::cpu::bf16_unsupported_reason();
  }
  static int zero() { return std::get<0>(GetParam()); }
  static std::string precision() { return std::get<1>(GetParam()); }
  static std::string plan() {
    return "gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(zero()) + ",precision=" + precision();
  }
};

// Bytes a rank of 4 must hold per category, by hand from the shape (n parameters, w of them the
// blocks' weight matrices; the tiny model's n divides by 4, so shards are exact):
//   fp32    parameters 4n (ZeRO-3: 4n/4), gradients 4n (ZeRO-2/3: 4n/4), AdamW moments 8n (ZeRO-1+: 8n/4)
//   mixed   parameters = the bf16 weight copies 2 x 2w, W and W^T (ZeRO-3: none persist, they are
//           made from each gathered layer), gradients fp32 as above, optimizer = fp32 master 4n (ZeRO-3: 4n/4)
//           + moments as above
struct StateBytesByHand {
  int64_t params = 0, grads = 0, optimizer = 0;
};
StateBytesByHand by_hand(const model::MlpShape& s, int zero, bool mixed) {
  const int64_t n = model::ParamLayout(s).numel();
  const int64_t w = 2 * s.blocks * s.hidden * s.ffn;
  const int dp = 4;
  StateBytesByHand b;
  b.grads = 4 * n / (zero >= 2 ? dp : 1);
  const int64_t moments = 8 * n / (zero >= 1 ? dp : 1);
  if (mixed) {
    b.params = zero >= 3 ? 0 : 2 * 2 * w;
    b.optimizer = 4 * n / (zero >= 3 ? dp : 1) + moments;
  } else {
    b.params = 4 * n / (zero >= 3 ? dp : 1);
    b.optimizer = moments;
  }
  return b;
}

// Parameters, gradients and optimizer state exactly as the ledger says and as the hand count
// above says; activations within 15% in fp32 (the ledger leaves out labels and probabilities) and
// 5% under mixed (the peak falls at the last block's end, before the head's logits exist, which
// the ledger counts). 4 workers, one microbatch per rank: the ledger's one microbatch in flight.
// The ledger is an independent computation: formulas over the model spec, never the runtime's
// buffers.
TEST_P(ZeroStageTest, EveryRankHoldsWhatTheLedgerPredicts) {
  const int zero = ZeroStageTest::zero();
  const bool mixed = precision() == "mixed";
  const TrainConfig cfg = tiny_config(plan(), 4, 64, AdamWConfig{.lr = 1e-2});
  const auto ranks = run(4, cfg, 2);
  const model::MlpShape shape = mlp_shape(cfg.model);
  const StateBytesByHand hand = by_hand(shape, zero, mixed);
  for (const RankResult& rr : ranks) {
    const MemoryReport& m = rr.memory;
    for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer,
                             MemoryCategory::kActivations, MemoryCategory::kTemporary})
      std::printf("  %s zero=%d rank %d %-11s measured %8lld B, ledger %8.0f B\n", precision().c_str(), zero, m.rank,
                  std::string(model::to_string(c)).c_str(), static_cast<long long>(m.measured(c)), m.ledger(c));
    for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer})
      EXPECT_EQ(static_cast<double>(m.measured(c)), m.ledger(c)) << "rank " << m.rank << " " << model::to_string(c);
    EXPECT_EQ(m.measured(MemoryCategory::kParameters), hand.params) << "rank " << m.rank;
    EXPECT_EQ(m.measured(MemoryCategory::kGradients), hand.grads) << "rank " << m.rank;
    EXPECT_EQ(m.measured(MemoryCategory::kOptimizer), hand.optimizer) << "rank " << m.rank;
    ASSERT_TRUE(m.deviation(MemoryCategory::kActivations));
    EXPECT_LE(std::abs(*m.deviation(MemoryCategory::kActivations)), mixed ? 0.05 : 0.15)
        << "rank " << m.rank << " activations: measured " << m.measured(MemoryCategory::kActivations) << " B, ledger "
        << m.ledger(MemoryCategory::kActivations) << " B";
    // Between steps nothing of the step's buffers remains but the backward scratch (B x f), and
    // under mixed the forward's fp32 fc1 product (B x f) and the bf16 dy, dpre (B x (h + f)).
    const int64_t B = 4;
    const int64_t scratch = B * shape.ffn * 4 + (mixed ? B * shape.ffn * 4 + B * (shape.hidden + shape.ffn) * 2 : 0);
    EXPECT_LE(rr.temporary_now, scratch);
  }
}

// Sim and runtime agree on bytes: what every rank's flight recorders saw per collective kind is
// exactly what its step programs say, step after step, in fp32 and under mixed precision.
TEST_P(ZeroStageTest, RecordedBytesPerCollectiveEqualTheProgramsExactly) {
  const int zero = ZeroStageTest::zero();
  constexpr int kSteps = 3;
  for (int world : {2, 4}) {
    const TrainConfig cfg = tiny_config(plan(), world, 64);
    const auto ranks = run(world, cfg, kSteps);
    for (int r = 0; r < world; ++r) {
      std::map<comm::OpKind, double> expected;
      const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, r, {.per_layer_ops = true});
      for (const strategy::Op& op : p.ops)
        if (op.is_collective()) expected[comm_kind(op.kind)] += kSteps * op.bytes * op.count;
      EXPECT_EQ(ranks[r].recorded_bytes, expected) << "zero=" << zero << ", " << world << " workers, rank " << r;
      const auto bytes = [&](comm::OpKind k) { return expected.count(k) ? expected.at(k) : 0.0; };
      // By hand: DDP all-reduces every gradient once per step, in fp32 whatever the precision
      // (mixed keeps fp32 main gradients).
      const int64_t n = model::ParamLayout(mlp_shape(cfg.model)).numel();
      if (zero == 0) {
        EXPECT_EQ(bytes(comm::OpKind::kAllReduce), kSteps * 4.0 * double(n));
      }
      if (zero >= 1) {
        EXPECT_GT(bytes(comm::OpKind::kReduceScatter), 0);
        EXPECT_GT(bytes(comm::OpKind::kAllGather), 0);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroStageTest,
                         ::testing::Combine(::testing::Values(0, 1, 2, 3), ::testing::Values("fp32", "mixed")),
                         [](const auto& info) {
                           return "zero" + std::to_string(std::get<0>(info.param)) + "_" + std::get<1>(info.param);
                         });

}  // namespace
}  // namespace parlab::train
