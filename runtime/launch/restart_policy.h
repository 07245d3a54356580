#pragma once
// What the job runner (run_training.h) does after a failed attempt, as a decision table that
// needs no processes: give up on a configuration error, stop when the --max-same-failure rule
// says stop, give up when --max-restarts restarts were spent (even when the rule named a
// fallback: it is announced, not applied), else degrade to the rule's fallback or restart.
// Which world the restart gets (a lost device dropped, --min-nproc, the plan's divisibility) is
// the runner's; when none fits it gives up too (GiveUpReason::kNoWorld).
#include <optional>
#include <string>

#include "runtime/launch/detectors.h"

namespace parlab::launch {

enum class RestartAction { kRestart, kDegrade, kGiveUp };
enum class GiveUpReason { kConfigError, kFallbackStop, kRestartsExhausted, kNoWorld };

struct RestartInputs {
  bool fatal = false;                // a worker failed on a configuration error
  std::optional<Fallback> repeat{};  // the --max-same-failure rule fired: the plan it names
  int restarts = 0;                  // restarts so far
  int max_restarts = 0;
};

struct RestartDecision {
  RestartAction action = RestartAction::kRestart;
  std::optional<Fallback> fallback{};    // kDegrade's plan; on kGiveUp the rule's, when it fired
  std::optional<GiveUpReason> reason{};  // kGiveUp only
  std::string why{};                     // kGiveUp: the sentence for people

  // Turns the decision into giving up (a restart found no world to run on).
  void give_up(GiveUpReason r, std::string sentence);
};

RestartDecision decide_restart(const RestartInputs& in);

}  // namespace parlab::launch
