// Schema versions: creating from nothing, upgrading a v1 file that holds data, keeping
// db/schema.sql equal to what the migrations build, and refusing files that are not ours.
#include "db/migrate.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "db/embedded_sql.h"
#include "db/results_store.h"
#include "db_test_util.h"

namespace parlab::db {
namespace {

using testing::ScratchDir;

// The version this code must reach: v1 (base tables) + v2 (calibrations, metrics, indexes) +
// v3 (predictions) + v4 (the proofs digest chain).
constexpr int kExpectedVersion = 5;

// Whitespace- and comment-insensitive text of one CREATE statement.
std::string normalize_sql(std::string sql) {
  sql = std::regex_replace(sql, std::regex("--[^\n]*"), "");
  sql = std::regex_replace(sql, std::regex("\\s+"), " ");
  sql = std::regex_replace(sql, std::regex(" ?([(),]) ?"), "$1");
  return sql;
}

// Everything that defines a schema: each object's normalized SQL and each table's columns
// (name, type, not-null, default, primary-key position) and foreign keys.
std::vector<std::string> fingerprint(Connection& c) {
  std::vector<std::string> out;
  std::vector<std::string> tables;
  {
    Statement s = c.statement(
        "SELECT type, name, tbl_name, sql FROM sqlite_schema "
        "WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name");
    while (s.step()) {
      out.push_back(s.text(0) + " " + s.text(1) + " on " + s.text(2) + ": " + normalize_sql(s.text(3)));
      if (s.text(0) == "table") tables.push_back(s.text(1));
    }
  }
  for (const std::string& table : tables) {
    Statement cols =
        c.statement("SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid");
    cols.bind_all(table);
    while (cols.step()) {
      out.push_back(table + "." + cols.text(0) + " " + cols.text(1) + " nn=" + cols.text(2) +
                    " default=" + cols.text(3) + " pk=" + cols.text(4));
    }
    Statement fks = c.statement(
        "SELECT \"table\", \"from\", \"to\", on_delete FROM pragma_foreign_key_list(?) "
        "ORDER BY id, seq");
    fks.bind_all(table);
    while (fks.step()) {
      out.push_back(table + " fk " + fks.text(1) + " -> " + fks.text(0) + "." + fks.text(2) + " on delete " +
                    fks.text(3));
    }
  }
  return out;
}

TEST(Migrate, EmptyFileReachesTheCurrentVersionInWalMode) {
  ScratchDir dir;
  const auto path = dir / "nested/deeper/parlab.db";  // parent directories do not exist yet
  auto store = ResultsStore::open(path);
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(store.schema_version(), kExpectedVersion);
  EXPECT_EQ(latest_schema_version(), kExpectedVersion);
  EXPECT_EQ(store.connection().journal_mode(), "wal");
  Statement fk = store.connection().statement("PRAGMA foreign_keys");
  fk.step_one();
  EXPECT_EQ(fk.int64(0), 1);
}

TEST(Migrate, MigrationsAreNumberedInOrder) {
  const auto steps = migrations();
  ASSERT_EQ(steps.size(), static_cast<std::size_t>(kExpectedVersion));
  EXPECT_EQ(steps[0].version, 1);
  EXPECT_EQ(steps[0].name, "0001_base");
  EXPECT_EQ(steps[1].version, 2);
  EXPECT_EQ(steps[1].name, "0002_calibrations_metrics_indexes");
  EXPECT_EQ(steps[2].version, 3);
  EXPECT_EQ(steps[2].name, "0003_predictions");
  EXPECT_EQ(steps[3].version, 4);
  EXPECT_EQ(steps[3].name, "0004_proof_chain");
}

TEST(Migrate, SchemaSqlEqualsTheResultOfAllMigrations) {
  Connection migrated(":memory:", {});
  migrate(migrated);
  Connection loaded(":memory:", {});
  loaded.exec_script(schema_sql());

  EXPECT_EQ(loaded.user_version(), migrated.user_version());
  EXPECT_EQ(loaded.user_version(), kExpectedVersion);
  const auto expected = fingerprint(migrated);
  const auto actual = fingerprint(loaded);
  EXPECT_EQ(actual, expected);
  // 10 tables + 6 indexes from v2, the predictions table and its index from v3 (autoindexes of UNIQUE/PRIMARY KEY are
  // excluded).
  int tables = 0, indexes = 0;
  for (const auto& line : expected) {
    tables += line.rfind("table ", 0) == 0;
    indexes += line.rfind("index ", 0) == 0;
  }
  EXPECT_EQ(tables, 11);
  EXPECT_EQ(indexes, 7);
}

TEST(Migrate, FingerprintSeesTheDifferenceBetweenVersions) {
  // Guards the test above: a fingerprint that ignored the schema would pass vacuously.
  Connection v1(":memory:", {});
  migrate(v1, 1);
  Connection v2(":memory:", {});
  migrate(v2);
  EXPECT_EQ(v1.user_version(), 1);
  EXPECT_NE(fingerprint(v1), fingerprint(v2));
}

TEST(Migrate, V1FileWithRowsUpgradesAndKeepsThem) {
  ScratchDir dir;
  const auto path = dir / "old.db";
  {
    // What an older parlab (schema v1) would have left behind, written with v1's columns only.
    Connection old(path, {});
    migrate(old, 1);
    ASSERT_EQ(old.user_version(), 1);
    old.exec_script(R"sql(
      INSERT INTO experiments(id, name, file, description) VALUES (7, 'ddp-scaling', 'ddp.toml', 'speedup');
      INSERT INTO runs(id, experiment_id, kind, model, plan, world_size, seed, software_version, status, host, notes)
        VALUES (3, 7, 'simulated', 'gpt-small', '{"dp":4}', 4, 42, '0.0.9', 'completed', 'h', 'old run');
      INSERT INTO step_timings(run_id, step, rank, forward_seconds, step_seconds, loss, samples)
        VALUES (3, 0, 0, 0.25, 1.5, 2.75, 16), (3, 1, 0, 0.25, 1.25, 2.5, 16);
      INSERT INTO incidents(run_id, kind, rank, step, detail) VALUES (3, 'hang', 2, 1, 'heartbeat lost');
    )sql");
  }
  auto store = ResultsStore::open(path);
  EXPECT_EQ(store.schema_version(), kExpectedVersion);

  const auto run = store.get_run(3);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->experiment, 7);
  EXPECT_EQ(run->kind, RunKind::kSimulated);
  EXPECT_EQ(run->status, RunStatus::kCompleted);
  EXPECT_EQ(run->plan, nlohmann::json({{"dp", 4}}));
  EXPECT_EQ(run->seed, 42u);
  const auto steps = store.step_timings(3);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[0].step_seconds, 1.5);
  EXPECT_DOUBLE_EQ(steps[1].loss.value(), 2.5);
  ASSERT_EQ(store.incidents(3).size(), 1u);
  EXPECT_EQ(store.incidents(3)[0].kind, IncidentKind::kHang);
  EXPECT_EQ(store.runs_of_experiment(7).size(), 1u);

  // The v2 tables exist and work on the upgraded file.
  store.add_calibration("box", {{"gemm_flops_per_s", 1.0e11}});
  store.set_run_metric(3, "speedup", 3.5);
  EXPECT_EQ(store.latest_calibration("box")->json["gemm_flops_per_s"], 1.0e11);
  EXPECT_DOUBLE_EQ(store.run_metrics(3).at("speedup"), 3.5);
}

TEST(Migrate, ReopeningACurrentFileChangesNothing) {
  ScratchDir dir;
  const auto path = dir / "p.db";
  { ResultsStore::open(path).upsert_experiment({.name = "e"}); }
  auto store = ResultsStore::open(path);
  EXPECT_EQ(store.schema_version(), kExpectedVersion);
  EXPECT_EQ(store.list_experiments().size(), 1u);
}

TEST(Migrate, RefusesAFileFromANewerParlab) {
  ScratchDir dir;
  const auto path = dir / "future.db";
  {
    Connection c(path, {});
    c.exec_script("PRAGMA user_version = 99");
  }
  try {
    ResultsStore::open(path);
    FAIL() << "opening a v99 file must fail";
  } catch (const SchemaError& e) {
    EXPECT_NE(std::string(e.what()).find("schema version 99 is newer"), std::string::npos) << e.what();
  }
}

TEST(Migrate, RefusesSomebodyElsesSqliteFile) {
  ScratchDir dir;
  const auto path = dir / "other.db";
  {
    Connection c(path, {});
    c.exec_script("CREATE TABLE photos(id INTEGER PRIMARY KEY)");
  }
  EXPECT_THROW(ResultsStore::open(path), SchemaError);
  Connection c(path, {});
  Statement s = c.statement("SELECT count(*) FROM sqlite_schema");
  s.step_one();
  EXPECT_EQ(s.int64(0), 1) << "the foreign file must be left as it was";
}

}  // namespace
}  // namespace parlab::db
