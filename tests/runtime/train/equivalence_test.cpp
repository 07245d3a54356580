// The one-worker test: data parallelism must not change what is learned. For a fixed global
// batch and seed, 2 and 4 workers give the 1-worker gradients, weights and loss curve up to fp32
// summation order; the 1-worker run itself matches a plain loop over LabMlp with no executor.
//
// Tolerance. A gradient element is a sum of G per-sample terms (G = global batch). With W
// workers the terms are grouped differently: each rank sums its share (BLAS, then microbatch
// accumulation), then the ring all-reduce adds the W partial sums. Rounding errors of an n-term
// fp32 sum behave like a random walk, about sqrt(n) u sum|terms| (u = 2^-24 ~ 6e-8; the
// worst case is (n-1) u sum|terms|, Higham, Accuracy and Stability, ch. 4). Elementwise that can
// be large relative to a gradient that cancels to ~0, so we compare normwise:
// max|g_W - g_1| / max|g_1|. With G <= 32 terms whose sum|terms| is within ~10x of the largest
// gradient: sqrt(32) * 6e-8 * 10 ~ 3.4e-6, hence 1e-5 for gradients. The weights after 20 SGD
// steps (lr 0.1, momentum 0.9) and the loss curve accumulate those per-step differences without
// amplifying them on this small, well-conditioned problem: 1e-5 too. (AdamW is checked over
// fewer steps: its update m / sqrt(v) is sign-like for gradients near zero, so the rounding of a
// vanishing gradient could flip a whole lr-sized step over a long run.) Observed: ~1e-7.
#include <gtest/gtest.h>

#include <cstdio>

#include "runtime/model/lab_mlp.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using testing::loss_curve;
using testing::relative_diff;
using testing::tiny_config;
using testing::train_threads;

constexpr double kGradTol = 1e-5;
constexpr double kWeightTol = 1e-5;
constexpr double kLossTol = 1e-5;

struct Case {
  std::string name;
  std::string plan;
  int64_t data_size;
};

void check_equivalence(const Case& c, int steps, const OptimizerConfig& opt) {
  const auto ref = train_threads(1, tiny_config(c.plan, 1, c.data_size, opt), steps);
  ASSERT_EQ(ref.size(), 1u);
  ASSERT_EQ(static_cast<int>(ref[0].records.size()), steps);
  const std::vector<double> ref_loss = loss_curve(ref);
  for (int world : {2, 4}) {
    const TrainConfig cfg = tiny_config(c.plan, world, c.data_size, opt);
    ASSERT_EQ(cfg.plan.global_batch, tiny_config(c.plan, 1, c.data_size, opt).plan.global_batch)
        << "the global batch must not change with the worker count";
    const auto runs = train_threads(world, cfg, steps);
    ASSERT_EQ(static_cast<int>(runs.size()), world);
    for (int r = 0; r < world; ++r) {
      const double dg = relative_diff(runs[r].grads_step0, testing::slice(ref[0].grads_step0, runs[r].shard));
      const double dw = relative_diff(runs[r].params, ref[0].params);
      std::printf(
          "  %s, %d workers, rank %d: step-0 gradients differ by %.3g, weights after %d steps by %.3g (normwise)\n",
          c.name.c_str(), world, r, dg, steps, dw);
      EXPECT_LE(dg, kGradTol) << c.name << ": " << world << " workers, rank " << r
                              << ": largest normwise gradient difference " << dg;
      EXPECT_LE(dw, kWeightTol) << c.name << ": " << world << " workers, rank " << r
                                << ": largest normwise weight difference " << dw;
      // Replicas stay identical: the all-reduce hands every rank the same sums.
      EXPECT_EQ(runs[r].params, runs[0].params) << "rank " << r << " drifted from rank 0";
    }
    const std::vector<double> loss = loss_curve(runs);
    double worst = 0;
    for (int s = 0; s < steps; ++s) worst = std::max(worst, std::abs(loss[s] - ref_loss[s]) / ref_loss[s]);
    std::printf("  %s, %d workers: loss %.5f -> %.5f, largest relative loss difference %.3g\n", c.name.c_str(), world,
                loss.front(), loss.back(), worst);
    EXPECT_LE(worst, kLossTol) << c.name << ": " << world << " workers: largest relative loss difference " << worst;
  }
}

TEST(EquivalenceTest, OneTwoFourWorkersLearnTheSame) {
  check_equivalence({"even batches, one bucket", "gbs=16,mb=4", 64}, 20, SgdConfig{.lr = 0.1, .momentum = 0.9});
}

TEST(EquivalenceTest, ShortLastBatchOfEachEpoch) {
  // 35 samples, global batch 16: epochs of 16, 16, 3. With 4 workers the short step gives ranks
  // 1, 1, 1 and 0 samples (rank 3 still joins every all-reduce); with 1 worker microbatches of
  // 1, 1, 1, 0.
  const TrainConfig cfg = tiny_config("gbs=16,mb=4", 4, 35);
  ElasticSampler sampler({.seed = cfg.seed, .dataset_size = 35, .global_batch = 16});
  sampler.advance();
  sampler.advance();
  ASSERT_EQ(sampler.next_batch().size, 3);
  ASSERT_EQ(sampler.rank_indices(sampler.next_batch(), 3, 4).size(), 0u);
  check_equivalence({"short last batch", "gbs=16,mb=4", 35}, 20, SgdConfig{.lr = 0.1, .momentum = 0.9});
}

TEST(EquivalenceTest, BucketsThatSplitALayer) {
  // 0.008 MiB = 8388 B buckets over the tiny model's fp32 gradients, walked from the head down:
  // {head, blocks.1.fc2.bias} (656 B), {blocks.1.fc2.weight} (8192 B), {blocks.1.fc1.*}, ...
  // so block 1's tensors land in three buckets.
  const TrainConfig cfg = tiny_config("gbs=16,mb=4,bucket_mb=0.008", 2, 64);
  const strategy::StepProgram p = strategy::build_step(cfg.model, cfg.plan, 0, {.per_layer_ops = true});
  const model::ParamLayout layout(mlp_shape(cfg.model));
  int buckets = 0, splitting = 0;
  for (const strategy::Op& op : p.ops) {
    if (op.kind != strategy::OpKind::kAllReduce) continue;
    ++buckets;
    for (int l = 0; l < layout.num_layers(); ++l) {
      const model::FlatRange lr = layout.layer_range(l);
      if (op.flat_begin > lr.begin && op.flat_begin < lr.end) ++splitting;
    }
  }
  std::printf("  %d buckets, %d bucket boundaries inside a layer\n", buckets, splitting);
  ASSERT_GE(splitting, 1) << "the bucket size must split a layer for this test to mean anything";
  check_equivalence({"buckets split layers", "gbs=16,mb=4,bucket_mb=0.008", 64}, 20,
                    SgdConfig{.lr = 0.1, .momentum = 0.9});
}

TEST(EquivalenceTest, AdamWOverAFewSteps) {
  check_equivalence({"AdamW", "gbs=32,mb=8,bucket_mb=0.01", 96}, 5, AdamWConfig{.lr = 1e-2});
}

TEST(EquivalenceTest, OneWorkerMatchesAPlainLoopBitForBit) {
  // The executor adds nothing to the math: one worker equals LabMlp driven by hand over the same
  // microbatches (forward all, backward all, per microbatch in order) and the same SGD.
  const TrainConfig cfg = tiny_config("gbs=16,mb=4", 1, 64);
  const auto run = train_threads(1, cfg, 3);
  ASSERT_EQ(run.size(), 1u);

  // The step's weight-gradient groups, as the trainer's model makes them (the executor defers
  // every microbatch's but the last's, LabMlp computes them once a group).
  const model::MlpShape shape = mlp_shape(cfg.model);
  model::LabMlp model(shape, cfg.seed, 0, shape.num_layers(),
                      model::ModelStorage{.weight_grad_group = strategy::weight_grad_group(cfg.plan)});
  ASSERT_EQ(model.weight_grad_group(), 4);
  const SyntheticDataset data({.seed = cfg.seed, .size = 64, .width = 32, .classes = 4});
  ElasticSampler sampler({.seed = cfg.seed, .dataset_size = 64, .global_batch = 16});
  Sgd sgd(std::get<SgdConfig>(cfg.optimizer), {0, model.layout().numel()});
  std::vector<float> grads0;
  for (int step = 0; step < 3; ++step) {
    const GlobalBatch batch = sampler.next_batch();
    const std::vector<int64_t> all = sampler.batch_indices(batch);
    model.zero_grads();
    for (int k = 0; k < 4; ++k) {
      std::vector<int64_t> idx(all.begin() + 4 * k, all.begin() + 4 * k + 4);
      model::MicrobatchState mb = model.new_microbatch(4, batch.size);
      data.fill(idx, mb);
      model.forward(mb);
      model.set_weight_grads_deferrable(k < 3);
      model.backward(mb);
    }
    if (step == 0) grads0.assign(model.grads().begin(), model.grads().end());
    sgd.step(model.params(), model.grads());
    sampler.advance();
  }
  EXPECT_EQ(run[0].grads_step0, grads0) << "largest difference " << relative_diff(run[0].grads_step0, grads0);
  const std::vector<float> params(model.params().begin(), model.params().end());
  EXPECT_EQ(run[0].params, params) << "largest difference " << relative_diff(run[0].params, params);
}

// ZeRO shards state, not arithmetic: each stage on 2 and 4 workers learns what 1 worker learns.
// The 0.008 MiB buckets split layers and cut across shard boundaries, so reduce-scatters and
// all-gathers run with uneven (and empty) chunks; with 2 workers every rank accumulates 2
// microbatches, which ZeRO-2/3 reduce-scatter one by one.
class ZeroEquivalenceTest : public ::testing::TestWithParam<int> {};

TEST_P(ZeroEquivalenceTest, TwoAndFourWorkersLearnWhatOneLearns) {
  const std::string plan = "gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(GetParam());
  check_equivalence({"ZeRO-" + std::to_string(GetParam()), plan, 64}, 20, SgdConfig{.lr = 0.1, .momentum = 0.9});
}

TEST_P(ZeroEquivalenceTest, AdamWOverAFewSteps) {
  const std::string plan = "gbs=32,mb=8,bucket_mb=0.01,zero=" + std::to_string(GetParam());
  check_equivalence({"ZeRO-" + std::to_string(GetParam()) + " AdamW", plan, 96}, 5, AdamWConfig{.lr = 1e-2});
}

INSTANTIATE_TEST_SUITE_P(Stages, ZeroEquivalenceTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return "zero" + std::to_string(info.param); });

TEST(DeterminismTest, SameWorldSizeGivesBitIdenticalWeights) {
  const TrainConfig cfg = tiny_config("gbs=16,mb=4,bucket_mb=0.008", 2, 35, AdamWConfig{.lr = 1e-2});
  const auto a = train_threads(2, cfg, 12);
  const auto b = train_threads(2, cfg, 12);
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(a[r].params, b[r].params) << "rank " << r << ": largest difference "
                                        << relative_diff(a[r].params, b[r].params);
    for (size_t s = 0; s < a[r].records.size(); ++s)
      EXPECT_EQ(a[r].records[s].loss_sum, b[r].records[s].loss_sum) << "rank " << r << " step " << s;
  }
}

}  // namespace
}  // namespace parlab::train
