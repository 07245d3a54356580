#include "runtime/launch/restart_policy.h"

namespace parlab::launch {

void RestartDecision::give_up(GiveUpReason r, std::string sentence) {
  action = RestartAction::kGiveUp;
  reason = r;
  why = std::move(sentence);
}

RestartDecision decide_restart(const RestartInputs& in) {
  RestartDecision d;
  if (in.fatal) {
    d.give_up(GiveUpReason::kConfigError, "not restarted: a configuration error does not go away on restart");
    return d;
  }
  d.fallback = in.repeat;
  if (in.repeat == Fallback::kStop) {
    d.give_up(GiveUpReason::kFallbackStop,
              "stopped (--fallback " + std::string(fallback_plan(Fallback::kStop).flag) + ")");
    return d;
  }
  if (in.restarts >= in.max_restarts) {
    d.give_up(GiveUpReason::kRestartsExhausted, "gave up after " + std::to_string(in.restarts) +
                                                    " restart(s) (--max-restarts " + std::to_string(in.max_restarts) +
                                                    ")");
    return d;
  }
  d.action = in.repeat ? RestartAction::kDegrade : RestartAction::kRestart;
  return d;
}

}  // namespace parlab::launch
