// A results database an older parlab wrote, through the real binary: the commands that write
// upgrade it in place (the quickstart's `calibrate --if-needed` first of all), the ones that only
// read refuse it in one line that says how to upgrade it.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "db/migrate.h"
#include "db/results_store.h"
#include "db/sqlite.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

namespace fs = std::filesystem;

// An empty database at schema v4 (before step_timings.end_seconds), as parlab left it then.
void make_v4(const fs::path& path) {
  db::Connection c(path, {});
  db::migrate(c, 4);
  ASSERT_EQ(c.user_version(), 4);
}

TEST(UpgradeCli, CalibrateIfNeededUpgradesAnOlderDatabaseAndReadersSayHow) {
  ScratchDir dir;
  const fs::path old_db = dir.path() / "old.db", read_db = dir.path() / "read.db", results = dir.path() / "results";
  make_v4(old_db);
  make_v4(read_db);

  // A reader refuses in one line that names the flag and how to upgrade.
  ProcessResult r = run_process({parlab_bin(), "compare", "--db", read_db.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("--db = " + read_db.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("schema version 4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("to upgrade it"), std::string::npos) << r.err;

  // The quickstart's first step: no calibration in this results directory, so it measures (a
  // quick one, 2 processes), and the database it was given is upgraded rather than refused.
  r = run_process({parlab_bin(), "calibrate", "--if-needed", "--quick", "--nproc", "2", "--db", old_db.string()},
                  {"PARLAB_RESULTS=" + results.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_NE(r.err.find("calibrate: measuring because"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(results / "clusters" / "cpu-local.toml"));
  auto store = db::ResultsStore::open(old_db);
  EXPECT_EQ(store.schema_version(), db::latest_schema_version());
  EXPECT_GT(store.schema_version(), 4);
}

}  // namespace
}  // namespace parlab::testing
