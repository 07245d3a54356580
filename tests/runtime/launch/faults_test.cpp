// --fault parsing: every kind reads back to itself, and every mistake names the flag and the key.
// The proof's trial draws depend on the seed and the trial only.
#include <gtest/gtest.h>

#include <set>

#include "runtime/launch/faults.h"
#include "runtime/launch/kill_resume_proof.h"
#include "strategy/errors.h"

namespace parlab::launch {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_fault(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(FaultParseTest, EveryKindRoundTrips) {
  for (const std::string text : {"kill:rank=1,step=7", "kill-during-checkpoint:rank=0,step=10,phase=before-manifest",
                                 "kill-during-checkpoint:rank=1,step=10,phase=mid-shard-write",
                                 "corrupt-checkpoint:step=10", "corrupt-checkpoint:step=4,shard=1",
                                 "lose-rank:rank=1,step=5"})
    EXPECT_EQ(parse_fault(text).to_string(), text);
  const FaultSpec f = parse_fault("kill-during-checkpoint:step=10,phase=after-pointer-update");
  EXPECT_EQ(f.kind, FaultKind::kKillDuringCheckpoint);
  EXPECT_EQ(f.rank, 0);  // the committing rank by default
  EXPECT_EQ(f.step, 10);
  EXPECT_EQ(f.phase, checkpoint::SavePhase::kAfterPointerUpdate);
}

TEST(FaultParseTest, MistakesNameTheFlagAndTheKey) {
  EXPECT_EQ(error_of("kill:rank=1"), "--fault = kill:rank=1: missing key 'step' (kill takes rank, step)");
  EXPECT_NE(error_of("kill:rank=1,step=2,phase=x").find("unknown key 'phase'"), std::string::npos);
  EXPECT_NE(error_of("explode:rank=1").find("unknown fault 'explode'"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=-1,step=2").find("key 'rank' = '-1' must be an integer >= 0"), std::string::npos);
  EXPECT_NE(error_of("kill:rank=1,step=2,step=3").find("key 'step' given twice"), std::string::npos);
  EXPECT_NE(error_of("kill:rank").find("'rank' is not key=value"), std::string::npos);
  EXPECT_NE(error_of("kill-during-checkpoint:step=4,phase=later").find("must be one of mid-shard-write"),
            std::string::npos);
  // Commit phases run on rank 0 only: asking for rank 1 would never fire.
  EXPECT_NE(error_of("kill-during-checkpoint:rank=1,step=4,phase=before-rename").find("runs on rank 0 only"),
            std::string::npos);
}

TEST(FaultCheckTest, FaultsMustFitTheJob) {
  auto check = [](const std::string& text, int nproc, int64_t steps, int64_t every) -> std::string {
    try {
      check_faults({parse_fault(text)}, nproc, steps, every);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(check("kill:rank=1,step=7", 2, 10, 5), "");
  EXPECT_NE(check("kill:rank=2,step=7", 2, 10, 5).find("rank 2 does not exist with --nproc 2"), std::string::npos);
  EXPECT_NE(check("kill:rank=0,step=10", 2, 10, 5).find("never reached"), std::string::npos);
  EXPECT_NE(check("corrupt-checkpoint:step=7", 2, 10, 5).find("no checkpoint is written at step 7"), std::string::npos);
  EXPECT_EQ(check("corrupt-checkpoint:step=10", 2, 10, 4), "");  // the last step always saves
  EXPECT_NE(check("corrupt-checkpoint:step=4", 2, 10, 0).find("checkpointing is off"), std::string::npos);
}

TEST(FaultCheckTest, CheckpointSteps) {
  EXPECT_TRUE(is_checkpoint_step(5, 5, 12));
  EXPECT_FALSE(is_checkpoint_step(6, 5, 12));
  EXPECT_TRUE(is_checkpoint_step(12, 5, 12));  // the last
  EXPECT_FALSE(is_checkpoint_step(0, 5, 12));
  EXPECT_FALSE(is_checkpoint_step(5, 0, 12));
}

TEST(ProofDrawTest, TrialsAreReplayableAndValid) {
  int during = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const FaultSpec a = draw_trial_fault(9, trial, 2, 12, 4, false);
    EXPECT_EQ(a.to_string(), draw_trial_fault(9, trial, 2, 12, 4, false).to_string());
    // Whatever is drawn must be a fault the job accepts.
    EXPECT_NO_THROW(check_faults({a}, 2, 12, 4)) << a.to_string();
    EXPECT_NO_THROW(parse_fault(a.to_string())) << a.to_string();
    during += a.kind == FaultKind::kKillDuringCheckpoint ? 1 : 0;
    const FaultSpec s = draw_trial_fault(9, trial, 2, 12, 4, true);
    EXPECT_EQ(s.kind, FaultKind::kLoseRank);
    EXPECT_NO_THROW(check_faults({s}, 2, 12, 4)) << s.to_string();
  }
  // Both kinds occur (a fair coin: 40 draws all alike has probability 2^-39).
  EXPECT_GT(during, 0);
  EXPECT_LT(during, 40);
  // Every save phase gets its turn (~100 checkpoint kills in 200 trials miss one with p < 1e-7).
  std::set<std::string> phases;
  for (int trial = 0; trial < 200; ++trial) {
    const FaultSpec a = draw_trial_fault(9, trial, 2, 12, 4, false);
    if (a.kind == FaultKind::kKillDuringCheckpoint) phases.insert(checkpoint::save_phase_name(a.phase));
  }
  EXPECT_EQ(phases.size(), 6u);
  // Another seed, other trials.
  std::string nine, ten;
  for (int trial = 0; trial < 8; ++trial) {
    nine += draw_trial_fault(9, trial, 2, 12, 4, false).to_string() + ";";
    ten += draw_trial_fault(10, trial, 2, 12, 4, false).to_string() + ";";
  }
  EXPECT_NE(nine, ten);
}

}  // namespace
}  // namespace parlab::launch
