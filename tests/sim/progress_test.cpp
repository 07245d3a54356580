// Progress, cancellation and several plans at once: what a desktop program needs to run long
// simulations off its UI thread.
#include <gtest/gtest.h>

#include <atomic>

#include "sim/simulate.h"
#include "strategy/io.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::resolved;

// Several plans in parallel children give what each gives alone, byte for byte.
TEST(Progress, PlansSimulatedTogetherMatchOneByOne) {
  const auto cluster = testing::uniform_cluster(4, 2);
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  std::vector<strategy::Plan> plans;
  for (const char* text : {"dp=8", "tp=2,pp=2,dp=2,microbatches=4", "pp=2,dp=4,zero=1,microbatches=2"})
    plans.push_back(resolved(text, model, cluster, 8));
  const auto together = simulate_plans(model, plans, cluster, {}, 2);
  ASSERT_EQ(together.size(), plans.size());
  for (size_t k = 0; k < plans.size(); ++k)
    EXPECT_EQ(to_json(together[k]).dump(), to_json(simulate_plan(model, plans[k], cluster)).dump()) << k;
}

// A simulation of a few seconds reports fractions in [0, 1] that never go back, and stops when
// asked: the callback sets the flag at its first report from the simulation itself.
TEST(Progress, ReportsAndCancels) {
  const auto cluster = strategy::load_cluster("dgx-a100");
  const auto model = strategy::load_model("llama2-7b");
  const auto plan = resolved("dp=128", model, cluster, 128);
  std::atomic<bool> cancel{false};
  std::vector<double> fractions;
  std::vector<std::string> lines;
  SimOptions o;
  o.cancel = &cancel;
  o.on_progress = [&](double f, std::string_view what) {
    fractions.push_back(f);
    lines.emplace_back(what);
    if (lines.size() >= 2) cancel = true;  // the first line is "building ..."
  };
  EXPECT_THROW(simulate_plan(model, plan, cluster, o), SimulationCancelled);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines.front(), "building 128 step programs");
  EXPECT_NE(lines[1].find("s simulated"), std::string::npos) << lines[1];
  for (size_t k = 0; k < fractions.size(); ++k) {
    EXPECT_GE(fractions[k], k ? fractions[k - 1] : 0.0);
    EXPECT_LE(fractions[k], 1.0);
  }
  // Cancelled before it starts: no process at all.
  EXPECT_THROW(simulate_plan(model, plan, cluster, o), SimulationCancelled);
}

}  // namespace
}  // namespace parlab::sim
