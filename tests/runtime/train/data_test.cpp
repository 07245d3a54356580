#include "runtime/train/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "base/errors.h"

namespace parlab::train {
namespace {

const SyntheticConfig kConfig{.seed = 17, .size = 1000, .width = 8, .classes = 4};

TEST(SyntheticDatasetTest, SampleDependsOnSeedAndIndexAlone) {
  const SyntheticDataset a(kConfig);
  std::vector<float> x_first(8), x_again(8), scratch(8);
  const int32_t label = a.sample(123, x_first);
  for (int64_t i = 0; i < 1000; i += 7) (void)a.sample(i, scratch);  // unrelated draws
  EXPECT_EQ(a.sample(123, x_again), label);
  EXPECT_EQ(x_first, x_again);
  // Another instance (another rank) with the same seed and a bigger dataset: same sample.
  SyntheticConfig bigger = kConfig;
  bigger.size = 5000;
  const SyntheticDataset b(bigger);
  EXPECT_EQ(b.sample(123, x_again), label);
  EXPECT_EQ(x_first, x_again);
  // A different seed gives different data.
  SyntheticConfig other = kConfig;
  other.seed = 18;
  SyntheticDataset(other).sample(123, x_again);
  EXPECT_NE(x_first, x_again);
}

TEST(SyntheticDatasetTest, FillFollowsTheIndexOrder) {
  const SyntheticDataset ds(kConfig);
  const std::vector<int64_t> indices = {5, 900, 5, 0};
  std::vector<float> x(4 * 8);
  std::vector<int32_t> labels(4);
  ds.fill(indices, x, labels);
  for (size_t s = 0; s < indices.size(); ++s) {
    std::vector<float> one(8);
    EXPECT_EQ(ds.sample(indices[s], one), labels[s]);
    EXPECT_TRUE(std::equal(one.begin(), one.end(), x.begin() + s * 8));
  }
  model::MicrobatchState mb(model::MlpShape{.hidden = 8, .ffn = 2, .blocks = 1, .classes = 4}, 4, 4);
  ds.fill(indices, mb);
  EXPECT_TRUE(std::ranges::equal(mb.activation(0), x));
  EXPECT_TRUE(std::ranges::equal(mb.labels(), labels));
}

TEST(SyntheticDatasetTest, LabelsCoverEveryClassAndInputsAreStandardNormal) {
  const SyntheticDataset ds(kConfig);
  std::vector<int> count(4, 0);
  double sum = 0.0, sum_sq = 0.0;
  std::vector<float> x(8);
  for (int64_t i = 0; i < 1000; ++i) {
    ++count[ds.sample(i, x)];
    for (float v : x) {
      sum += v;
      sum_sq += v * v;
    }
  }
  // Not constant, every class present: a fixed random teacher in 8 dimensions is not exactly
  // balanced (angles between its rows differ), but no class is rare.
  std::printf("  label counts of 1000: %d %d %d %d\n", count[0], count[1], count[2], count[3]);
  for (int c = 0; c < 4; ++c) EXPECT_GT(count[c], 100) << "class " << c;
  EXPECT_NEAR(sum / 8000, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / 8000, 1.0, 0.06);
}

TEST(SyntheticDatasetTest, BadInputIsRejected) {
  const SyntheticDataset ds(kConfig);
  std::vector<float> x(8);
  EXPECT_THROW(ds.sample(1000, x), RuntimeError);
  EXPECT_THROW(ds.sample(-1, x), RuntimeError);
  std::vector<float> narrow(7);
  EXPECT_THROW(ds.sample(0, narrow), RuntimeError);
  EXPECT_THROW(SyntheticDataset({.seed = 1, .size = 0, .width = 8, .classes = 4}), ConfigError);
}

}  // namespace
}  // namespace parlab::train
