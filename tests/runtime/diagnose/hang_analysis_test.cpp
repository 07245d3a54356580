// The hang analyzer on hand-built flight-recorder dumps: the rank that skipped a step's
// all-reduces, a rank that died, and the simulator's stopped-rank report.
#include <gtest/gtest.h>

#include <filesystem>

#include "runtime/diagnose/hang_analysis.h"
#include "base/errors.h"

namespace parlab::diagnose {
namespace {

comm::FlightRecord rec(uint64_t seq, const std::string& tag, double bytes, comm::OpState state, double start,
                       double end) {
  comm::FlightRecord r;
  r.seq = seq;
  r.op = comm::OpKind::kAllReduce;
  r.group = "world";
  r.bytes = bytes;
  r.tag = tag;
  r.state = state;
  r.start_seconds = start;
  if (end > 0) r.end_seconds = end;
  return r;
}

comm::FlightRecorderDump dump(int rank, int world, std::vector<comm::FlightRecord> entries) {
  comm::FlightRecorderDump d;
  d.identity = {"gloo", "world", rank, world, rank, world};
  d.capacity = 256;
  d.entries = std::move(entries);
  return d;
}

// Four ranks, two buckets per step. Step 4 completes everywhere; at step 5 rank 2 skips its
// batch and goes straight to step 6, so its call #10 is step 6's bucket 0 while ranks 0, 1, 3
// issue step 5's bucket 0 there and wait 30 s until their timeout.
std::vector<comm::FlightRecorderDump> skipped_allreduce() {
  std::vector<comm::FlightRecorderDump> dumps;
  for (int r = 0; r < 4; ++r) {
    std::vector<comm::FlightRecord> e;
    for (int s = 0; s < 5; ++s)
      for (int b = 0; b < 2; ++b)
        e.push_back(rec(uint64_t(2 * s + b), "s" + std::to_string(s) + "/grad.bucket" + std::to_string(b), 12.6e6,
                        comm::OpState::kCompleted, 100 + s, 100.5 + s));
    if (r == 2) {
      e.push_back(rec(10, "s6/grad.bucket0", 12.6e6, comm::OpState::kTimedOut, 105, 135));
    } else {
      e.push_back(rec(10, "s5/grad.bucket0", 12.6e6, comm::OpState::kTimedOut, 105, 135));
    }
    dumps.push_back(dump(r, 4, e));
  }
  return dumps;
}

}  // namespace

TEST(HangAnalysis, NamesTheRankThatSkippedAnAllReduce) {
  const HangAnalysis a = analyze_dumps(skipped_allreduce());
  ASSERT_TRUE(a.found);
  ASSERT_EQ(a.findings.size(), 1u);
  const HangFinding& f = a.findings[0];
  EXPECT_EQ(f.group, "world");
  EXPECT_EQ(f.seq, 10u);
  EXPECT_EQ(f.tag, "s5/grad.bucket0");
  EXPECT_EQ(f.waited, (std::vector<int>{0, 1, 3}));
  ASSERT_EQ(f.culprits.size(), 1u);
  EXPECT_EQ(f.culprits[0].rank, 2);
  // It issued another op there: it skipped the collective, it did not stop before it.
  EXPECT_FALSE(f.culprits[0].never_reached);
  EXPECT_FALSE(f.culprits[0].left_no_dump);
  EXPECT_DOUBLE_EQ(f.waited_seconds, 30.0);
  EXPECT_EQ(f.sentence,
            "rank 2 skipped all-reduce #10 (s5/grad.bucket0, 12.6 MB, group world): it issued all-reduce #10 "
            "(s6/grad.bucket0) there instead; ranks 0, 1, 3 waited 30.0 s");
}

TEST(HangAnalysis, ARankThatNeverReachedOrLeftNoDump) {
  auto dumps = skipped_allreduce();
  // Rank 2 hangs before step 5's collectives: its record ends at call #9.
  dumps[2].entries.pop_back();
  HangAnalysis a = analyze_dumps(dumps);
  ASSERT_TRUE(a.found);
  ASSERT_EQ(a.findings[0].culprits.size(), 1u);
  EXPECT_TRUE(a.findings[0].culprits[0].never_reached);
  EXPECT_EQ(a.findings[0].sentence.find("skipped"), std::string::npos) << a.findings[0].sentence;
  EXPECT_NE(a.findings[0].sentence.find("rank 2 never reached all-reduce #10"), std::string::npos)
      << a.findings[0].sentence;
  EXPECT_NE(a.findings[0].sentence.find("its last was all-reduce #9 (s4/grad.bucket1)"), std::string::npos);
  // Rank 2 died and left nothing.
  dumps.erase(dumps.begin() + 2);
  a = analyze_dumps(dumps);
  ASSERT_TRUE(a.found);
  EXPECT_TRUE(a.findings[0].culprits[0].left_no_dump);
  EXPECT_TRUE(a.findings[0].culprits[0].never_reached);
  bool noted = false;
  for (const auto& n : a.notes) noted = noted || n == "rank 2 left no flight-recorder dump";
  EXPECT_TRUE(noted);
}

TEST(HangAnalysis, RanksStoppedWhileWaitingForAFrozenRankNameIt) {
  // Rank 1 froze before step 5 and left nothing; the supervisor stopped ranks 0, 2, 3, which
  // dumped while still in step 5's bucket 0 (started at 105, snapshot at 106.5: 1.5 s waited).
  auto dumps = skipped_allreduce();
  dumps.erase(dumps.begin() + 1);
  for (auto& d : dumps) {
    d.entries.back().state = comm::OpState::kStarted;
    d.entries.back().end_seconds.reset();
    d.dumped_seconds = 106.5;
  }
  dumps[1].entries.back().tag = "s5/grad.bucket0";  // rank 2 agrees here: no skip this time
  const HangAnalysis a = analyze_dumps(dumps, 4);
  ASSERT_TRUE(a.found);
  const HangFinding& f = a.findings[0];
  EXPECT_EQ(f.seq, 10u);
  EXPECT_EQ(f.waited, (std::vector<int>{0, 2, 3}));
  ASSERT_EQ(f.culprits.size(), 1u);
  EXPECT_EQ(f.culprits[0].rank, 1);
  EXPECT_TRUE(f.culprits[0].left_no_dump);
  EXPECT_DOUBLE_EQ(f.waited_seconds, 1.5);
  EXPECT_EQ(f.sentence,
            "rank 1 left no dump and never reached all-reduce #10 (s5/grad.bucket0, 12.6 MB, group world); "
            "ranks 0, 2, 3 waited 1.5 s");
}

TEST(HangAnalysis, OneWaiterIsARankNotRanks) {
  auto dumps = skipped_allreduce();
  dumps.resize(2);  // ranks 0 and 1 of a world of 2; rank 1 issued step 6's bucket at #10
  for (auto& d : dumps) d.identity.world_size = d.identity.group_size = 2;
  dumps[1].entries.back().tag = "s6/grad.bucket0";
  const HangAnalysis a = analyze_dumps(dumps);
  ASSERT_TRUE(a.found);
  // Two ranks, one each way: the lower rank's call is the reference.
  EXPECT_NE(a.findings[0].sentence.find("; rank 0 waited 30.0 s"), std::string::npos) << a.findings[0].sentence;
}

TEST(HangAnalysis, AHealthyRunHasNoFinding) {
  auto dumps = skipped_allreduce();
  for (auto& d : dumps) d.entries.pop_back();
  const HangAnalysis a = analyze_dumps(dumps);
  EXPECT_FALSE(a.found);
  EXPECT_NE(a.summary().find("no disagreement"), std::string::npos);
}

TEST(HangAnalysis, ReadsDumpFilesFromARunDirectory) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("hang-" + std::to_string(::getpid()));
  fs::create_directories(dir / "flight");
  for (const auto& d : skipped_allreduce()) {
    comm::FlightRecorder r(d.identity, 64);
    for (const auto& e : d.entries) {
      comm::OpInfo info;
      info.op = e.op;
      info.seq = e.seq;
      info.group = e.group;
      info.bytes = e.bytes;
      info.tag = e.tag;
      const auto id = r.record(info);
      r.started(id);
      r.ended(id, e.state);
    }
    r.dump(dir / "flight" / ("flight_recorder.world.rank" + std::to_string(d.identity.rank) + ".json"));
  }
  const HangAnalysis a = analyze_path(dir);
  ASSERT_TRUE(a.found);
  EXPECT_EQ(a.findings[0].culprits[0].rank, 2);

  // After a restart the dumps live in attempt-<k>/flight: the latest attempt that has any is
  // read, never mixed with another attempt's (attempt-0 here holds a healthy run's).
  fs::rename(dir / "flight", dir / "attempt-1-tmp");
  fs::create_directories(dir / "attempt-1");
  fs::rename(dir / "attempt-1-tmp", dir / "attempt-1" / "flight");
  fs::create_directories(dir / "attempt-0" / "flight");
  auto healthy = skipped_allreduce();
  for (auto& d : healthy) {
    d.entries.pop_back();
    comm::FlightRecorder r(d.identity, 64);
    r.dump(dir / "attempt-0" / "flight" / ("flight_recorder.world.rank" + std::to_string(d.identity.rank) + ".json"));
  }
  const HangAnalysis later = analyze_path(dir);
  ASSERT_TRUE(later.found);
  EXPECT_EQ(later.findings[0].culprits[0].rank, 2);
  EXPECT_EQ(later.notes.back(), "the dumps of attempt-1 (the latest attempt that left any)");
  fs::remove_all(dir);
  EXPECT_THROW(analyze_path(dir), ConfigError);
}

TEST(HangAnalysis, ReadsTheSimulatorsStoppedRankReport) {
  const std::string sim = R"({"step_seconds": 0, "hang": {"deadlock": true, "at_seconds": 2.5,
      "stopped_ranks": [1], "missing_ranks": [1],
      "waiting": [
        {"rank": 0, "stream": "comm", "step": 2, "op_id": 7, "op": "all-reduce", "tag": "grad.bucket0",
         "group": "dp.0", "call": 0, "waiting_for": [1], "waiting_on_op": -1, "since_seconds": 2.0},
        {"rank": 2, "stream": "comm", "step": 2, "op_id": 7, "op": "all-reduce", "tag": "grad.bucket0",
         "group": "dp.0", "call": 0, "waiting_for": [1], "waiting_on_op": -1, "since_seconds": 2.1},
        {"rank": 0, "stream": "compute", "step": 2, "op_id": 9, "op": "optimizer", "tag": "optimizer",
         "group": "", "call": -1, "waiting_for": [], "waiting_on_op": 7, "since_seconds": 2.2}]}})";
  const HangAnalysis a = analyze_sim_result(sim);
  ASSERT_TRUE(a.found);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].culprits[0].rank, 1);
  EXPECT_EQ(a.findings[0].waited, (std::vector<int>{0, 2}));
  EXPECT_DOUBLE_EQ(a.findings[0].waited_seconds, 0.5);
  EXPECT_NE(
      a.findings[0].sentence.find("rank 1 never reached all-reduce call #0 (grad.bucket0, group dp.0): it stopped"),
      std::string::npos)
      << a.findings[0].sentence;
}

}  // namespace parlab::diagnose

namespace parlab::diagnose {
namespace {

// One direction of a two-stage pipeline as one rank's recorder sees it: `n` completed messages
// of `op` on `group`, then optionally one more that never completed.
comm::FlightRecorderDump p2p_dump(int rank, const std::string& group, comm::OpKind op, int n,
                                  const std::string& pending_tag, double pending_start) {
  comm::FlightRecorderDump d;
  d.identity = {"gloo", group, rank, 2, rank < 1 ? 0 : 1, 2};
  d.capacity = 256;
  for (int i = 0; i < n; ++i) {
    comm::FlightRecord r =
        rec(uint64_t(i), "s4/msg" + std::to_string(i), 512, comm::OpState::kCompleted, 100 + i, 100.1 + i);
    r.op = op;
    r.group = group;
    d.entries.push_back(r);
  }
  if (!pending_tag.empty()) {
    comm::FlightRecord r = rec(uint64_t(n), pending_tag, 512, comm::OpState::kTimedOut, pending_start, 0);
    r.op = op;
    r.group = group;
    d.entries.push_back(r);
  }
  return d;
}

}  // namespace

// Stage 0 skips its step-5 activation sends and runs ahead to wait for mb0's gradient; only then
// does stage 1, still finishing step 4, start waiting for the activation that never comes. Stage
// 1's missing gradient send follows from its own wait, so stage 0 is the culprit even though
// its receive started first.
TEST(HangAnalysis, APipelineStageThatSkippedItsSendIsNamedNotTheStageWaitingOnIt) {
  std::vector<comm::FlightRecorderDump> dumps;
  dumps.push_back(p2p_dump(0, "p2p.0>1", comm::OpKind::kSend, 20, "", 0));
  dumps.push_back(p2p_dump(0, "p2p.1>0", comm::OpKind::kRecv, 20, "s5/grad.mb0.vs1", 200.0));
  dumps.push_back(p2p_dump(1, "p2p.0>1", comm::OpKind::kRecv, 20, "s5/act.mb0.vs1", 200.5));
  dumps.push_back(p2p_dump(1, "p2p.1>0", comm::OpKind::kSend, 20, "", 0));
  const HangAnalysis a = analyze_dumps(dumps, 2);
  ASSERT_TRUE(a.found);
  const HangFinding& f = a.findings.front();
  ASSERT_EQ(f.culprits.size(), 1u);
  EXPECT_EQ(f.culprits[0].rank, 0) << f.sentence;
  EXPECT_EQ(f.tag, "s5/act.mb0.vs1") << f.sentence;
  EXPECT_EQ(f.sentence.rfind("rank 0 never sent send #20", 0), 0u) << f.sentence;
}

}  // namespace parlab::diagnose
