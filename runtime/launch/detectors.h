#pragma once
// The hang and straggler detectors, defined once: their thresholds, who owns them, what they do,
// when the job stops, and the fallback plans. The supervisor (heartbeat), the workers (collective
// timeout), the job runner (culprit, restarts, --max-same-failure, --fallback, straggler windows)
// and the defaults of `parlab train`'s flags read these constants; `parlab runbook` renders the
// same table (docs/runbook.md is `parlab runbook --markdown`), so the runbook cannot say something
// the software does not do.
//
// The failure class (the chapter's): one rank skips a batch and misses an all-reduce, leaving
// every other rank hung. Its relatives: a rank that stops responding outside any collective, and
// a rank that is merely slow and makes everyone wait at every all-reduce.
//
//   detector            fires when                                     culprit named by
//   collective-timeout  a collective makes no progress for the timeout  the flight-recorder analyzer
//   heartbeat           a rank's heartbeat is older than its timeout    the silent rank itself
//   straggler           modified z-score and ratio of per-rank compute  detect_stragglers
//
// Same failure, again: a restart clears a transient fault. When the same failure (kind and
// culprit device) happened more than --max-same-failure times, restarting again would loop, so
// the job degrades to the named --fallback plan, once; a failure after that stops it.
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/diagnose/straggler.h"

namespace parlab::launch {

// ---- thresholds ----

// Per-collective watchdog (every rank): the lab's and production's defaults (communicator.h says
// why production is 10 minutes: PyTorch's default process-group timeout).
inline constexpr std::chrono::milliseconds kLabCollectiveTimeout = comm::kDefaultTimeout;
inline constexpr std::chrono::milliseconds kProductionCollectiveTimeout = comm::kProductionTimeout;
// Heartbeat timeout (the supervisor): below the collective timeout, so a frozen rank is named
// before its peers' collectives expire. Production: PyTorch's TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC
// default (8 minutes), also below its 10-minute collective timeout.
inline constexpr std::chrono::milliseconds kLabHeartbeatTimeout{10'000};
inline constexpr std::chrono::milliseconds kProductionHeartbeatTimeout{480'000};
// A rank beats every min(1 s, timeout / 4): four chances to beat before it is declared silent.
std::chrono::milliseconds heartbeat_interval(std::chrono::milliseconds heartbeat_timeout);
// While other ranks fail on communication, a running rank silent for 3 beat intervals is the
// culprit (it stopped; they waited for it), even before its own heartbeat timeout.
std::chrono::milliseconds silent_after(std::chrono::milliseconds heartbeat_timeout);
// A rank that has not beaten yet (starting, loading libraries, waiting in the rendezvous) is
// given the larger of the heartbeat and the collective timeout: startup is not a hang.
std::chrono::milliseconds first_beat_allowance(std::chrono::milliseconds heartbeat_timeout,
                                               std::chrono::milliseconds collective_timeout);
// Restarts after the same failure before the fallback plan.
inline constexpr int kDefaultMaxSameFailure = 2;

// During a run the straggler rule is checked over at most this many of the latest windows.
inline constexpr int kStragglerRecentWindows = 10;

// Detector ids as incidents name them.
inline constexpr std::string_view kCollectiveTimeoutDetector = "collective-timeout";
inline constexpr std::string_view kHeartbeatDetector = "heartbeat";
inline constexpr std::string_view kStragglerDetector = "straggler";

// ---- fallback plans ----

enum class Fallback { kStop, kSurvivors, kSingle };
inline constexpr Fallback kDefaultFallback = Fallback::kStop;

struct FallbackPlan {
  Fallback kind;
  std::string_view flag;  // --fallback value: "stop", "survivors", "single"
  std::string_view name;  // "DDP on the surviving ranks"
  std::string_view what;  // what the job does, one sentence
};
const std::vector<FallbackPlan>& fallback_plans();
const FallbackPlan& fallback_plan(Fallback kind);
// Throws ConfigError naming --fallback and the allowed values.
Fallback parse_fallback(std::string_view text);

// How often each (failure kind, culprit device) happened: the --max-same-failure rule.
class FailureHistory {
 public:
  // Counts one more; returns how often this failure has happened now.
  int add(const std::string& kind, int device) { return ++counts_[{kind, device}]; }
  int count(const std::string& kind, int device) const {
    const auto it = counts_.find({kind, device});
    return it == counts_.end() ? 0 : it->second;
  }

 private:
  std::map<std::pair<std::string, int>, int> counts_;
};

// ---- the table and the runbook ----

// The values the runbook states; its defaults are the constants above (what `parlab train`
// uses when no flag says otherwise).
struct DetectorSettings {
  std::chrono::milliseconds collective_timeout = kLabCollectiveTimeout;
  std::chrono::milliseconds heartbeat_timeout = kLabHeartbeatTimeout;
  int max_same_failure = kDefaultMaxSameFailure;
  Fallback fallback = kDefaultFallback;
  diagnose::StragglerOptions straggler;
};

struct Detector {
  std::string id;          // kCollectiveTimeoutDetector, ...
  std::string failure;     // the failure it catches, as a heading
  std::string symptom;     // what a person sees
  std::string fires;       // the rule, with its numbers
  std::string lab;         // lab default (the flag)
  std::string production;  // production default and its source
  std::string owner;       // who acts automatically, and who is told
  std::string culprit;     // how the culprit is named (the command)
  std::string mitigation;  // what happens next
  std::string stop;        // when the job stops trying
  std::string fallback;    // what it degrades to
  std::string reproduce;   // a command that shows it in the lab
};

std::vector<Detector> detectors(const DetectorSettings& settings = {});

// "30 s", "10 min", "250 ms": durations as the runbook and the flags' help print them.
std::string human_duration(std::chrono::milliseconds d);

// The runbook: the detectors above, then the fallback plans. Markdown for docs/runbook.md,
// otherwise plain text for a terminal.
std::string render_runbook(bool markdown, const DetectorSettings& settings = {});

}  // namespace parlab::launch
