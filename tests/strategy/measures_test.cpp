// The run-level measures, each on inputs whose answer is known by hand: the paired speedup on
// noisy rounds (where it differs from the ratio of medians), efficiency, relative error, regret,
// ranks with ties and Spearman's rho.
#include <gtest/gtest.h>

#include <cmath>

#include "base/errors.h"
#include "strategy/measures.h"

namespace parlab::strategy {
namespace {

// Three rounds at 1 and 2 workers on a machine that was loud in round 1: 2 workers measured
// 0.6 s there beside a 1-worker 1.2 s. Paired ratios: 1.0/0.5 = 2, 1.2/0.6 = 2, 1.0/0.55 = 1.818..
// -> median 2. Ratio of medians: 1.0 / 0.55 = 1.818..: the estimator the tree does not use.
const std::vector<double> kOne = {1.0, 1.2, 1.0}, kTwo = {0.5, 0.6, 0.55};

TEST(Measures, SpeedupIsTheMedianOfPairedPerRoundRatios) {
  const Measure m = speedup(kOne, kTwo, 64, 64);
  EXPECT_DOUBLE_EQ(m.value, 2.0);
  EXPECT_EQ(m.n, 3);
  EXPECT_NEAR(m.spread, (2.0 - (2.0 + 1.0 / 0.55) / 2) / 2, 1e-12);   // (q75 - q25) / 2
  EXPECT_GT(std::fabs(m.value - median(kOne) / median(kTwo)), 0.15);  // the rows are discriminating
}

TEST(Measures, SpeedupCountsTheGlobalBatchesAndFallsBackToMediansWhenUnpaired) {
  // Throughput ratio: twice the samples in the same time is twice the speed.
  EXPECT_DOUBLE_EQ(speedup(1.0, 1.0, 32, 64), 2.0);
  EXPECT_DOUBLE_EQ(speedup(std::vector<double>{1.0}, std::vector<double>{0.25}, 64, 64).value, 4.0);
  // Rounds that cannot be paired: the ratio of the medians, one sample.
  const Measure unpaired = speedup(kOne, std::vector<double>{0.5, 0.6}, 64, 64);
  EXPECT_DOUBLE_EQ(unpaired.value, 1.0 / 0.55);
  EXPECT_EQ(unpaired.n, 1);
  EXPECT_EQ(unpaired.spread, 0);
  // Nothing to measure: n = 0.
  EXPECT_EQ(speedup(std::vector<double>{}, kTwo, 1, 1).n, 0);
  EXPECT_EQ(speedup(kOne, std::vector<double>{0.5, 0, 0.5}, 1, 1).n, 0);
}

TEST(Measures, EfficiencyRelativeErrorAndRegret) {
  EXPECT_DOUBLE_EQ(efficiency(3.0, 4, 1), 0.75);
  EXPECT_DOUBLE_EQ(efficiency(1.5, 4, 2), 0.75);
  EXPECT_NEAR(relative_error(1.1, 1.0), 0.1, 1e-15);
  EXPECT_NEAR(relative_error(0.8, 1.0), -0.2, 1e-15);
  // A choice that ran 0.40 s against a fastest 0.30 s gave away a quarter of the throughput.
  EXPECT_DOUBLE_EQ(regret(0.40, 0.30), 0.25);
  EXPECT_DOUBLE_EQ(regret(0.30, 0.30), 0);
  EXPECT_DOUBLE_EQ(regret(0.30 * 1.05, 0.30), 1 - 1 / 1.05);
}

// Each round predicted afresh beside its measurement (the splits experiment in rounds). Round 1's
// profile ran in a fast moment of the machine, round 2's measurement in a slow one: the paired errors
// -10%, -50%, -40% have the median -40%, where the medians' error (0.9 / 1.0 - 1) would say -10%.
TEST(Measures, RelativeErrorIsTheMedianOfPairedPerRoundErrors) {
  const std::vector<double> pred = {0.9, 0.5, 1.2}, meas = {1.0, 1.0, 2.0};
  const Measure m = relative_error(pred, meas);
  EXPECT_NEAR(m.value, -0.4, 1e-12);
  EXPECT_EQ(m.n, 3);
  EXPECT_NEAR(m.spread, ((-0.1 + -0.4) / 2 - (-0.5 + -0.4) / 2) / 2, 1e-12);         // (q75 - q25) / 2
  EXPECT_GT(std::fabs(m.value - relative_error(median(pred), median(meas))), 0.25);  // discriminating
  // One prediction beside several measured rounds cannot be paired: the medians' error.
  const Measure once = relative_error(std::vector<double>{0.9}, meas);
  EXPECT_NEAR(once.value, -0.1, 1e-12);
  EXPECT_EQ(once.n, 1);
  EXPECT_EQ(relative_error(std::vector<double>{1.1}, std::vector<double>{1.0}).value, relative_error(1.1, 1.0));
  EXPECT_EQ(relative_error(std::vector<double>{}, meas).n, 0);
  EXPECT_EQ(relative_error(pred, std::vector<double>{1.0, 0, 1.0}).n, 0);
}

TEST(Measures, RanksShareTiesAndSpearmanMatchesHandComputations) {
  EXPECT_EQ(ranks({10, 30, 20}), (std::vector<double>{1, 3, 2}));
  EXPECT_EQ(ranks({5, 1, 5, 3}), (std::vector<double>{3.5, 1, 3.5, 2}));
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {10, 20, 30, 40}), 1);
  EXPECT_DOUBLE_EQ(spearman({1, 2, 3, 4}, {4, 3, 2, 1}), -1);
  // No ties: rho = 1 - 6 sum d^2 / (n (n^2 - 1)); ranks (1 2 3 4 5) against (2 1 4 3 5): sum d^2 = 4
  // -> 1 - 24 / 120 = 0.8.
  EXPECT_NEAR(spearman({1, 2, 3, 4, 5}, {0.2, 0.1, 0.4, 0.3, 0.5}), 0.8, 1e-12);
  // With ties: x ranks (1.5 1.5 3), y ranks (1 2 3), both about the mean rank 2: deviations
  // (-0.5 -0.5 1) and (-1 0 1), so rho = 1.5 / sqrt(1.5 * 2).
  EXPECT_NEAR(spearman({7, 7, 9}, {1, 2, 3}), 1.5 / std::sqrt(1.5 * 2), 1e-12);
  EXPECT_EQ(spearman({1, 1, 1}, {1, 2, 3}), 0);  // a constant series orders nothing
  EXPECT_THROW(spearman({1}, {1}), ConfigError);
  EXPECT_THROW(spearman({1, 2}, {1, 2, 3}), ConfigError);
}

TEST(Measures, RoundStepTimesAreReadBackInRoundOrderFromRunMetrics) {
  std::map<std::string, double> metrics = {
      {"step_seconds", 9}, {round_step_metric(1), 0.6}, {round_step_metric(0), 0.5}};
  EXPECT_EQ(round_step_metric(0), "rounds.0.step_seconds");
  EXPECT_EQ(round_steps(metrics), (std::vector<double>{0.5, 0.6}));
  metrics[round_step_metric(3)] = 0.7;  // a gap ends the series: round 2 is missing
  EXPECT_EQ(round_steps(metrics).size(), 2u);
  EXPECT_TRUE(round_steps({}).empty());
}

}  // namespace
}  // namespace parlab::strategy
