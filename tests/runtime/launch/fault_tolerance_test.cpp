// Fault tolerance end to end, with real processes through the real CLI: a worker SIGKILLed (also
// in the middle of a checkpoint write) is restarted by the supervisor and the job ends in exactly
// the uninterrupted run's state; running again on a run dir resumes and says so, past a corrupt
// checkpoint; exhausted restarts fail naming the incident and the last good checkpoint; a lost
// device shrinks the job; the results database holds the run; `parlab proof kill-resume` passes.
//
// The reference for "exactly" is the uninterrupted run's final-state hash: XXH3_64 of every
// parameter and optimizer buffer, the step counters and the sampler position.
#include <gtest/gtest.h>

#include "cli_fixture.h"
#include "db/results_store.h"
#include "runtime/launch/supervisor.h"
#include "runtime/launch/worker.h"
#include "runtime/train/trainer_checkpoint.h"

namespace parlab::launch {
namespace {

class FaultToleranceTest : public CliTest {
 protected:
  // `parlab train` of the tiny model on 2 workers, 8 steps, a checkpoint every 3 (and at 8).
  ExitStatus train(const std::string& run, std::vector<std::string> extra, std::string& out, int steps = 8) {
    std::vector<std::string> args = {"train",
                                     "--nproc",
                                     "2",
                                     "--model",
                                     (dir_ / "tiny.toml").string(),
                                     "--plan",
                                     "gbs=16,mb=4",
                                     "--steps",
                                     std::to_string(steps),
                                     "--checkpoint-every",
                                     "3",
                                     "--seed",
                                     "5",
                                     "--run-dir",
                                     (dir_ / run).string(),
                                     "--timeout",
                                     "20"};
    args.insert(args.end(), extra.begin(), extra.end());
    return parlab(args, out);
  }
  // The uninterrupted run every other run must match.
  std::string reference_hash() {
    std::string out;
    const ExitStatus st = train("reference", {}, out);
    EXPECT_TRUE(st.ok()) << out;
    return final_hash("reference");
  }
};

TEST_F(FaultToleranceTest, AKilledWorkerIsRestartedAndTheRunEndsBitIdenticalAndRecorded) {
  const std::string want = reference_hash();
  std::string out;
  const fs::path db = dir_ / "results.db";
  const ExitStatus st =
      train("killed", {"--fault", "kill:rank=1,step=5", "--max-restarts", "1", "--db", db.string()}, out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  // Killed before step 5, the last checkpoint is step 3: two steps are redone.
  EXPECT_NE(out.find("incident: rank 1 was killed by signal 9 (SIGKILL) at step 5"), std::string::npos) << out;
  EXPECT_NE(out.find("resumed from step 3 (" + (dir_ / "killed" / "checkpoints" / "step-000003").string() + ")"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 step(s) lost; restart latency"), std::string::npos) << out;
  EXPECT_EQ(final_hash("killed"), want);
  EXPECT_TRUE(fs::exists(dir_ / "killed" / "attempt-0" / "rank-1.log"));  // the first attempt's logs are kept
  EXPECT_TRUE(survivors().empty()) << survivors().front();

  db::ResultsStore store = db::ResultsStore::open(db);
  const std::vector<db::RunRecord> runs = store.list_runs();
  ASSERT_EQ(runs.size(), 1u);
  const db::RunRecord& run = runs[0];
  EXPECT_EQ(run.kind, db::RunKind::kMeasured);
  EXPECT_EQ(run.status, db::RunStatus::kCompleted);
  EXPECT_EQ(run.world_size, 2);
  EXPECT_EQ(run.seed, 5u);
  EXPECT_EQ(run.cluster, "cpu-local");
  EXPECT_EQ(run.plan.at("gbs"), 16);
  // 8 steps x 2 ranks; steps 3 and 4 ran twice and their rows were replaced.
  EXPECT_EQ(store.step_timings(run.id).size(), 16u);
  const std::vector<db::IncidentRecord> incidents = store.incidents(run.id);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].kind, db::IncidentKind::kKilled);
  EXPECT_EQ(incidents[0].rank, 1);
  EXPECT_EQ(incidents[0].step, 5);
  EXPECT_EQ(incidents[0].steps_lost, 2);
  EXPECT_TRUE(incidents[0].detection_seconds.has_value());
  EXPECT_TRUE(incidents[0].restart_seconds.has_value());
  std::vector<int64_t> steps;
  for (const db::CheckpointRecord& c : store.checkpoints(run.id)) {
    steps.push_back(c.step);
    EXPECT_EQ(c.checksum.rfind("xxh3_64:", 0), 0u) << c.checksum;
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{3, 6, 8}));
  const auto verified = store.latest_verified_checkpoint(run.id);
  ASSERT_TRUE(verified.has_value());
  EXPECT_EQ(verified->step, 8);
  const auto metrics = store.run_metrics(run.id);
  EXPECT_EQ(metrics.at("restarts"), 1.0);
  EXPECT_EQ(metrics.at("steps_lost"), 2.0);
}

TEST_F(FaultToleranceTest, AKillInTheMiddleOfACheckpointWriteResumesFromThePreviousOne) {
  const std::string want = reference_hash();
  std::string out;
  const ExitStatus st = train(
      "torn", {"--fault", "kill-during-checkpoint:rank=1,step=6,phase=mid-shard-write", "--max-restarts", "1"}, out);
  ASSERT_TRUE(st.ok()) << out;
  EXPECT_NE(out.find("resumed from step 3"), std::string::npos) << out;
  EXPECT_NE(out.find("skipped step 6: incomplete"), std::string::npos) << out;
  EXPECT_EQ(final_hash("torn"), want);
}

TEST_F(FaultToleranceTest, RunningAgainResumesPastACorruptCheckpointAndSaysSo) {
  const std::string want = reference_hash();
  std::string out;
  ASSERT_TRUE(train("again", {"--fault", "corrupt-checkpoint:step=6"}, out, 6).ok()) << out;
  ASSERT_TRUE(train("again", {}, out, 8).ok()) << out;  // --steps is the total to reach
  const std::string step3 = (dir_ / "again" / "checkpoints" / "step-000003").string();
  EXPECT_NE(out.find("resumed from step 3 (" + step3 + "); skipped step 6: checksum mismatch in rank-00000"),
            std::string::npos)
      << out;
  EXPECT_EQ(final_hash("again"), want);
  // Once there, a third run has nothing to do and says so.
  ASSERT_TRUE(train("again", {}, out, 8).ok()) << out;
  EXPECT_NE(out.find("Nothing to train"), std::string::npos) << out;
}

TEST_F(FaultToleranceTest, ExhaustedRestartsFailNamingTheIncidentAndTheLastGoodCheckpoint) {
  std::string out;
  const ExitStatus st = train("gaveup", {"--fault", "kill:rank=1,step=4", "--max-restarts", "0"}, out);
  EXPECT_TRUE(st.exited);
  EXPECT_EQ(st.code, 1) << out;
  EXPECT_NE(out.find("gave up after 0 restart(s) (--max-restarts 0); last incident: rank 1 was killed by signal 9"),
            std::string::npos)
      << out;
  const std::string step3 = (dir_ / "gaveup" / "checkpoints" / "step-000003").string();
  EXPECT_NE(out.find("the last good checkpoint is " + step3 + " (step 3)"), std::string::npos) << out;
  EXPECT_TRUE(survivors().empty()) << survivors().front();
}

TEST_F(FaultToleranceTest, ALostDeviceShrinksTheJobDownToMinNproc) {
  std::string out;
  ExitStatus st =
      train("shrink", {"--fault", "lose-rank:rank=1,step=4", "--max-restarts", "1", "--min-nproc", "1"}, out);
  ASSERT_TRUE(st.ok()) << out;
  EXPECT_NE(out.find("restarting with 1 worker(s)"), std::string::npos) << out;
  EXPECT_NE(out.find("written by 2 worker(s), resumed by 1"), std::string::npos) << out;
  // One worker trains the same global batch of 16 (4 microbatches instead of 2).
  const auto records = read_records(rank_records_path(dir_ / "shrink", 0));
  ASSERT_FALSE(records.empty());
  for (const train::StepRecord& r : records) {
    EXPECT_EQ(r.world, 1);
    EXPECT_EQ(r.samples, 16);
  }
  EXPECT_EQ(records.back().step, 7);

  // Without --min-nproc the job may not shrink.
  st = train("noshrink", {"--fault", "lose-rank:rank=1,step=4", "--max-restarts", "1"}, out);
  EXPECT_EQ(st.code, 1) << out;
  EXPECT_NE(out.find("cannot continue: 1 worker(s) left, --min-nproc 2"), std::string::npos) << out;
}

TEST_F(FaultToleranceTest, AMalformedFaultFailsBeforeAnyWorkerStarts) {
  std::string out;
  const ExitStatus st = train("bad", {"--fault", "kill:rank=1"}, out);
  EXPECT_EQ(st.code, 2) << out;
  EXPECT_NE(out.find("--fault = kill:rank=1: missing key 'step'"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(dir_ / "bad" / "rank-0.log"));
}

TEST_F(FaultToleranceTest, TheKillResumeProofPasses) {
  std::string out;
  const ExitStatus st = parlab({"proof",
                                "kill-resume",
                                "--nproc",
                                "2",
                                "--model",
                                (dir_ / "tiny.toml").string(),
                                "--plan",
                                "gbs=16,mb=4",
                                "--steps",
                                "8",
                                "--trials",
                                "2",
                                "--checkpoint-every",
                                "3",
                                "--work-dir",
                                (dir_ / "proof").string(),
                                "--fault-seed",
                                "3",
                                "--timeout",
                                "20",
                                "--db",
                                (dir_ / "proof.db").string()},
                               out);
  ASSERT_TRUE(st.ok()) << out;
  EXPECT_NE(out.find("2/2 trials bit-identical to the uninterrupted run"), std::string::npos) << out;
  EXPECT_NE(out.find("during checkpoint?"), std::string::npos) << out;
  EXPECT_NE(out.find("fault seed 3"), std::string::npos) << out;

  // Evidence: the proof on the reference run, and every trial a measured run with its incident.
  db::ResultsStore store = db::ResultsStore::open(dir_ / "proof.db");
  const std::vector<db::ProofRecord> proofs = store.list_proofs();
  ASSERT_EQ(proofs.size(), 1u);
  EXPECT_EQ(proofs[0].kind, "kill_resume_bitwise");
  EXPECT_TRUE(proofs[0].passed);
  ASSERT_EQ(proofs[0].evidence.at("trials").size(), 2u);
  const std::vector<db::RunRecord> runs = store.list_runs(db::RunStatus::kCompleted);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(proofs[0].run, runs[0].id);  // the reference ran first
  for (int k = 1; k <= 2; ++k) {
    int killed = 0;  // a torn checkpoint the resume skipped is an incident too (checkpoint_corrupt)
    for (const db::IncidentRecord& i : store.incidents(runs[k].id)) killed += i.kind == db::IncidentKind::kKilled;
    EXPECT_EQ(killed, 1) << "trial " << k - 1;
  }
}

TEST_F(FaultToleranceTest, TheElasticProofPassesWithinTolerance) {
  std::string out;
  const ExitStatus st = parlab({"proof", "kill-resume", "--nproc", "2", "--model", (dir_ / "tiny.toml").string(),
                                "--plan", "gbs=16,mb=4", "--steps", "8", "--trials", "1", "--checkpoint-every", "3",
                                "--shrink", "--work-dir", (dir_ / "proof").string(), "--timeout", "20"},
                               out);
  ASSERT_TRUE(st.ok()) << out;
  EXPECT_NE(out.find("1/1 trials within"), std::string::npos) << out;
}

}  // namespace
}  // namespace parlab::launch
