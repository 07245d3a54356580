// The stale-run sweep: a run whose owning process is gone is marked killed; a live owner's run,
// and runs of other hosts, are left alone.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "db/process_identity.h"
#include "db/results_store.h"
#include "db_test_util.h"

namespace parlab::db {
namespace {

using testing::Child;
using testing::ScratchDir;

// The pid of a process that existed and has been reaped: nothing owns it now (until the
// kernel recycles it, which the start-ticks check also covers).
pid_t reaped_pid(const ScratchDir& dir) {
  Child child({"/bin/true"}, dir / "true.err");
  const pid_t pid = child.pid();
  child.wait();
  return pid;
}

TEST(Sweep, MarksRunsOfDeadOwnersKilledAndLeavesTheRestAlone) {
  ScratchDir dir;
  auto store = ResultsStore::open(dir / "p.db");
  const pid_t dead = reaped_pid(dir);
  const auto me = current_process();
  ASSERT_TRUE(me.start_ticks.has_value()) << "Linux provides /proc/self/stat";

  const RunId mine = store.begin_run({.kind = RunKind::kMeasured});
  const RunId orphan = store.begin_run({.kind = RunKind::kMeasured, .owner_pid = dead});
  // Our pid with another start time: the pid was recycled, the original owner is gone.
  const RunId recycled =
      store.begin_run({.kind = RunKind::kMeasured, .owner_pid = me.pid, .owner_pid_start_ticks = *me.start_ticks + 1});
  const RunId elsewhere = store.begin_run({.kind = RunKind::kMeasured, .owner_pid = dead, .host = "some-other-host"});
  const RunId finished = store.begin_run({.kind = RunKind::kMeasured, .owner_pid = dead});
  store.mark_run_status(finished, RunStatus::kCompleted);

  const auto swept = store.sweep_stale_runs();
  EXPECT_EQ(swept, (std::vector<RunId>{orphan, recycled}));
  EXPECT_EQ(store.get_run(mine)->status, RunStatus::kRunning);
  EXPECT_EQ(store.get_run(orphan)->status, RunStatus::kKilled);
  EXPECT_EQ(store.get_run(recycled)->status, RunStatus::kKilled);
  EXPECT_EQ(store.get_run(elsewhere)->status, RunStatus::kRunning);
  EXPECT_EQ(store.get_run(finished)->status, RunStatus::kCompleted);

  const auto killed = store.get_run(orphan);
  EXPECT_TRUE(killed->ended_at.has_value());
  EXPECT_NE(killed->notes.find("owner process " + std::to_string(dead)), std::string::npos) << killed->notes;
  EXPECT_TRUE(store.sweep_stale_runs().empty()) << "a second sweep finds nothing new";
}

TEST(Sweep, RunsOnOpen) {
  ScratchDir dir;
  const pid_t dead = reaped_pid(dir);
  RunId orphan = 0;
  {
    auto store = ResultsStore::open(dir / "p.db");
    orphan = store.begin_run({.kind = RunKind::kSimulated, .owner_pid = dead});
  }
  EXPECT_EQ(ResultsStore::open(dir / "p.db", {.sweep_stale_runs = false}).get_run(orphan)->status, RunStatus::kRunning);
  EXPECT_EQ(ResultsStore::open(dir / "p.db").get_run(orphan)->status, RunStatus::kKilled);
}

TEST(Sweep, ProcessAliveTellsZombiesAndRecycledPidsFromLiveProcesses) {
  ScratchDir dir;
  const auto me = current_process();
  EXPECT_TRUE(process_alive(me.pid, me.start_ticks));
  EXPECT_TRUE(process_alive(me.pid, std::nullopt));
  EXPECT_FALSE(process_alive(me.pid, *me.start_ticks + 1));

  Child child({"/bin/true"}, dir / "true.err");
  // Until reaped, the exited child is a zombie: its /proc entry exists but it is not running.
  for (int i = 0; i < 2000 && process_alive(child.pid(), std::nullopt); ++i) ::usleep(1000);
  EXPECT_FALSE(process_alive(child.pid(), std::nullopt));
  child.wait();
}

}  // namespace
}  // namespace parlab::db
