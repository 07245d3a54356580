// The pieces together: sampler -> dataset -> lab-mlp (2 data-parallel "ranks" summing into one
// gradient buffer, as a SUM all-reduce would) -> AdamW. Everything is deterministic, so "the loss
// goes down" is a real assertion, not a flaky one.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "runtime/model/lab_mlp.h"
#include "runtime/train/data.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/sampler.h"

namespace parlab::train {
namespace {

const model::MlpShape kShape{.hidden = 8, .ffn = 16, .blocks = 2, .classes = 4};
constexpr int64_t kTrainSize = 512, kHeldOut = 256;

// Mean loss and accuracy over samples [first, first + n).
std::pair<double, double> evaluate(const model::LabMlp& model, const SyntheticDataset& data, int64_t first, int64_t n) {
  std::vector<int64_t> indices(n);
  for (int64_t i = 0; i < n; ++i) indices[i] = first + i;
  model::MicrobatchState mb = model.new_microbatch(n, n);
  data.fill(indices, mb);
  const double loss_sum = model.forward(mb);
  return {loss_sum / n, static_cast<double>(mb.correct()) / n};
}

TEST(TrainingTest, FiftyStepsLowerTheLossAndBeatChance) {
  // Samples [0, 512) train, [512, 768) are held out (same teacher: same seed).
  const SyntheticDataset data({.seed = 1, .size = kTrainSize + kHeldOut, .width = 8, .classes = 4});
  ElasticSampler sampler({.seed = 2, .dataset_size = kTrainSize, .global_batch = 32});
  model::LabMlp model(kShape, 3);
  AdamW adam(AdamWConfig{.lr = 0.01, .weight_decay = 0.0}, {0, model.layout().numel()});

  const auto [loss_before, acc_before] = evaluate(model, data, kTrainSize, kHeldOut);
  std::vector<double> step_loss;
  const int world = 2;
  for (int step = 0; step < 50; ++step) {
    const GlobalBatch batch = sampler.next_batch();
    model.zero_grads();
    double loss_sum = 0.0;
    for (int rank = 0; rank < world; ++rank) {
      const std::vector<int64_t> mine = sampler.rank_indices(batch, rank, world);
      model::MicrobatchState mb = model.new_microbatch(static_cast<int64_t>(mine.size()), batch.size);
      data.fill(mine, mb);
      loss_sum += model.forward(mb);
      model.backward(mb);
    }
    step_loss.push_back(loss_sum / batch.size);
    adam.step(model.params(), model.grads());
    sampler.advance();
  }
  const auto [loss_after, acc_after] = evaluate(model, data, kTrainSize, kHeldOut);
  std::printf(
      "  train loss step 0 %.4f -> step 49 %.4f; held-out loss %.4f -> %.4f, "
      "accuracy %.3f -> %.3f\n",
      step_loss.front(), step_loss.back(), loss_before, loss_after, acc_before, acc_after);
  double first5 = 0.0, last5 = 0.0;
  for (int i = 0; i < 5; ++i) {
    first5 += step_loss[i] / 5;
    last5 += step_loss[45 + i] / 5;
  }
  EXPECT_LT(last5, 0.7 * first5);
  EXPECT_LT(loss_after, 0.7 * loss_before);
  EXPECT_GT(acc_after, 0.6);  // chance is 0.25
}

}  // namespace
}  // namespace parlab::train
