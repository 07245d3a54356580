// The detector table: thresholds derived as documented, fallback plans parsed by name, repeats
// counted per failure and device, and a runbook that states the numbers the code uses (each
// expected value below is written out by hand, not read from the constants).
#include <gtest/gtest.h>

#include <cctype>

#include "runtime/launch/detectors.h"
#include "base/errors.h"

namespace parlab::launch {
namespace {

using std::chrono::milliseconds;

TEST(DetectorsTest, HeartbeatIntervalIsAQuarterOfTheTimeoutAtMostOneSecond) {
  EXPECT_EQ(heartbeat_interval(milliseconds(10'000)), milliseconds(1000));
  EXPECT_EQ(heartbeat_interval(milliseconds(2000)), milliseconds(500));
  EXPECT_EQ(heartbeat_interval(milliseconds(1000)), milliseconds(250));
  EXPECT_EQ(silent_after(milliseconds(10'000)), milliseconds(3000));  // three beats
  EXPECT_EQ(silent_after(milliseconds(2000)), milliseconds(1500));
  // A rank that has not beaten yet gets the larger of the two timeouts.
  EXPECT_EQ(first_beat_allowance(milliseconds(2000), milliseconds(30'000)), milliseconds(30'000));
}

TEST(DetectorsTest, DurationsPrintAsPeopleWriteThem) {
  EXPECT_EQ(human_duration(milliseconds(30'000)), "30 s");
  EXPECT_EQ(human_duration(milliseconds(600'000)), "10 min");
  EXPECT_EQ(human_duration(milliseconds(480'000)), "8 min");
  EXPECT_EQ(human_duration(milliseconds(1500)), "1.5 s");
  EXPECT_EQ(human_duration(milliseconds(250)), "250 ms");
}

TEST(DetectorsTest, FallbackPlansByName) {
  EXPECT_EQ(parse_fallback("stop"), Fallback::kStop);
  EXPECT_EQ(parse_fallback("survivors"), Fallback::kSurvivors);
  EXPECT_EQ(parse_fallback("single"), Fallback::kSingle);
  EXPECT_EQ(fallback_plan(Fallback::kSurvivors).name, "DDP on the surviving ranks");
  EXPECT_EQ(fallback_plan(Fallback::kSingle).name, "single-worker baseline");
  try {
    parse_fallback("retry");
    FAIL() << "retry is not a plan";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--fallback"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("one of stop, survivors, single"), std::string::npos) << e.what();
  }
}

TEST(DetectorsTest, TheSameFailureIsCountedPerKindAndDevice) {
  FailureHistory h;
  EXPECT_EQ(h.add("hang", 1), 1);
  EXPECT_EQ(h.add("hang", 1), 2);
  EXPECT_EQ(h.add("hang", 2), 1);    // another device
  EXPECT_EQ(h.add("killed", 1), 1);  // another kind
  EXPECT_EQ(h.count("hang", 1), 2);
  EXPECT_EQ(h.count("crash", 0), 0);
}

TEST(DetectorsTest, TheRunbookStatesTheNumbersTheCodeUses) {
  const std::string md = render_runbook(true);
  for (const char* want :
       {"--timeout 30 s", "10 min (PyTorch's default process-group timeout)", "--heartbeat-timeout 10 s",
        "8 min (PyTorch's TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)", "every 1 s (min(1 s, timeout / 4))",
        "a rank silent for 3 s (3 beats)", "--max-same-failure 2 times", "window 20 steps, z > 3.5, ratio > 1.50x",
        "`parlab analyze hang RUN_DIR`", "`parlab analyze stragglers RUN_DIR`", "DDP on the surviving ranks",
        "single-worker baseline", "| stop (default) |", "--fault skip-allreduce:rank=2,step=7"})
    EXPECT_NE(md.find(want), std::string::npos) << want;
  // Every detector has every part of a runbook entry.
  for (const char* part : {"**Symptom.**", "**Detector.**", "**Owner.**", "**Name the culprit.**", "**Mitigation.**",
                           "**Stop condition.**", "**Fallback.**", "**Reproduce.**"}) {
    size_t n = 0;
    for (size_t at = md.find(part); at != std::string::npos; at = md.find(part, at + 1)) ++n;
    EXPECT_EQ(n, 3u) << part;
  }
  // Other settings, other numbers: the text is computed, not written.
  DetectorSettings s;
  s.collective_timeout = milliseconds(2000);
  s.heartbeat_timeout = milliseconds(1000);
  s.max_same_failure = 5;
  s.fallback = Fallback::kSingle;
  std::string other;  // plain text, wrapped for a terminal: compare with single spaces
  for (char c : render_runbook(false, s))
    if (!(std::isspace(static_cast<unsigned char>(c)) && !other.empty() && other.back() == ' '))
      other += std::isspace(static_cast<unsigned char>(c)) ? ' ' : c;
  for (const char* want : {"--timeout 2 s", "--heartbeat-timeout 1 s", "every 250 ms", "--max-same-failure 5 times",
                           "--fallback single: single-worker baseline"})
    EXPECT_NE(other.find(want), std::string::npos) << want;
  EXPECT_EQ(other.find("**"), std::string::npos);  // plain text for a terminal
}

}  // namespace
}  // namespace parlab::launch
