// --fault parsing: every kind reads back to itself, and every mistake names the flag and the key.
// The proof's trial draws depend on the seed and the trial only.
#include <gtest/gtest.h>

#include <set>

#include "runtime/launch/faults.h"
#include "runtime/launch/kill_resume_proof.h"
#include "base/errors.h"

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
  for (const std::string text :
       {"kill:rank=1,step=7", "kill-during-checkpoint:rank=0,step=10,phase=before-manifest",
        "kill-during-checkpoint:rank=1,step=10,phase=mid-shard-write", "corrupt-checkpoint:step=10",
        "corrupt-checkpoint:step=4,shard=1", "lose-rank:rank=1,step=5", "skip-allreduce:rank=2,step=5",
        "hang:rank=1,step=4", "slow:rank=3,factor=3", "slow:rank=3,factor=2.5,step=10", "hang:rank=1,step=4,attempts=0",
        "kill:rank=0,step=2,attempts=3", "exit:rank=1,step=2", "exit:rank=0,step=3,code=7"})
    EXPECT_EQ(parse_fault(text).to_string(), text);
  const FaultSpec f = parse_fault("kill-during-checkpoint:step=10,phase=after-pointer-update");
  EXPECT_EQ(f.kind, FaultKind::kKillDuringCheckpoint);
  EXPECT_EQ(f.rank, 0);  // the committing rank by default
  EXPECT_EQ(f.step, 10);
  EXPECT_EQ(f.phase, checkpoint::SavePhase::kAfterPointerUpdate);
}

TEST(FaultParseTest, MistakesNameTheFlagAndTheKey) {
  EXPECT_EQ(error_of("kill:rank=1"),
            "--fault = kill:rank=1: missing key 'step' (kill takes rank, step and optionally attempts)");
  EXPECT_NE(error_of("slow:rank=1").find("missing key 'factor'"), std::string::npos);
  // A factor of 1 or less slows nothing down.
  EXPECT_NE(error_of("slow:rank=1,factor=1").find("key 'factor' = '1' must be a number > 1"), std::string::npos);
  EXPECT_NE(error_of("slow:rank=1,factor=x").find("must be a number > 1"), std::string::npos);
  EXPECT_NE(error_of("hang:rank=1,step=2,attempts=-1").find("key 'attempts' = '-1' must be an integer >= 0"),
            std::string::npos);
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
  EXPECT_EQ(check("skip-allreduce:rank=3,step=9", 4, 10, 0), "");
  EXPECT_NE(check("skip-allreduce:rank=4,step=5", 4, 10, 0).find("rank 4 does not exist"), std::string::npos);
  EXPECT_NE(check("hang:rank=1,step=10", 2, 10, 0).find("never reached"), std::string::npos);
  EXPECT_EQ(check("slow:rank=1,factor=3", 2, 10, 0), "");
}

TEST(FaultParseTest, NewKindsCarryTheirValues) {
  const FaultSpec skip = parse_fault("skip-allreduce:rank=2,step=5");
  EXPECT_EQ(skip.kind, FaultKind::kSkipAllReduce);
  EXPECT_EQ(skip.rank, 2);
  EXPECT_EQ(skip.step, 5);
  const FaultSpec slow = parse_fault("slow:rank=3,factor=2.5");
  EXPECT_EQ(slow.kind, FaultKind::kSlow);
  EXPECT_EQ(slow.factor, 2.5);
  EXPECT_EQ(slow.step, 0);  // from the first step
  EXPECT_EQ(std::string(fault_kind_name(FaultKind::kHang)), "hang");
  const FaultSpec exit = parse_fault("exit:rank=1,step=2,code=5");
  EXPECT_EQ(exit.kind, FaultKind::kExit);
  EXPECT_EQ(exit.rank, 1);
  EXPECT_EQ(exit.step, 2);
  EXPECT_EQ(exit.code, 5);
  EXPECT_EQ(parse_fault("exit:rank=1,step=2").code, 3);
  // Exit codes a shell reads as "not found" or "killed by signal" would say the wrong thing.
  EXPECT_NE(error_of("exit:rank=1,step=2,code=126").find("key 'code' = '126' must be an exit code in 1..125"),
            std::string::npos);
  EXPECT_NE(error_of("exit:rank=1,step=2,code=0").find("key 'code' = '0' must be an integer >= 1"), std::string::npos);
}

TEST(FaultParseTest, AttemptsSayWhenAFaultFires) {
  // Default: the first attempt only, so a restarted job runs clean.
  EXPECT_TRUE(parse_fault("hang:rank=1,step=4").fires_on(0));
  EXPECT_FALSE(parse_fault("hang:rank=1,step=4").fires_on(1));
  // attempts=2: attempts 0 and 1; attempts=0: every attempt (a bad node).
  EXPECT_TRUE(parse_fault("hang:rank=1,step=4,attempts=2").fires_on(1));
  EXPECT_FALSE(parse_fault("hang:rank=1,step=4,attempts=2").fires_on(2));
  EXPECT_TRUE(parse_fault("hang:rank=1,step=4,attempts=0").fires_on(7));
  const std::vector<std::string> texts = {"kill:rank=0,step=3", "hang:rank=1,step=4,attempts=0"};
  EXPECT_EQ(faults_for_attempt(texts, 0).size(), 2u);
  ASSERT_EQ(faults_for_attempt(texts, 1).size(), 1u);
  EXPECT_EQ(faults_for_attempt(texts, 1)[0].kind, FaultKind::kHang);
}

TEST(FaultParseTest, FaultsMoveWithTheirDevices) {
  const std::vector<std::string> texts = {"hang:rank=1,step=4,attempts=0", "slow:rank=3,factor=2", "kill:rank=0,step=2",
                                          "corrupt-checkpoint:step=6"};
  // Device 1 dropped: devices 0, 2, 3 become ranks 0, 1, 2; the hang of device 1 is gone.
  EXPECT_EQ(renumber_faults(texts, {0, 2, 3}),
            (std::vector<std::string>{"slow:rank=2,factor=2", "kill:rank=0,step=2", "corrupt-checkpoint:step=6"}));
  // Nothing dropped: the same texts.
  EXPECT_EQ(renumber_faults(texts, {0, 1, 2, 3}), texts);
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
