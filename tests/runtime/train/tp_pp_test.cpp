// Tensor and pipeline parallelism must not change what is learned: for every split on up to 4
// workers the exported whole-model weights after 12 steps equal one worker's, and every rank
// moves exactly the bytes its step program says, per collective and point-to-point kind.
//
// Tolerance. Tensor parallelism reorders the sums inside fc2 (t partial sums added by the ring)
// and fc1's input gradient; pipelines change nothing in the arithmetic of a microbatch (the same
// layers in the same order, the boundary tensors copied bit for bit), and data parallelism
// reorders the gradient sum as in equivalence_test.cpp. Those per-step differences are ~1e-7
// relative; over 12 SGD steps on this small, well-conditioned problem they stay far below the
// 1e-4 the issue sets.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/memory_report.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using testing::loss_curve;
using testing::relative_diff;

constexpr double kWeightTol = 1e-4;
constexpr double kLossTol = 1e-4;
constexpr int kSteps = 12;

// 4 blocks so that pp=4 gives each stage a block (the head joins the last); ffn 64 splits 4 ways.
strategy::ModelSpec deep_tiny_model() {
  return strategy::parse_model_toml(
      "name = \"tiny4\"\nkind = \"mlp\"\nlayers = 4\nhidden = 32\nffn = 64\nclasses = 4\n"
      "microbatch = 4\nprecision = \"fp32\"\n",
      "tiny4.toml");
}

TrainConfig config(const std::string& plan, int world, OptimizerConfig opt = SgdConfig{.lr = 0.1, .momentum = 0.9}) {
  TrainConfig c;
  c.model = deep_tiny_model();
  c.plan = resolve_train_plan(c.model, plan, world, strategy::load_cluster("cpu-local"));
  c.optimizer = opt;
  c.data_size = 64;
  c.seed = 7;
  c.comm_timeout = testing::kTestTimeout;
  return c;
}

struct Split {
  std::string plan;
  int world;
};

std::string name_of(const Split& s) {
  std::string n = s.plan;
  for (char& ch : n)
    if (ch == '=' || ch == ',') ch = '_';
  return n;
}

class SplitTest : public ::testing::TestWithParam<Split> {};

TEST_P(SplitTest, ExportedWeightsAfter12StepsEqualOneWorkers) {
  const Split& s = GetParam();
  const std::string base = "gbs=16,mb=4";
  const auto ref = testing::train_threads(1, config(base, 1), kSteps);
  const TrainConfig cfg = config(base + "," + s.plan, s.world);
  ASSERT_EQ(cfg.plan.world(), s.world);
  ASSERT_EQ(cfg.plan.global_batch, 16);
  const auto runs = testing::train_threads(s.world, cfg, kSteps);
  for (int r = 0; r < s.world; ++r) {
    ASSERT_EQ(runs[r].params.size(), ref[0].params.size()) << "rank " << r;
    const double dw = relative_diff(runs[r].params, ref[0].params);
    std::printf("  %s on %d workers, rank %d: weights after %d steps differ by %.3g (normwise)\n", s.plan.c_str(),
                s.world, r, kSteps, dw);
    EXPECT_LE(dw, kWeightTol) << s.plan << " rank " << r;
    // Every rank assembles the same whole model.
    EXPECT_EQ(runs[r].params, runs[0].params) << s.plan << " rank " << r;
  }
  const auto loss = loss_curve(runs), ref_loss = loss_curve(ref);
  for (int k = 0; k < kSteps; ++k)
    EXPECT_LE(std::abs(loss[k] - ref_loss[k]) / ref_loss[k], kLossTol) << s.plan << " step " << k;
  // It learned something: the comparison is not between two untrained models.
  EXPECT_LT(ref_loss.back(), 0.9 * ref_loss.front());
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
    case strategy::OpKind::kSend:
      return comm::OpKind::kSend;
    case strategy::OpKind::kRecv:
      return comm::OpKind::kRecv;
    default:
      return comm::OpKind::kBarrier;
  }
}

TEST_P(SplitTest, RecordedBytesPerKindEqualTheProgramsExactly) {
  const Split& s = GetParam();
  constexpr int kRun = 3;
  const TrainConfig cfg = config("gbs=16,mb=4,bucket_mb=0.008," + s.plan, s.world);
  auto store = comm::make_in_process_store();
  std::vector<std::map<comm::OpKind, double>> recorded(s.world);
  comm::testing::run_rank_threads(s.world, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, s.world, go);
    Trainer trainer(cfg, *c, {});
    for (int k = 0; k < kRun; ++k) trainer.step();
    for (const comm::Communicator* k : trainer.communicators())
      for (const comm::FlightRecord& e : k->flight_recorder().snapshot().entries) recorded[r][e.op] += e.bytes;
    sync.arrive_and_wait();
  });
  for (int r = 0; r < s.world; ++r) {
    // The generator's program, not the trainer's copy of it: an independent account of the bytes.
    std::map<comm::OpKind, double> expected;
    const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, r, {.per_layer_ops = true});
    for (const strategy::Op& op : p.ops)
      if (op.is_collective() || op.is_p2p()) expected[comm_kind(op.kind)] += kRun * op.bytes * op.count;
    EXPECT_EQ(recorded[r], expected) << s.plan << ", rank " << r;
    if (cfg.plan.tp > 1) {
      EXPECT_GT(expected[cfg.plan.sequence_parallel ? comm::OpKind::kReduceScatter : comm::OpKind::kAllReduce], 0);
    }
    if (cfg.plan.pp > 1) {
      EXPECT_GT(expected[comm::OpKind::kSend], 0);
      EXPECT_GT(expected[comm::OpKind::kRecv], 0);
    }
  }
}

// Each rank holds what the memory ledger (an independent formula over the model spec and plan)
// predicts for its stage and slice: parameters, gradients and optimizer state within 5%.
// Activations are printed beside the ledger's (pipelines hold the warm-up microbatches).
TEST_P(SplitTest, EveryRankHoldsWhatTheLedgerPredicts) {
  const Split& s = GetParam();
  // AdamW: the plan's optimizer, whose two moments the ledger counts.
  const TrainConfig cfg = config("gbs=16,mb=4," + s.plan, s.world, AdamWConfig{.lr = 1e-2});
  auto store = comm::make_in_process_store();
  std::vector<MemoryReport> reports(s.world);
  comm::testing::run_rank_threads(s.world, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, s.world, go);
    Trainer trainer(cfg, *c, {});
    for (int k = 0; k < 2; ++k) trainer.step();
    reports[r] = memory_report(trainer, strategy::load_cluster("cpu-local"));
    sync.arrive_and_wait();
  });
  using model::MemoryCategory;
  for (const MemoryReport& m : reports) {
    std::printf("  %s rank %d: parameters %lld B (ledger %.0f), activations %lld B (ledger %.0f)\n", s.plan.c_str(),
                m.rank, static_cast<long long>(m.measured(MemoryCategory::kParameters)),
                m.ledger(MemoryCategory::kParameters), static_cast<long long>(m.measured(MemoryCategory::kActivations)),
                m.ledger(MemoryCategory::kActivations));
    for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer}) {
      ASSERT_TRUE(m.deviation(c)) << model::to_string(c);
      EXPECT_LE(std::abs(*m.deviation(c)), 0.05) << s.plan << " rank " << m.rank << " " << model::to_string(c)
                                                 << ": measured " << m.measured(c) << " B, ledger " << m.ledger(c);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Splits, SplitTest,
                         ::testing::Values(Split{"tp=2", 2}, Split{"tp=4", 4}, Split{"tp=2,sp=on", 2},
                                           Split{"tp=4,sp=on", 4}, Split{"pp=2,schedule=gpipe", 2},
                                           Split{"pp=4,schedule=1f1b", 4}, Split{"pp=2,v=2,schedule=interleaved", 2},
                                           Split{"tp=2,pp=2", 4}, Split{"pp=2,dp=2", 4}, Split{"tp=2,dp=2", 4},
                                           Split{"tp=2,dp=2,zero=1", 4}),
                         [](const auto& info) { return name_of(info.param); });

// The runtime's model is sliced: a tensor-parallel rank holds 1/t of every block's fc1 and fc2
// weights, a pipeline stage only its layers.
TEST(SplitModelTest, RanksHoldOnlyTheirSlices) {
  const TrainConfig cfg = config("gbs=16,mb=4,tp=2,pp=2", 4);
  const model::ParamLayout whole(mlp_shape(cfg.model));
  auto store = comm::make_in_process_store();
  std::vector<int64_t> held(4);
  comm::testing::run_rank_threads(4, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, 4, go);
    Trainer trainer(cfg, *c, {});
    held[r] = static_cast<int64_t>(trainer.state().model.params().size());
    sync.arrive_and_wait();
  });
  // Stage 0: blocks 0-1 halved; stage 1: blocks 2-3 halved + the replicated fc2 biases and head.
  const int64_t h = 32, f = 64, C = 4;
  const int64_t block_half = (f / 2) * h + f / 2 + h * (f / 2) + h;
  EXPECT_EQ(held[0], 2 * block_half);
  EXPECT_EQ(held[1], 2 * block_half);
  EXPECT_EQ(held[2], 2 * block_half + C * h + C);
  EXPECT_LT(held[0] + held[2], whole.numel());
}

// The measured trace marks each pipeline compute op with its schedule phase: stage 0 of a
// 4-stage 1F1B runs 3 warm-up forwards, the last stage none (the program's counts).
TEST(SplitModelTest, PipelineComputeEventsCarryTheirPhase) {
  const TrainConfig cfg = config("gbs=32,mb=4,pp=4,schedule=1f1b", 4);
  ASSERT_EQ(cfg.plan.microbatches, 8);
  const auto runs = testing::train_threads(4, cfg, 1);
  for (int r = 0; r < 4; ++r) {
    // Microbatches per phase (the last stage runs two layers per microbatch: a block and the head).
    std::map<std::string, std::set<std::string>> mbs;
    for (const OpEvent& e : runs[r].records.at(0).events)
      if (e.op == "forward") mbs[e.phase].insert(e.tag.substr(0, e.tag.find('.', 4)));
    std::map<std::string, int> forwards;
    for (const auto& [phase, set] : mbs) forwards[phase] = static_cast<int>(set.size());
    EXPECT_EQ(forwards["warmup"], 4 - r - 1) << "stage " << r;
    EXPECT_EQ(forwards["steady"], 8 - (4 - r - 1)) << "stage " << r;
    EXPECT_EQ(forwards[""], 0) << "stage " << r;
  }
}

}  // namespace
}  // namespace parlab::train
