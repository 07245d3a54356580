// ResultsStore round trips for every table, transactions, and the constraints that keep bad
// values out.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "db/results_store.h"
#include "db_test_util.h"
#include "parlab/version.h"

namespace parlab::db {
namespace {

using testing::ScratchDir;

class StoreTest : public ::testing::Test {
 protected:
  ScratchDir dir;
  ResultsStore store = ResultsStore::open(dir / "parlab.db");

  RunId new_run(RunKind kind = RunKind::kMeasured) {
    return store.begin_run({.kind = kind, .model = "m", .cluster = "c", .world_size = 2});
  }
  std::int64_t count(const char* sql) {
    Statement s = store.connection().statement(sql);
    s.step_one();
    return s.int64(0);
  }
};

const std::regex kTimestamp(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)");

TEST_F(StoreTest, ExperimentUpsertKeepsIdAndUpdatesText) {
  const ExperimentId b = store.upsert_experiment({"b-zero", "zero.toml", "first"});
  const ExperimentId a = store.upsert_experiment({"a-ddp", "ddp.toml", "ddp speedup"});
  EXPECT_EQ(store.upsert_experiment({"b-zero", "zero2.toml", "second"}), b);

  const auto all = store.list_experiments();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, a);  // sorted by name
  EXPECT_EQ(all[1].name, "b-zero");
  EXPECT_EQ(all[1].file, "zero2.toml");
  EXPECT_EQ(all[1].description, "second");
  EXPECT_TRUE(std::regex_match(all[1].created_at, kTimestamp)) << all[1].created_at;
  EXPECT_EQ(store.find_experiment("a-ddp")->description, "ddp speedup");
  EXPECT_FALSE(store.find_experiment("missing").has_value());
}

TEST_F(StoreTest, RunRoundTripAndStatus) {
  const ExperimentId e = store.upsert_experiment({.name = "exp"});
  const nlohmann::json plan = {{"dp", 2}, {"tp", 1}, {"zero", 3}};
  const RunId id = store.begin_run({.experiment = e,
                                    .kind = RunKind::kSimulated,
                                    .model = "gpt-1.3b",
                                    .cluster = "8xA100",
                                    .plan = plan,
                                    .world_size = 16,
                                    .seed = 0xFFFF'FFFF'FFFF'FFF0ull,  // above INT64_MAX
                                    .notes = "it's \"quoted\"; DROP TABLE runs;--"});
  auto run = store.get_run(id);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(run->experiment, e);
  EXPECT_EQ(run->kind, RunKind::kSimulated);
  EXPECT_EQ(run->model, "gpt-1.3b");
  EXPECT_EQ(run->cluster, "8xA100");
  EXPECT_EQ(run->plan, plan);
  EXPECT_EQ(run->world_size, 16);
  EXPECT_EQ(run->seed, 0xFFFF'FFFF'FFFF'FFF0ull);
  EXPECT_EQ(run->software_version, kVersion);
  EXPECT_EQ(run->status, RunStatus::kRunning);
  EXPECT_TRUE(std::regex_match(run->started_at, kTimestamp)) << run->started_at;
  EXPECT_FALSE(run->ended_at.has_value());
  EXPECT_EQ(run->pid, ::getpid());
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  EXPECT_EQ(run->host, host);
  EXPECT_EQ(run->notes, "it's \"quoted\"; DROP TABLE runs;--");

  store.mark_run_status(id, RunStatus::kFailed, "rank 3 ran out of memory");
  run = store.get_run(id);
  EXPECT_EQ(run->status, RunStatus::kFailed);
  ASSERT_TRUE(run->ended_at.has_value());
  EXPECT_TRUE(std::regex_match(*run->ended_at, kTimestamp));
  EXPECT_EQ(run->notes, "rank 3 ran out of memory");

  EXPECT_EQ(store.runs_of_experiment(e).size(), 1u);
  EXPECT_EQ(store.list_runs(RunStatus::kFailed).size(), 1u);
  EXPECT_EQ(store.list_runs(RunStatus::kRunning).size(), 0u);
  EXPECT_EQ(store.list_runs().size(), 1u);
  EXPECT_FALSE(store.get_run(id + 100).has_value());
  EXPECT_THROW(store.mark_run_status(id + 100, RunStatus::kCompleted), DbError);
}

TEST_F(StoreTest, RunParamsAndMetrics) {
  const RunId run = new_run();
  store.set_run_params(run,
                       std::vector<std::pair<std::string, std::string>>{{"lr", "3e-4"}, {"bucket_bytes", "25000000"}});
  store.set_run_param(run, "lr", "1e-3");  // overwrites
  const auto params = store.run_params(run);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0], (std::pair<std::string, std::string>("bucket_bytes", "25000000")));
  EXPECT_EQ(params[1], (std::pair<std::string, std::string>("lr", "1e-3")));

  store.set_run_metric(run, "speedup", 3.0);
  store.set_run_metric(run, "efficiency", 0.75);
  store.set_run_metric(run, "speedup", 3.5);
  const auto metrics = store.run_metrics(run);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_DOUBLE_EQ(metrics.at("speedup"), 3.5);
  EXPECT_DOUBLE_EQ(metrics.at("efficiency"), 0.75);
}

TEST_F(StoreTest, StepTimingsRoundTripAndReplayReplaces) {
  const RunId run = new_run();
  StepTiming a{.step = 0,
               .rank = 1,
               .data_seconds = 0.01,
               .forward_seconds = 0.2,
               .backward_seconds = 0.4,
               .exposed_comm_seconds = 0.05,
               .optimizer_seconds = 0.03,
               .idle_seconds = 0.001,
               .step_seconds = 0.7,
               .loss = 2.5,
               .samples = 32};
  StepTiming b = a;
  b.rank = 0;
  b.loss.reset();  // e.g. a rank that does not compute the loss
  StepTiming c = a;
  c.step = 1;
  store.add_step_timings(run, std::vector<StepTiming>{c, a, b});

  auto rows = store.step_timings(run);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].step, 0);  // ordered by step, then rank
  EXPECT_EQ(rows[0].rank, 0);
  EXPECT_FALSE(rows[0].loss.has_value());
  EXPECT_EQ(rows[1].rank, 1);
  EXPECT_DOUBLE_EQ(rows[1].data_seconds, 0.01);
  EXPECT_DOUBLE_EQ(rows[1].forward_seconds, 0.2);
  EXPECT_DOUBLE_EQ(rows[1].backward_seconds, 0.4);
  EXPECT_DOUBLE_EQ(rows[1].exposed_comm_seconds, 0.05);
  EXPECT_DOUBLE_EQ(rows[1].optimizer_seconds, 0.03);
  EXPECT_DOUBLE_EQ(rows[1].idle_seconds, 0.001);
  EXPECT_DOUBLE_EQ(rows[1].step_seconds, 0.7);
  EXPECT_DOUBLE_EQ(rows[1].loss.value(), 2.5);
  EXPECT_EQ(rows[1].samples, 32);
  EXPECT_EQ(rows[2].step, 1);

  StepTiming replay = a;
  replay.step_seconds = 0.9;  // step 0 on rank 1 redone after a restart
  store.add_step_timing(run, replay);
  rows = store.step_timings(run);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_DOUBLE_EQ(rows[1].step_seconds, 0.9);
}

TEST_F(StoreTest, CollectivesRoundTrip) {
  const RunId run = new_run();
  // 100 MB all-reduce over 4 ranks in 0.01 s: algbw 1e10 B/s, busbw 1e10 * 2*3/4 = 1.5e10 B/s.
  CollectiveRecord ar{.rank = 1,
                      .seq = 0,
                      .op = "all-reduce",
                      .group_name = "dp",
                      .bytes = 100'000'000,
                      .group_ranks = 4,
                      .start_seconds = 0.5,
                      .seconds = 0.01,
                      .algbw_bytes_per_s = 1e10,
                      .busbw_bytes_per_s = 1.5e10,
                      .tag = "bucket0"};
  CollectiveRecord send{.rank = 0,
                        .seq = 3,
                        .op = "send",
                        .group_name = "pp",
                        .bytes = 4096,
                        .group_ranks = 2,
                        .seconds = 1e-4,
                        .tag = "act:mb0"};
  store.add_collectives(run, std::vector<CollectiveRecord>{ar, send});
  const auto rows = store.collectives(run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].op, "send");  // ordered by rank
  EXPECT_FALSE(rows[0].start_seconds.has_value());
  EXPECT_FALSE(rows[0].busbw_bytes_per_s.has_value());
  EXPECT_EQ(rows[1].rank, 1);
  EXPECT_EQ(rows[1].op, "all-reduce");
  EXPECT_EQ(rows[1].group_name, "dp");
  EXPECT_EQ(rows[1].bytes, 100'000'000);
  EXPECT_EQ(rows[1].group_ranks, 4);
  EXPECT_DOUBLE_EQ(rows[1].start_seconds.value(), 0.5);
  EXPECT_DOUBLE_EQ(rows[1].seconds, 0.01);
  EXPECT_DOUBLE_EQ(rows[1].algbw_bytes_per_s.value(), 1e10);
  EXPECT_DOUBLE_EQ(rows[1].busbw_bytes_per_s.value(), 1.5e10);
  EXPECT_EQ(rows[1].tag, "bucket0");

  CollectiveRecord bad = ar;
  bad.seq = 9;
  bad.op = "allreduce";  // not a stored spelling
  EXPECT_THROW(store.add_collective(run, bad), DbError);
}

TEST_F(StoreTest, CheckpointsAndVerification) {
  const RunId run = new_run();
  store.add_checkpoint(run, {.step = 10,
                             .path = "ckpt/10/rank0.bin",
                             .checksum = "xxh3:aa",
                             .bytes = 1000,
                             .save_seconds = 0.2,
                             .verified = false});
  store.add_checkpoint(run, {.step = 20,
                             .path = "ckpt/20/rank0.bin",
                             .checksum = "xxh3:bb",
                             .bytes = 2000,
                             .save_seconds = 0.3,
                             .verified = false});
  EXPECT_FALSE(store.latest_verified_checkpoint(run).has_value());
  store.set_checkpoint_verified(run, 10, "ckpt/10/rank0.bin", true);
  const auto latest = store.latest_verified_checkpoint(run);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->step, 10);  // step 20 was never verified
  EXPECT_EQ(latest->checksum, "xxh3:aa");
  EXPECT_EQ(latest->bytes, 1000);
  EXPECT_DOUBLE_EQ(latest->save_seconds, 0.2);
  EXPECT_TRUE(latest->verified);
  EXPECT_TRUE(std::regex_match(latest->created_at, kTimestamp));
  const auto all = store.checkpoints(run);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[1].path, "ckpt/20/rank0.bin");
  EXPECT_FALSE(all[1].verified);
  EXPECT_THROW(store.set_checkpoint_verified(run, 30, "nope", true), DbError);
}

TEST_F(StoreTest, IncidentsRoundTrip) {
  const RunId run = new_run();
  const auto first = store.add_incident(run, {.kind = IncidentKind::kKilled,
                                              .rank = 2,
                                              .step = 37,
                                              .detail = "SIGKILL injected",
                                              .detection_seconds = 1.5,
                                              .restart_seconds = 4.0,
                                              .steps_lost = 7});
  store.add_incident(
      run, {.kind = IncidentKind::kHang, .detail = "job-wide stall", .detected_at = "2026-01-02T03:04:05.678Z"});
  const auto rows = store.incidents(run);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].id, first);
  EXPECT_EQ(rows[0].kind, IncidentKind::kKilled);
  EXPECT_EQ(rows[0].rank, 2);
  EXPECT_EQ(rows[0].step, 37);
  EXPECT_EQ(rows[0].detail, "SIGKILL injected");
  EXPECT_TRUE(std::regex_match(rows[0].detected_at, kTimestamp));
  EXPECT_DOUBLE_EQ(rows[0].detection_seconds.value(), 1.5);
  EXPECT_DOUBLE_EQ(rows[0].restart_seconds.value(), 4.0);
  EXPECT_EQ(rows[0].steps_lost, 7);
  EXPECT_EQ(rows[1].kind, IncidentKind::kHang);
  EXPECT_FALSE(rows[1].rank.has_value());
  EXPECT_FALSE(rows[1].steps_lost.has_value());
  EXPECT_EQ(rows[1].detected_at, "2026-01-02T03:04:05.678Z");
}

TEST_F(StoreTest, ProofsForRunsAndExperiments) {
  const ExperimentId e = store.upsert_experiment({.name = "kill-resume"});
  const RunId run = new_run();
  const nlohmann::json inputs = {{"kill_at_step", 37}, {"world_size", 4}};
  const nlohmann::json evidence = {{"max_abs_diff", 0.0}, {"checksums", {"aa", "aa"}}};
  store.add_proof({.run = run,
                   .kind = "kill_resume_bitwise",
                   .inputs = inputs,
                   .result = "weights identical",
                   .passed = true,
                   .evidence = evidence});
  store.add_proof({.experiment = e, .kind = "sim_matches_measured_bytes", .result = "off by 2", .passed = false});
  const auto of_run = store.proofs_of_run(run);
  ASSERT_EQ(of_run.size(), 1u);
  EXPECT_EQ(of_run[0].kind, "kill_resume_bitwise");
  EXPECT_EQ(of_run[0].inputs, inputs);
  EXPECT_EQ(of_run[0].evidence, evidence);
  EXPECT_TRUE(of_run[0].passed);
  EXPECT_FALSE(of_run[0].experiment.has_value());
  const auto of_exp = store.proofs_of_experiment(e);
  ASSERT_EQ(of_exp.size(), 1u);
  EXPECT_FALSE(of_exp[0].passed);
  EXPECT_EQ(of_exp[0].result, "off by 2");
  EXPECT_EQ(store.list_proofs().size(), 2u);
  // A proof about nothing is rejected by the schema.
  EXPECT_THROW(store.add_proof({.kind = "orphan", .passed = true}), DbError);
}

TEST_F(StoreTest, LatestCalibrationPerMachine) {
  EXPECT_FALSE(store.latest_calibration().has_value());
  store.add_calibration("laptop", {{"gemm_flops_per_s", 1e10}});
  const auto newer = store.add_calibration("laptop", {{"gemm_flops_per_s", 2e10}});
  store.add_calibration("server", {{"gemm_flops_per_s", 9e11}});
  const auto laptop = store.latest_calibration("laptop");
  ASSERT_TRUE(laptop.has_value());
  EXPECT_EQ(laptop->id, newer);
  EXPECT_EQ(laptop->json["gemm_flops_per_s"], 2e10);
  EXPECT_EQ(store.latest_calibration()->machine, "server");
  EXPECT_FALSE(store.latest_calibration("unknown").has_value());
}

TEST_F(StoreTest, WritesForAnUnknownRunAreRejected) {
  try {
    store.add_step_timing(12345, {.step = 0, .step_seconds = 1.0});
    FAIL() << "a row for a run that does not exist must be rejected";
  } catch (const DbError& e) {
    EXPECT_TRUE(e.is_constraint()) << e.what();
    EXPECT_NE(std::string(e.what()).find("FOREIGN KEY"), std::string::npos) << e.what();
  }
}

TEST_F(StoreTest, TransactionRollsBackOnException) {
  const RunId run = new_run();
  try {
    Transaction tx(store);
    store.add_step_timing(run, {.step = 0, .step_seconds = 1.0});
    store.set_run_metric(run, "speedup", 2.0);
    throw std::runtime_error("experiment failed half-way");
  } catch (const std::runtime_error&) {}
  EXPECT_TRUE(store.step_timings(run).empty());
  EXPECT_TRUE(store.run_metrics(run).empty());
  EXPECT_FALSE(store.connection().in_transaction());
}

TEST_F(StoreTest, TransactionIsInvisibleToOthersUntilCommit) {
  const RunId run = new_run();
  auto other = ResultsStore::open(store.path());
  Transaction tx(store);
  store.add_step_timing(run, {.step = 0, .step_seconds = 1.0});
  store.add_step_timing(run, {.step = 1, .step_seconds = 1.0});
  EXPECT_EQ(other.step_timings(run).size(), 0u);
  tx.commit();
  EXPECT_EQ(other.step_timings(run).size(), 2u);
}

TEST_F(StoreTest, BadRunKindIsRejectedByCheckWithAClearError) {
  try {
    store.connection()
        .statement("INSERT INTO runs(kind, world_size, software_version) VALUES (?, 1, 'x')")
        .bind_all("bogus")
        .run();
    FAIL() << "kind 'bogus' must be rejected";
  } catch (const DbError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(e.is_constraint());
    EXPECT_NE(what.find("CHECK constraint failed"), std::string::npos) << what;
    EXPECT_NE(what.find("kind"), std::string::npos) << what;
    EXPECT_NE(what.find("store_test.cpp"), std::string::npos) << "names where: " << what;
  }
  EXPECT_EQ(count("SELECT count(*) FROM runs"), 0);

  try {
    parse_run_kind("bogus");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "run.kind = 'bogus': one of analytic, simulated, measured");
  }
}

TEST_F(StoreTest, EnumSpellingsMatchTheSchema) {
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kCompleted, RunStatus::kFailed, RunStatus::kKilled}) {
    const RunId run = new_run();
    store.mark_run_status(run, s);
    EXPECT_EQ(store.get_run(run)->status, s);
  }
  const RunId run = new_run();
  for (IncidentKind k :
       {IncidentKind::kCrash, IncidentKind::kKilled, IncidentKind::kHang, IncidentKind::kStraggler, IncidentKind::kNan,
        IncidentKind::kOom, IncidentKind::kNetwork, IncidentKind::kCheckpointCorrupt, IncidentKind::kOther}) {
    store.add_incident(run, {.kind = k});
    EXPECT_EQ(parse_incident_kind(to_string(k)), k);
  }
  EXPECT_EQ(store.incidents(run).size(), 9u);
  const RunId analytic = new_run(RunKind::kAnalytic);
  const RunId simulated = new_run(RunKind::kSimulated);
  EXPECT_EQ(store.get_run(analytic)->kind, RunKind::kAnalytic);
  EXPECT_EQ(store.get_run(simulated)->kind, RunKind::kSimulated);
}

TEST_F(StoreTest, StatementTakesExactlyOneStatement) {
  EXPECT_THROW(store.connection().statement("SELECT 1; SELECT 2"), DbError);
  // Trailing semicolons and spaces are fine.
  Statement s = store.connection().statement("SELECT 41 + 1;  ");
  s.step_one();
  EXPECT_EQ(s.int64(0), 42);
}

}  // namespace
}  // namespace parlab::db
