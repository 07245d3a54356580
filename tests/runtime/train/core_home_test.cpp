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
  // They meet once a step: they go back there after the meeting, and may move between meetings.
  EXPECT_EQ(CoreHome::keep(plan_of(4, 1, 1), 4, 2), CoreHome::Keep::kReturns);
  EXPECT_EQ(CoreHome::keep(zero2, 4, 2), CoreHome::Keep::kReturns);
}

TEST(CoreHome, RanksThatMeetInsideTheStepStayHomeWhereTheyDivideEvenlyOverTheCores) {
  const std::vector<int> allowed = {0, 1};
  const strategy::Plan tp_pp = plan_of(1, 2, 2);
  for (int r = 0; r < 4; ++r) EXPECT_EQ(CoreHome::choose(allowed, tp_pp, r, 4), r % 2) << "a TP pair on two cores";
  strategy::Plan zero3 = plan_of(4, 1, 1);
  zero3.zero = 3;
  for (const strategy::Plan& p : {tp_pp, plan_of(1, 4, 1), plan_of(1, 1, 4), zero3})
    EXPECT_EQ(CoreHome::keep(p, 4, 2), CoreHome::Keep::kStays);
  // Three on two cores: two would share one for the whole step, and set the group's pace.
  EXPECT_EQ(CoreHome::keep(plan_of(1, 1, 3), 3, 2), CoreHome::Keep::kNone);
  EXPECT_FALSE(CoreHome::choose(allowed, plan_of(1, 1, 3), 2, 3));
}

TEST(CoreHome, NoHomeWithinTheCoresOrWithoutALocalCount) {
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(2, 1, 1), 1, 2));  // data parallel within the cores
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(1, 2, 1), 1, 2));  // tensor parallel within the cores
  EXPECT_FALSE(CoreHome::choose({0, 1}, plan_of(4, 1, 1), 1, 0));  // the launcher did not say
  EXPECT_EQ(CoreHome::keep(plan_of(1, 2, 2), 4, 0), CoreHome::Keep::kNone);
  EXPECT_FALSE(CoreHome().active());
  EXPECT_FALSE(CoreHome().returns());
}

// The CPUs this thread may run on now.
cpu_set_t allowed_now() {
  cpu_set_t s;
  CPU_ZERO(&s);
  EXPECT_EQ(sched_getaffinity(0, sizeof s, &s), 0);
  return s;
}

std::vector<cpu_set_t> g_calls;
int record(pid_t, size_t, const cpu_set_t* set) {
  g_calls.push_back(*set);
  return 0;
}

TEST(CoreHome, GoingHomeIsTheHomeCoreAloneThenEveryCoreAllowedBefore) {
  const cpu_set_t before = allowed_now();
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

TEST(CoreHome, SettlingIsTheHomeCoreAloneForGoodAndOnlyForRanksThatStay) {
  const cpu_set_t before = allowed_now();
  const int allowed = CPU_COUNT(&before);
  const CoreHome stays = CoreHome::for_rank(plan_of(1, 2, 2 * allowed), 1, 4 * allowed, record);
  ASSERT_TRUE(stays.active());
  EXPECT_FALSE(stays.returns());
  g_calls.clear();
  stays.settle();
  ASSERT_EQ(g_calls.size(), 1u);
  EXPECT_EQ(CPU_COUNT(&g_calls[0]), 1);
  EXPECT_TRUE(CPU_ISSET(stays.cpu(), &g_calls[0]));
  stays.return_home();  // nothing to go back to: it never left
  EXPECT_EQ(g_calls.size(), 1u);
  const CoreHome returns = CoreHome::for_rank(plan_of(allowed + 1, 1, 1), 0, allowed + 1, record);
  ASSERT_TRUE(returns.returns());
  g_calls.clear();
  returns.settle();  // a rank that returns is free between meetings
  EXPECT_TRUE(g_calls.empty());
}

// The system calls a one-rank trainer makes over `steps` steps, given `home` (recorded).
std::vector<cpu_set_t> calls_training_with(const CoreHome& home, int steps) {
  TrainerOptions options;
  options.core_home = home;
  g_calls.clear();
  testing::train_threads(1, testing::tiny_config("gbs=8", 1, 64), steps, {}, options);
  return g_calls;
}

TEST(CoreHome, ATrainerGivenAHomeGoesThereTwiceAStep) {
  // The worker builds the home; the trainer hands it to the executor, which calls it before the
  // update and after the step's last collective.
  const cpu_set_t before = allowed_now();
  const int allowed = CPU_COUNT(&before);
  const CoreHome home = CoreHome::for_rank(plan_of(allowed + 1, 1, 1), 0, allowed + 1, record);
  ASSERT_TRUE(home.returns());
  const int steps = 2;
  const std::vector<cpu_set_t> calls = calls_training_with(home, steps);
  ASSERT_EQ(calls.size(), size_t(steps * 2 * 2));  // two homecomings a step, two system calls each
  for (size_t i = 0; i < calls.size(); i += 2) {
    EXPECT_EQ(CPU_COUNT(&calls[i]), 1) << i;
    EXPECT_TRUE(CPU_EQUAL(&calls[i + 1], &before)) << i;
  }
  EXPECT_TRUE(calls_training_with(CoreHome(), steps).empty()) << "no home: no call";
}

TEST(CoreHome, ATrainerGivenAHomeToStayInSettlesThereOnceBeforeItsFirstStep) {
  const cpu_set_t now = allowed_now();
  const int allowed = CPU_COUNT(&now);
  const CoreHome home = CoreHome::for_rank(plan_of(1, 2, allowed), 0, 2 * allowed, record);
  ASSERT_TRUE(home.active());
  ASSERT_FALSE(home.returns());
  const std::vector<cpu_set_t> calls = calls_training_with(home, 3);
  ASSERT_EQ(calls.size(), 1u) << "once, and no homecomings after the meetings";
  EXPECT_EQ(CPU_COUNT(&calls[0]), 1);
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
