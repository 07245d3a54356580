// Optimizers against steps computed by hand (the arithmetic is written out below), state
// save/restore, and range independence (a ZeRO shard updates exactly what the replica would).
#include "runtime/train/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/errors.h"

namespace parlab::train {
namespace {

TEST(SgdTest, MomentumAndWeightDecayHandComputed) {
  Sgd sgd(SgdConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01}, {0, 2});
  std::vector<float> p = {1.0f, -2.0f};
  const std::vector<float> g = {0.5f, 0.25f};
  // step 1: d = g + 0.01 p = (0.51, 0.23); buf = d; p -= 0.1 buf -> (0.949, -2.023)
  sgd.step(p, g);
  EXPECT_NEAR(p[0], 0.949, 1e-6);
  EXPECT_NEAR(p[1], -2.023, 1e-6);
  // step 2: d = (0.5 + 0.00949, 0.25 - 0.02023) = (0.50949, 0.22977)
  //         buf = 0.9 (0.51, 0.23) + d = (0.96849, 0.43677); p -= 0.1 buf -> (0.852151, -2.066677)
  sgd.step(p, g);
  EXPECT_NEAR(p[0], 0.852151, 1e-6);
  EXPECT_NEAR(p[1], -2.066677, 1e-6);
  EXPECT_EQ(sgd.steps(), 2);
}

TEST(SgdTest, NesterovHandComputed) {
  Sgd sgd(SgdConfig{.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01, .nesterov = true}, {0, 1});
  std::vector<float> p = {1.0f};
  const std::vector<float> g = {0.5f};
  // step 1: d = 0.51, buf = 0.51, d = 0.51 + 0.9 * 0.51 = 0.969, p = 1 - 0.0969 = 0.9031
  sgd.step(p, g);
  EXPECT_NEAR(p[0], 0.9031, 1e-6);
  // step 2: d = 0.5 + 0.009031 = 0.509031, buf = 0.459 + 0.509031 = 0.968031,
  //         d = 0.509031 + 0.9 * 0.968031 = 1.3802589, p = 0.9031 - 0.13802589 = 0.76507411
  sgd.step(p, g);
  EXPECT_NEAR(p[0], 0.76507411, 1e-6);
}

TEST(SgdTest, PlainSgdKeepsNoBuffer) {
  Sgd sgd(SgdConfig{.lr = 0.5}, {0, 1});
  std::vector<float> p = {1.0f};
  sgd.step(p, std::vector<float>{0.25f});  // 1 - 0.5 * 0.25
  EXPECT_EQ(p[0], 0.875f);
  EXPECT_TRUE(sgd.state().buffers.empty());
}

TEST(AdamWTest, BiasCorrectionAtStepsOneAndTwoHandComputed) {
  AdamW adam(AdamWConfig{.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01}, {0, 1});
  std::vector<float> p = {1.0f};
  // t = 1, g = 0.5: p = 1 (1 - 0.1 * 0.01) = 0.999; m = 0.1 * 0.5 = 0.05; v = 0.001 * 0.25
  //   bias corrections 1 - 0.9 = 0.1 and 1 - 0.999 = 0.001:
  //   p -= (0.1 / 0.1) * 0.05 / (sqrt(0.00025) / sqrt(0.001) + 1e-8)   [= 0.05 / 0.50000001]
  adam.step(p, std::vector<float>{0.5f});
  const double p1 = 0.999 - (0.1 / 0.1) * 0.05 / (std::sqrt(0.00025) / std::sqrt(0.001) + 1e-8);
  EXPECT_NEAR(p[0], p1, 1e-6);  // = 0.899000002
  // t = 2, g = -0.25: p = p1 * 0.999; m = 0.05 + 0.1 (-0.25 - 0.05) = 0.02;
  //   v = 0.999 * 0.00025 + 0.001 * 0.0625 = 0.00031225;
  //   bias corrections 1 - 0.81 = 0.19 and 1 - 0.998001 = 0.001999
  adam.step(p, std::vector<float>{-0.25f});
  const double p2 = p1 * 0.999 - (0.1 / 0.19) * 0.02 / (std::sqrt(0.00031225) / std::sqrt(0.001999) + 1e-8);
  EXPECT_NEAR(p[0], p2, 1e-6);
  const OptimizerState state = adam.state();
  EXPECT_NEAR(state.buffers.at("exp_avg")[0], 0.02, 1e-8);
  EXPECT_NEAR(state.buffers.at("exp_avg_sq")[0], 0.00031225, 1e-10);
  EXPECT_EQ(state.scalars.at("step"), 2);
}

TEST(AdamWTest, FirstStepMovesEveryWeightByAboutLr) {
  // With bias correction, step 1 is lr * g / (|g| + eps') = lr * sign(g) for |g| >> eps.
  AdamW adam(AdamWConfig{.lr = 0.01, .weight_decay = 0.0}, {0, 3});
  std::vector<float> p = {0.0f, 0.0f, 0.0f};
  adam.step(p, std::vector<float>{3.0f, -0.002f, 0.0f});
  EXPECT_NEAR(p[0], -0.01f, 1e-7);
  EXPECT_NEAR(p[1], 0.01f, 1e-6);
  EXPECT_EQ(p[2], 0.0f);  // zero gradient: m = 0
}

template <class Opt, class Config>
void expect_bit_identical_continuation(const Config& config) {
  const int64_t n = 37;
  auto grad_at = [](int step, int64_t i) { return std::sin(0.3f * step + 0.7f * i); };
  std::vector<float> p(n, 0.5f), g(n);
  Opt first(config, {10, 10 + n});
  for (int s = 0; s < 3; ++s) {
    for (int64_t i = 0; i < n; ++i) g[i] = grad_at(s, i);
    first.step(p, g);
  }
  const OptimizerState saved = first.state();
  std::vector<float> p_restored = p;
  for (int s = 3; s < 6; ++s) {
    for (int64_t i = 0; i < n; ++i) g[i] = grad_at(s, i);
    first.step(p, g);
  }
  Opt second(config, {10, 10 + n});
  second.load_state(saved);
  for (int s = 3; s < 6; ++s) {
    for (int64_t i = 0; i < n; ++i) g[i] = grad_at(s, i);
    second.step(p_restored, g);
  }
  EXPECT_EQ(p, p_restored);  // bitwise
  EXPECT_EQ(first.state().buffers, second.state().buffers);
  EXPECT_EQ(second.steps(), 6);
}

TEST(OptimizerStateTest, SaveRestoreContinuesBitIdentically) {
  expect_bit_identical_continuation<AdamW>(AdamWConfig{.lr = 0.01});
  expect_bit_identical_continuation<Sgd>(SgdConfig{.lr = 0.01, .momentum = 0.9, .weight_decay = 0.1});
}

TEST(OptimizerStateTest, MismatchedStateIsRejected) {
  AdamW adam(AdamWConfig{}, {0, 4});
  OptimizerState state = adam.state();
  Sgd sgd(SgdConfig{.momentum = 0.9}, {0, 4});
  EXPECT_THROW(sgd.load_state(state), RuntimeError);
  AdamW other_range(AdamWConfig{}, {4, 8});
  EXPECT_THROW(other_range.load_state(state), RuntimeError);
  state.buffers.at("exp_avg").resize(3);
  EXPECT_THROW(adam.load_state(state), RuntimeError);
  std::vector<float> p(3), g(3);
  EXPECT_THROW(adam.step(p, g), RuntimeError);
}

TEST(OptimizerStateTest, ShardsUpdateExactlyLikeTheWhole) {
  // ZeRO: two optimizers over [0, 5) and [5, 12) reproduce one over [0, 12) bit for bit.
  const int64_t n = 12, cut = 5;
  std::vector<float> whole(n), sharded(n), g(n);
  for (int64_t i = 0; i < n; ++i) whole[i] = sharded[i] = 0.1f * i - 0.4f;
  AdamW all(AdamWConfig{.lr = 0.05}, {0, n}), lo(AdamWConfig{.lr = 0.05}, {0, cut}),
      hi(AdamWConfig{.lr = 0.05}, {cut, n});
  for (int s = 0; s < 4; ++s) {
    for (int64_t i = 0; i < n; ++i) g[i] = std::cos(1.0f * s + 0.5f * i);
    all.step(whole, g);
    lo.step(std::span(sharded).first(cut), std::span<const float>(g).first(cut));
    hi.step(std::span(sharded).subspan(cut), std::span<const float>(g).subspan(cut));
  }
  EXPECT_EQ(whole, sharded);
}

TEST(OptimizerStateTest, PerParameterNamesCutAtParameterBoundaries) {
  const model::ParamLayout layout(model::MlpShape{.hidden = 2, .ffn = 3, .blocks = 1, .classes = 2});
  // fc1.weight [0,6) fc1.bias [6,9) fc2.weight [9,15) fc2.bias [15,17) head.weight [17,21) ...
  AdamW adam(AdamWConfig{}, {4, 10});
  const auto slices = per_parameter_state(adam.state(), layout.tensors());
  ASSERT_EQ(slices.size(), 6u);  // 3 parameters x 2 buffers
  EXPECT_EQ(slices[0].name, "blocks.0.fc1.weight.exp_avg");
  EXPECT_EQ(slices[0].param_offset, 4);
  EXPECT_EQ(slices[0].values.size(), 2u);
  EXPECT_EQ(slices[1].name, "blocks.0.fc1.weight.exp_avg_sq");
  EXPECT_EQ(slices[2].name, "blocks.0.fc1.bias.exp_avg");
  EXPECT_EQ(slices[2].values.size(), 3u);
  EXPECT_EQ(slices[4].name, "blocks.0.fc2.weight.exp_avg");
  EXPECT_EQ(slices[4].param_offset, 0);
  EXPECT_EQ(slices[4].values.size(), 1u);
}

TEST(OptimizerConfigTest, BadHyperParametersNameTheField) {
  try {
    make_optimizer(AdamWConfig{.beta1 = 1.0}, {0, 1});
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "optimizer.beta1");
  }
  EXPECT_THROW(make_optimizer(SgdConfig{.lr = -1.0}, {0, 1}), ConfigError);
  EXPECT_THROW(make_optimizer(SgdConfig{.nesterov = true}, {0, 1}), ConfigError);
  EXPECT_EQ(make_optimizer(SgdConfig{}, {0, 1})->kind(), "sgd");
}

}  // namespace
}  // namespace parlab::train
