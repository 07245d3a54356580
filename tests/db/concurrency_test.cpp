// Several real processes writing one database at once, and a writer killed mid-run.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "db/migrate.h"
#include "db/results_store.h"
#include "db_test_util.h"

namespace parlab::db {
namespace {

using testing::Child;
using testing::ScratchDir;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

RunId run_id_from(const std::string& line, const std::string& word) {
  EXPECT_EQ(line.rfind(word + " ", 0), 0u) << "child said: '" << line << "'";
  return std::stoll(line.substr(word.size() + 1));
}

TEST(Concurrency, FourProcessesWriteTwoHundredRowsEachWithoutLockFailures) {
  constexpr int kWriters = 4;
  constexpr int kRows = 200;
  ScratchDir dir;
  const auto db = dir / "p.db";
  const auto go = dir / "go";
  ResultsStore::open(db);  // create and migrate once, as the supervisor does before spawning

  std::vector<std::unique_ptr<Child>> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.push_back(
        std::make_unique<Child>(std::vector<std::string>{PARLAB_DB_TEST_WRITER, db.string(), std::to_string(w),
                                                         std::to_string(kRows), "--go-file", go.string()},
                                dir / ("writer" + std::to_string(w) + ".err")));
  }
  std::ofstream(go).put('\n');  // all writers start their commits together

  std::vector<RunId> runs;
  for (int w = 0; w < kWriters; ++w) {
    runs.push_back(run_id_from(writers[w]->read_line(), "done"));
    const int status = writers[w]->wait();
    const std::string err = slurp(dir / ("writer" + std::to_string(w) + ".err"));
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer " << w << ": " << err;
    EXPECT_EQ(err.find("locked"), std::string::npos) << err;
  }

  auto store = ResultsStore::open(db);
  Statement total = store.connection().statement("SELECT count(*) FROM step_timings");
  total.step_one();
  EXPECT_EQ(total.int64(0), kWriters * kRows);
  for (int w = 0; w < kWriters; ++w) {
    const auto run = store.get_run(runs[w]);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(run->status, RunStatus::kCompleted);
    EXPECT_EQ(run->notes, "writer " + std::to_string(w));
    const auto rows = store.step_timings(runs[w]);
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(kRows));
    // Writer w stored step s as w*1000 + s: the rows are its own, each step once, in order.
    double sum = 0;
    for (int s = 0; s < kRows; ++s) {
      EXPECT_EQ(rows[s].step, s);
      sum += rows[s].step_seconds;
    }
    // sum over s = 0..199 of (1000w + s) = 200 * 1000w + 199*200/2.
    EXPECT_DOUBLE_EQ(sum, 200.0 * 1000 * w + 19900.0);
  }
}

TEST(Concurrency, ProcessesOpeningTheSameNewFileCreateAndMigrateItOnce) {
  constexpr int kWriters = 4;
  constexpr int kRows = 20;
  ScratchDir dir;
  const auto db = dir / "fresh/p.db";  // neither the file nor its directory exists yet
  std::vector<std::unique_ptr<Child>> writers;
  for (int w = 0; w < kWriters; ++w) {
    writers.push_back(std::make_unique<Child>(
        std::vector<std::string>{PARLAB_DB_TEST_WRITER, db.string(), std::to_string(w), std::to_string(kRows)},
        dir / ("writer" + std::to_string(w) + ".err")));
  }
  for (int w = 0; w < kWriters; ++w) {
    const int status = writers[w]->wait();
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "writer " << w << ": " << slurp(dir / ("writer" + std::to_string(w) + ".err"));
  }
  auto store = ResultsStore::open(db);
  EXPECT_EQ(store.schema_version(), latest_schema_version());
  EXPECT_EQ(store.connection().journal_mode(), "wal");
  EXPECT_EQ(store.list_runs(RunStatus::kCompleted).size(), static_cast<std::size_t>(kWriters));
  Statement total = store.connection().statement("SELECT count(*) FROM step_timings");
  total.step_one();
  EXPECT_EQ(total.int64(0), kWriters * kRows);
}

TEST(Concurrency, KilledWriterKeepsCommittedRowsAndIsSweptAsKilled) {
  constexpr int kCommitted = 25;
  ScratchDir dir;
  const auto db = dir / "p.db";
  ResultsStore::open(db);
  Child writer({PARLAB_DB_TEST_WRITER, db.string(), "3", std::to_string(kCommitted), "--hold"}, dir / "writer.err");
  // "ready" comes after 25 commits and while a 26th row sits in an open transaction.
  const RunId run = run_id_from(writer.read_line(), "ready");

  {
    // Readers are not blocked by the writer's open transaction (WAL), and the sweep at open
    // must not touch a run whose owner is alive.
    auto reader = ResultsStore::open(db);
    EXPECT_EQ(reader.get_run(run)->status, RunStatus::kRunning);
    EXPECT_EQ(reader.step_timings(run).size(), static_cast<std::size_t>(kCommitted));
  }

  ASSERT_EQ(::kill(writer.pid(), SIGKILL), 0);
  const int status = writer.wait();
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

  auto store = ResultsStore::open(db);  // sweeps
  const auto after = store.get_run(run);
  EXPECT_EQ(after->status, RunStatus::kKilled);
  EXPECT_TRUE(after->ended_at.has_value());
  const auto rows = store.step_timings(run);
  ASSERT_EQ(rows.size(), static_cast<std::size_t>(kCommitted)) << "the uncommitted row is gone";
  EXPECT_EQ(rows.back().step, kCommitted - 1);
  EXPECT_DOUBLE_EQ(rows.back().step_seconds, 3000.0 + kCommitted - 1);
  // The dead writer's lock went with it: writing works at once.
  store.add_step_timing(run, {.step = kCommitted, .step_seconds = 1.0});
  EXPECT_EQ(store.step_timings(run).size(), static_cast<std::size_t>(kCommitted + 1));
}

}  // namespace
}  // namespace parlab::db
