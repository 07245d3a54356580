#include "runtime/train/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "base/errors.h"

namespace parlab::train {
namespace {

// The indices of one step, gathered rank by rank (what W ranks together consume).
std::vector<int64_t> gather_step(const ElasticSampler& sampler, int world) {
  const GlobalBatch batch = sampler.next_batch();
  std::vector<int64_t> all;
  for (int r = 0; r < world; ++r) {
    const auto mine = sampler.rank_indices(batch, r, world);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  return all;
}

TEST(RankSliceTest, EvenSplitWithRemainderOnTheFirstRanks) {
  // 10 over 3 ranks: 4, 3, 3 at 0, 4, 7.
  EXPECT_EQ(rank_slice(10, 0, 3).count, 4);
  EXPECT_EQ(rank_slice(10, 1, 3).begin, 4);
  EXPECT_EQ(rank_slice(10, 1, 3).count, 3);
  EXPECT_EQ(rank_slice(10, 2, 3).begin, 7);
  // 2 over 4 ranks: 1, 1, 0, 0.
  EXPECT_EQ(rank_slice(2, 1, 4).count, 1);
  EXPECT_EQ(rank_slice(2, 2, 4).count, 0);
  EXPECT_EQ(rank_slice(2, 3, 4).begin, 2);
  EXPECT_THROW(rank_slice(2, 4, 4), ConfigError);
}

TEST(ElasticSamplerTest, RankSlicesUnionIsTheGlobalBatch) {
  ElasticSampler sampler({.seed = 3, .dataset_size = 50, .global_batch = 7});
  for (int world : {1, 2, 3, 7, 9}) {
    EXPECT_EQ(gather_step(sampler, world), sampler.batch_indices(sampler.next_batch())) << "world " << world;
  }
}

TEST(ElasticSamplerTest, EveryIndexExactlyOncePerEpochWithAShortLastBatch) {
  // N = 103, G = 10: 10 full steps and a short 11th of 103 % 10 = 3 samples.
  ElasticSampler sampler({.seed = 5, .dataset_size = 103, .global_batch = 10});
  EXPECT_EQ(sampler.steps_per_epoch(), 11);
  std::vector<int64_t> seen;
  for (int step = 0; step < 11; ++step) {
    const GlobalBatch batch = sampler.next_batch();
    EXPECT_EQ(batch.step_in_epoch, step);
    EXPECT_EQ(batch.size, step < 10 ? 10 : 3);
    EXPECT_EQ(batch.is_short, step == 10);
    EXPECT_EQ(batch.last_in_epoch, step == 10);
    const auto all = gather_step(sampler, 4);  // the short batch: ranks get 1, 1, 1, 0
    seen.insert(seen.end(), all.begin(), all.end());
    if (step == 10) {
      EXPECT_TRUE(sampler.rank_indices(batch, 3, 4).empty());
    }
    sampler.advance();
  }
  std::vector<int64_t> expected(103);
  std::iota(expected.begin(), expected.end(), 0);
  std::vector<int64_t> sorted = seen;
  std::ranges::sort(sorted);
  EXPECT_EQ(sorted, expected);
  EXPECT_NE(seen, expected);  // actually shuffled
  EXPECT_EQ(sampler.state(), (SamplerState{1, 0}));
  // Epoch 1 is another permutation.
  EXPECT_NE(epoch_order(5, 1, 103), epoch_order(5, 0, 103));
  EXPECT_EQ(epoch_order(5, 1, 103), epoch_order(5, 1, 103));
}

TEST(ElasticSamplerTest, StateRoundTripsThroughText) {
  const SamplerState state{3, 128};
  EXPECT_EQ(state.to_string(), "epoch=3 consumed=128");
  EXPECT_EQ(SamplerState::parse(state.to_string()), state);
  EXPECT_THROW(SamplerState::parse("epoch=3"), ConfigError);
  EXPECT_THROW(SamplerState::parse("epoch=3 consumed=-1"), ConfigError);
  EXPECT_THROW(SamplerState::parse("epoch=3 consumed=1 x"), ConfigError);
  EXPECT_THROW(ElasticSampler({.seed = 1, .dataset_size = 10, .global_batch = 2}, {0, 10}), ConfigError);
}

TEST(ElasticSamplerTest, RestartWithAnotherWorldSizeContinuesAtTheSameSample) {
  const SamplerConfig config{.seed = 11, .dataset_size = 90, .global_batch = 8};
  // Uninterrupted: 14 steps (an epoch of 12 steps, the last of 2 samples, then 2 more) on 4 ranks.
  ElasticSampler straight(config);
  std::vector<int64_t> expected;
  for (int s = 0; s < 14; ++s) {
    const auto step = gather_step(straight, 4);
    expected.insert(expected.end(), step.begin(), step.end());
    straight.advance();
  }
  // 4 ranks for 3 steps -> save -> 2 ranks for 5 steps -> save -> 3 ranks for 6 steps.
  std::vector<int64_t> consumed;
  std::string saved;
  const std::vector<std::pair<int, int>> phases = {{4, 3}, {2, 5}, {3, 6}};
  for (const auto& [world, steps] : phases) {
    ElasticSampler sampler(config, saved.empty() ? SamplerState{} : SamplerState::parse(saved));
    for (int s = 0; s < steps; ++s) {
      const auto step = gather_step(sampler, world);
      consumed.insert(consumed.end(), step.begin(), step.end());
      sampler.advance();
    }
    saved = sampler.state().to_string();
  }
  EXPECT_EQ(consumed, expected);
  EXPECT_EQ(saved, straight.state().to_string());
}

TEST(ElasticSamplerTest, RestartWithAnotherGlobalBatchSkipsAndRepeatsNothing) {
  const SamplerConfig config{.seed = 2, .dataset_size = 40, .global_batch = 6};
  ElasticSampler first(config);
  std::vector<int64_t> consumed;
  for (int s = 0; s < 3; ++s) {
    const auto step = first.batch_indices(first.next_batch());
    consumed.insert(consumed.end(), step.begin(), step.end());
    first.advance();
  }
  ElasticSampler second({.seed = 2, .dataset_size = 40, .global_batch = 8}, first.state());
  while (second.state().epoch == 0) {
    const auto step = second.batch_indices(second.next_batch());
    consumed.insert(consumed.end(), step.begin(), step.end());
    second.advance();
  }
  EXPECT_EQ(consumed, epoch_order(2, 0, 40));
}

}  // namespace
}  // namespace parlab::train
