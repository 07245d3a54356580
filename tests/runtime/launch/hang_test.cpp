// Hangs and stragglers end to end, with real processes through the real CLI: a rank that skips a
// batch's all-reduce is caught by the collective timeout and named by the flight-recorder
// analyzer; a rank that freezes outside any collective is caught by its heartbeat and named
// itself (not the ranks that waited for it); a slowed rank is named a straggler and a healthy
// run of 200 steps names none; a hang that keeps coming back degrades to the named fallback
// plan; the committed runbook is the generated one.
//
// Culprits are compared with the injected rank, which the detectors never read: the fault line
// a worker writes only times detection. Detection latency is checked against the configured
// timeout with a wide margin (a loaded 2-core box): the bound says which detector fired (not the
// heartbeat, not a later failure), not how fast the machine is.
#include <gtest/gtest.h>

#include <map>
#include <regex>

#include "cli_fixture.h"
#include "db/results_store.h"
#include "runtime/launch/supervisor.h"
#include "runtime/launch/worker.h"
#include "runtime/train/trainer_checkpoint.h"
#include "parlab/source_dir.h"

namespace parlab::launch {
namespace {

// Detection may come later than the timeout by process exit, a poll and a busy machine.
constexpr double kMarginSeconds = 3.0;

class HangTest : public CliTest {
 protected:
  // `parlab train` of the tiny model on `nproc` workers, `steps` steps, a checkpoint every
  // `every` (0: none).
  ExitStatus train(const std::string& run, int nproc, std::vector<std::string> extra, std::string& out, int steps = 8,
                   int every = 3) {
    std::vector<std::string> args = {"train",
                                     "--nproc",
                                     std::to_string(nproc),
                                     "--model",
                                     (dir_ / "tiny.toml").string(),
                                     "--plan",
                                     "gbs=16,mb=4",
                                     "--steps",
                                     std::to_string(steps),
                                     "--checkpoint-every",
                                     std::to_string(every),
                                     "--seed",
                                     "5",
                                     "--run-dir",
                                     (dir_ / run).string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return parlab(args, out);
  }
  // The line of `out` that starts with `prefix`, without it ("" when there is none).
  static std::string line_after(const std::string& out, const std::string& prefix) {
    std::istringstream in(out);
    for (std::string line; std::getline(in, line);)
      if (line.rfind(prefix, 0) == 0) return line.substr(prefix.size());
    return "";
  }
};

TEST_F(HangTest, ASkippedAllReduceIsCaughtByTheCollectiveTimeoutNamedAndRecovered) {
  std::string out;
  ASSERT_TRUE(train("reference", 4, {}, out).ok()) << out;
  const std::string want = final_hash("reference");
  const fs::path db = dir_ / "skip.db";
  const ExitStatus st = train(
      "skip", 4,
      {"--fault", "skip-allreduce:rank=2,step=5", "--timeout", "2", "--max-restarts", "1", "--db", db.string()}, out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  // The analyzer's sentence: rank 2 skipped step 5's bucket all-reduce (the tag carries the
  // step), issued its next collective there instead, and the three others waited for it.
  const std::string sentence = line_after(out, "hang: ");
  EXPECT_TRUE(std::regex_search(sentence, std::regex(R"(^rank 2 skipped all-reduce #\d+ \(s5/grad\.bucket0, )")))
      << out;
  EXPECT_NE(sentence.find("there instead; ranks 0, 1, 3 waited 2."), std::string::npos) << out;
  EXPECT_NE(out.find("incident: hang of rank 2 at step 5, detected by the collective timeout (2.00 s): " + sentence),
            std::string::npos)
      << out;
  // Restarted from the step-3 checkpoint, it ends exactly where an uninterrupted run does.
  EXPECT_NE(out.find("resumed from step 3 with 4 worker(s), 2 step(s) lost"), std::string::npos) << out;
  EXPECT_EQ(final_hash("skip"), want);
  EXPECT_TRUE(survivors().empty()) << survivors().front();

  db::ResultsStore store = db::ResultsStore::open(db);
  const auto runs = store.list_runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto incidents = store.incidents(runs[0].id);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].kind, db::IncidentKind::kHang);
  EXPECT_EQ(incidents[0].rank, 2);
  EXPECT_EQ(incidents[0].step, 5);
  EXPECT_NE(incidents[0].detail.find(sentence), std::string::npos) << incidents[0].detail;
  ASSERT_TRUE(incidents[0].detection_seconds.has_value());
  // Fault -> supervisor knows: the 2 s collective timeout, plus a margin (the ranks start waiting
  // within a step of the skip, so not much before it either).
  EXPECT_GE(*incidents[0].detection_seconds, 1.5);
  EXPECT_LE(*incidents[0].detection_seconds, 2.0 + kMarginSeconds);

  // By hand, the same sentence from the dumps the failed attempt left.
  ASSERT_TRUE(parlab({"analyze", "hang", (dir_ / "skip").string()}, out).ok()) << out;
  EXPECT_EQ(out.substr(0, out.find('\n')), sentence);
}

TEST_F(HangTest, ASilentRankIsCaughtByItsHeartbeatAndNamedNotTheRanksThatWaitedForIt) {
  std::string out;
  const fs::path db = dir_ / "frozen.db";
  // The collective timeout (30 s) is far away: only the heartbeat (1.5 s) can catch this.
  const ExitStatus st = train("frozen", 4,
                              {"--fault", "hang:rank=1,step=4", "--timeout", "30", "--heartbeat-timeout", "1.5",
                               "--max-restarts", "1", "--db", db.string()},
                              out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  EXPECT_NE(out.find("incident: hang of rank 1 at step 4, detected by the heartbeat (1.50 s): no heartbeat for "),
            std::string::npos)
      << out;
  // The others dumped their flight recorders when the supervisor stopped them: they were all in
  // step 4's all-reduce, waiting for the rank that left nothing.
  const std::string sentence = line_after(out, "hang: ");
  EXPECT_TRUE(std::regex_search(
      sentence,
      std::regex(
          R"(^rank 1 left no dump and never reached all-reduce #\d+ \(s4/grad\.bucket0, .*\); ranks 0, 2, 3 waited)")))
      << out;
  EXPECT_TRUE(survivors().empty()) << survivors().front();

  db::ResultsStore store = db::ResultsStore::open(db);
  const auto incidents = store.incidents(store.list_runs()[0].id);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].kind, db::IncidentKind::kHang);
  EXPECT_EQ(incidents[0].rank, 1);
  EXPECT_EQ(incidents[0].step, 4);
  ASSERT_TRUE(incidents[0].detection_seconds.has_value());
  // Its last beat came up to one beat interval (1.5 s / 4) before the fault.
  EXPECT_GE(*incidents[0].detection_seconds, 1.5 - 0.375 - 0.1);
  EXPECT_LE(*incidents[0].detection_seconds, 1.5 + kMarginSeconds);
}

TEST_F(HangTest, ASlowRankIsNamedAStragglerAndAHealthyRunNamesNone) {
  std::string out;
  const fs::path db = dir_ / "slow.db";
  // The tiny model computes ~0.1 ms a step, and four ranks on two busy cores wait ms for the
  // scheduler: at factor 3 the slow rank's excess (~1 ms) was once under the detector's share of
  // a noisy step (the suite ran beside another test). Factor 10 makes the excess the step's
  // largest part, as a straggler's is.
  ASSERT_TRUE(train("slow", 4, {"--fault", "slow:rank=3,factor=10", "--db", db.string()}, out, 40, 0).ok()) << out;
  EXPECT_NE(out.find("straggler: rank 3 is a straggler: its compute takes "), std::string::npos) << out;
  db::ResultsStore store = db::ResultsStore::open(db);
  auto incidents = store.incidents(store.list_runs()[0].id);
  ASSERT_EQ(incidents.size(), 1u);
  EXPECT_EQ(incidents[0].kind, db::IncidentKind::kStraggler);
  EXPECT_EQ(incidents[0].rank, 3);
  EXPECT_NE(incidents[0].detail.find("every other rank waits about"), std::string::npos) << incidents[0].detail;

  // 200 healthy steps (10 windows of 20): no alarm.
  const fs::path healthy_db = dir_ / "healthy.db";
  ASSERT_TRUE(train("healthy", 4, {"--db", healthy_db.string()}, out, 200, 0).ok()) << out;
  EXPECT_EQ(out.find("straggler"), std::string::npos) << out;
  db::ResultsStore healthy = db::ResultsStore::open(healthy_db);
  EXPECT_TRUE(healthy.incidents(healthy.list_runs()[0].id).empty());
}

TEST_F(HangTest, ARepeatedHangDegradesToTheSurvivingRanksAndTheFallbackIsRecorded) {
  std::string out;
  const fs::path db = dir_ / "survivors.db";
  // Rank 1 freezes before step 4 on every attempt (a bad node); one repeat is allowed.
  const ExitStatus st =
      train("survivors", 2,
            {"--fault", "hang:rank=1,step=4,attempts=0", "--heartbeat-timeout", "1", "--max-restarts", "4",
             "--max-same-failure", "1", "--fallback", "survivors", "--min-nproc", "1", "--db", db.string()},
            out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  EXPECT_NE(out.find("fallback: hang of rank 1 happened 2 times (more than --max-same-failure 1): degrading to the "
                     "named plan 'DDP on the surviving ranks' (--fallback survivors): rank 1 is dropped and 1 "
                     "worker(s) continue from the last good checkpoint"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("restart 3 of 4"), std::string::npos) << out;  // it did not loop
  // The survivor trained the rest alone, the same global batch of 16.
  const auto records = read_records(rank_records_path(dir_ / "survivors", 0));
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().world, 1);
  EXPECT_EQ(records.back().samples, 16);
  EXPECT_EQ(records.back().step, 7);

  db::ResultsStore store = db::ResultsStore::open(db);
  const auto run = store.list_runs()[0];
  std::map<std::string, std::string> params;
  for (const auto& [k, v] : store.run_params(run.id)) params[k] = v;
  EXPECT_EQ(params["fallback"], "survivors");
  EXPECT_EQ(params["fallback_plan"], "DDP on the surviving ranks");
  EXPECT_EQ(params["fallback_world"], "1");
  int hangs = 0;
  for (const auto& i : store.incidents(run.id)) hangs += i.kind == db::IncidentKind::kHang && i.rank == 1;
  EXPECT_EQ(hangs, 2);
  EXPECT_EQ(run.status, db::RunStatus::kCompleted);
}

TEST_F(HangTest, TheSingleWorkerBaselineRunsOnAHealthyDevice) {
  // Rank 0 is the bad one this time: the single worker must be the other device (renumbered to
  // rank 0), and the fault that names device 0 must not follow it, or it would hang again.
  std::string out;
  const ExitStatus st = train("single", 2,
                              {"--fault", "hang:rank=0,step=4,attempts=0", "--heartbeat-timeout", "1", "--max-restarts",
                               "4", "--max-same-failure", "1", "--fallback", "single"},
                              out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  EXPECT_NE(out.find("fallback: hang of rank 0 happened 2 times (more than --max-same-failure 1): degrading to the "
                     "named plan 'single-worker baseline' (--fallback single): one worker continues"),
            std::string::npos)
      << out;
  const auto records = read_records(rank_records_path(dir_ / "single", 0));
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.back().world, 1);
  EXPECT_EQ(records.back().step, 7);
}

TEST_F(HangTest, WithFallbackStopARepeatedHangStopsAtTheLastKnownGoodCheckpoint) {
  std::string out;
  const ExitStatus st = train("stop", 2,
                              {"--fault", "hang:rank=1,step=4,attempts=0", "--heartbeat-timeout", "1", "--max-restarts",
                               "4", "--max-same-failure", "1", "--fallback", "stop"},
                              out);
  EXPECT_EQ(st.code, 1) << st.describe() << "\n" << out;
  const std::string step3 = (dir_ / "stop" / "checkpoints" / "step-000003").string();
  EXPECT_NE(out.find("parlab train: fallback: hang of rank 1 happened 2 times (more than --max-same-failure 1): "
                     "stopping (--fallback stop) at the last known-good checkpoint " +
                     step3 + " (step 3)"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("restart 2 of 4"), std::string::npos) << out;  // stopped after the first repeat
  EXPECT_TRUE(survivors().empty()) << survivors().front();
}

TEST_F(HangTest, TheRunbookInTheDocsIsTheGeneratedOne) {
  std::string out;
  ASSERT_TRUE(parlab({"runbook", "--markdown"}, out).ok()) << out;
  std::ifstream in(fs::path(PARLAB_SOURCE_DIR) / "docs" / "runbook.md");
  ASSERT_TRUE(in) << "docs/runbook.md is missing: parlab runbook --markdown > docs/runbook.md";
  std::stringstream docs;
  docs << in.rdbuf();
  EXPECT_EQ(docs.str(), out)
      << "docs/runbook.md is stale: regenerate it with parlab runbook --markdown > docs/runbook.md";
}

}  // namespace
}  // namespace parlab::launch
