// The restart decision table (runtime/launch/restart_policy.h), without processes: each row of
// inputs and the action, fallback and reason it must give.
#include "runtime/launch/restart_policy.h"

#include <gtest/gtest.h>

namespace parlab::launch {
namespace {

struct Row {
  const char* name;
  RestartInputs in;
  RestartAction action;
  std::optional<Fallback> fallback;
  std::optional<GiveUpReason> reason;
};

TEST(RestartPolicyTest, TheDecisionTable) {
  const Row rows[] = {
      {"a first failure restarts", {.restarts = 0, .max_restarts = 2}, RestartAction::kRestart, {}, {}},
      {"the last restart left is taken", {.restarts = 1, .max_restarts = 2}, RestartAction::kRestart, {}, {}},
      {"no restarts left",
       {.restarts = 2, .max_restarts = 2},
       RestartAction::kGiveUp,
       {},
       GiveUpReason::kRestartsExhausted},
      {"--max-restarts 0",
       {.restarts = 0, .max_restarts = 0},
       RestartAction::kGiveUp,
       {},
       GiveUpReason::kRestartsExhausted},
      {"a configuration error never restarts",
       {.fatal = true, .restarts = 0, .max_restarts = 5},
       RestartAction::kGiveUp,
       {},
       GiveUpReason::kConfigError},
      {"the repeat rule's survivors degrade",
       {.repeat = Fallback::kSurvivors, .restarts = 0, .max_restarts = 3},
       RestartAction::kDegrade,
       Fallback::kSurvivors,
       {}},
      {"the repeat rule's single degrades",
       {.repeat = Fallback::kSingle, .restarts = 1, .max_restarts = 3},
       RestartAction::kDegrade,
       Fallback::kSingle,
       {}},
      {"the repeat rule's stop stops, restarts left or not",
       {.repeat = Fallback::kStop, .restarts = 0, .max_restarts = 3},
       RestartAction::kGiveUp,
       Fallback::kStop,
       GiveUpReason::kFallbackStop},
      {"a fallback with no restarts left is named, not applied",
       {.repeat = Fallback::kSurvivors, .restarts = 3, .max_restarts = 3},
       RestartAction::kGiveUp,
       Fallback::kSurvivors,
       GiveUpReason::kRestartsExhausted},
      {"a configuration error wins over the repeat rule",
       {.fatal = true, .repeat = Fallback::kSingle, .max_restarts = 3},
       RestartAction::kGiveUp,
       {},
       GiveUpReason::kConfigError},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const RestartDecision d = decide_restart(r.in);
    EXPECT_EQ(d.action, r.action);
    EXPECT_EQ(d.fallback, r.fallback);
    EXPECT_EQ(d.reason, r.reason);
    EXPECT_EQ(d.why.empty(), r.action != RestartAction::kGiveUp);
  }
}

TEST(RestartPolicyTest, GivingUpSaysWhy) {
  EXPECT_EQ(decide_restart({.restarts = 2, .max_restarts = 2}).why, "gave up after 2 restart(s) (--max-restarts 2)");
  EXPECT_EQ(decide_restart({.repeat = Fallback::kStop, .max_restarts = 1}).why, "stopped (--fallback stop)");
  EXPECT_EQ(decide_restart({.fatal = true}).why, "not restarted: a configuration error does not go away on restart");
  // A restart that finds no world to run on becomes giving up, with the runner's sentence.
  RestartDecision d = decide_restart({.max_restarts = 1});
  d.give_up(GiveUpReason::kNoWorld, "cannot continue: 1 worker(s) left, --min-nproc 2");
  EXPECT_EQ(d.action, RestartAction::kGiveUp);
  EXPECT_EQ(d.reason, GiveUpReason::kNoWorld);
}

}  // namespace
}  // namespace parlab::launch
