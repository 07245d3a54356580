// CoreHome (runtime/train/core_home.h): which ranks get a home core, and that going home leaves
// the thread as free as it was.
#include "runtime/train/core_home.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <thread>
#include <vector>

#include "strategy/plan.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

strategy::Plan plan_of(int dp, int tp, int pp) {
  strategy::Plan p;
  p.dp = dp;
  p.tp = tp;
  p.pp = pp;
  return p;
}

TEST(CoreHome, RanksThatOutnumberTheCoresEachGetOneOfTheAllowedCores) {
  const std::vector<int> allowed = {3, 5};  // a cpuset the job was given: homes stay inside it
  for (int r = 0; r < 4; ++r) EXPECT_EQ(CoreHome::choose(allowed, plan_of(4, 1, 1), r, 4), allowed[r % 2]) << r;
  strategy::Plan zero2 = plan_of(4, 1, 1);
  zero2.zero = 2;
  EXPECT_EQ(CoreHome::choose(allowed, zero2, 1, 4), 5);
}

TEST(CoreHome, NoHomeWithinTheCoresWhereRanksMeetInsideTheStepOrWithoutALocalCount) {
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(2, 1, 1), 1, 2));  // ranks within the cores
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(2, 1, 2), 1, 4));  // pipeline hand-offs
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(1, 4, 1), 1, 4));  // tensor-parallel all-reduces
  strategy::Plan zero3 = plan_of(4, 1, 1);
  zero3.zero = 3;
  EXPECT_FALSE(CoreHome::choose({0, 1}, zero3, 1, 4));             // a gather per layer
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(4, 1, 1), 1, 0));  // the launcher did not say
  EXPECT_FALSE(CoreHome().active());
}

std::vector<cpu_set_t> g_calls;
int record(pid_t, size_t, const cpu_set_t* set) {
  g_calls.push_back(*set);
  return 0;
}

TEST(CoreHome, GoingHomeIsTheHomeCoreAloneThenEveryCoreAllowedBefore) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const int allowed = CPU_COUNT(&before);
  const CoreHome home = CoreHome::for_rank(plan_of(allowed + 1, 1, 1), allowed, allowed + 1, record);
  ASSERT_TRUE(home.active());
  g_calls.clear();
  home.return_home();
  ASSERT_EQ(g_calls.size(), 2u);
  EXPECT_EQ(CPU_COUNT(&g_calls[0]), 1);
  EXPECT_TRUE(CPU_ISSET(home.cpu(), &g_calls[0]));
  EXPECT_TRUE(CPU_EQUAL(&g_calls[1], &before));
}

TEST(CoreHome, ATrainerGivenAHomeGoesThereTwiceAStep) {
  // The worker builds the home; the trainer hands it to the executor, which calls it before the
  // update and after the step's last collective.
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const int allowed = CPU_COUNT(&before);
  TrainerOptions options;
  options.core_home = CoreHome::for_rank(plan_of(allowed + 1, 1, 1), 0, allowed + 1, record);
  ASSERT_TRUE(options.core_home.active());
  g_calls.clear();
  const int steps = 2;
  testing::train_threads(1, testing::tiny_config("gbs=8", 1, 64), steps, {}, options);
  ASSERT_EQ(g_calls.size(), size_t(steps * 2 * 2));  // two homecomings a step, two system calls each
  for (size_t i = 0; i < g_calls.size(); i += 2) {
    EXPECT_EQ(CPU_COUNT(&g_calls[i]), 1) << i;
    EXPECT_TRUE(CPU_EQUAL(&g_calls[i + 1], &before)) << i;
  }
  g_calls.clear();
  testing::train_threads(1, testing::tiny_config("gbs=8", 1, 64), steps);  // no home: no call
  EXPECT_TRUE(g_calls.empty());
}

TEST(CoreHome, AfterGoingHomeForRealTheThreadMayRunAnywhereItCouldBefore) {
  std::thread([] {
    cpu_set_t before, after;
    ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
    const int allowed = CPU_COUNT(&before);
    const CoreHome home = CoreHome::for_rank(plan_of(allowed + 1, 1, 1), 0, allowed + 1);
    ASSERT_TRUE(home.active());
    home.return_home();
    ASSERT_EQ(sched_getaffinity(0, sizeof after, &after), 0);
    EXPECT_TRUE(CPU_EQUAL(&after, &before));
  }).join();
}

}  // namespace
}  // namespace parlab::train
