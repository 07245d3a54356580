// The batch runner records what it computed: runs, metrics and per-rank timings land in a real
// SQLite file, and a failing experiment is recorded as failed without stopping the others.
#include <gtest/gtest.h>

#include <filesystem>

#include "experiments/lib/runner.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace {

struct TempDb {
  std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / ("runner-" + std::to_string(::getpid()) + ".db");
  ~TempDb() {
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path.string() + suffix);
  }
};

RunnerOptions quiet() {
  RunnerOptions o;
  o.progress = [](const std::string&) {};
  return o;
}

}  // namespace

TEST(Runner, LedgerExperimentRecordsTheSeedsVerdicts) {
  TempDb tmp;
  auto store = db::ResultsStore::open(tmp.path);
  const auto spec = load_experiment(std::filesystem::path(PARLAB_SOURCE_DIR) / "experiments/seed_budget.toml");
  const Outcome out = run_experiment(spec, store, quiet());
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.runs.size(), 1u);
  const auto metrics = store.run_metrics(out.runs[0]);
  EXPECT_DOUBLE_EQ(metrics.at("replica_gb"), 130);
  EXPECT_DOUBLE_EQ(metrics.at("ddp_fits"), 0);
  EXPECT_DOUBLE_EQ(metrics.at("shard_model_state"), 1);
  EXPECT_DOUBLE_EQ(metrics.at("tensor_split_needed"), 0);
  EXPECT_DOUBLE_EQ(metrics.at("pipeline_candidate"), 0);
  EXPECT_EQ(store.get_run(out.runs[0])->status, db::RunStatus::kCompleted);
  EXPECT_NE(out.report.find("estimated replica GB: 130"), std::string::npos);
  const auto exp = store.find_experiment("seed_budget");
  ASSERT_TRUE(exp);
  EXPECT_EQ(store.runs_of_experiment(exp->id).size(), 1u);
}

TEST(Runner, AnalyticScalingRecordsPerRankTimings) {
  TempDb tmp;
  auto store = db::ResultsStore::open(tmp.path);
  const auto spec = parse_experiment(
      "name = \"tiny_scaling\"\nkind = \"scaling\"\n[scaling]\nmodel = \"lab-mlp\"\ncluster = \"cpu-local\"\n"
      "plan = \"gbs=256\"\nworkers = [1, 2, 4]\nsources = [\"analytic\"]\n",
      "tiny.toml");
  const Outcome out = run_experiment(spec, store, quiet());
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.runs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    const auto run = store.get_run(out.runs[i]);
    EXPECT_EQ(run->kind, db::RunKind::kAnalytic);
    EXPECT_EQ(run->world_size, 1 << i);
    EXPECT_EQ(run->plan["gbs"], 256);
    const auto timings = store.step_timings(out.runs[i]);
    ASSERT_EQ(timings.size(), 1u);  // DDP: one representative rank
    EXPECT_GT(timings[0].forward_seconds, 0);
    EXPECT_GT(timings[0].backward_seconds, timings[0].forward_seconds);
    EXPECT_GT(store.run_metrics(out.runs[i]).at("step_seconds"), 0);
  }
  // Four workers on two cores: the analytic model must not promise more than 2 cores' worth.
  const double t1 = store.run_metrics(out.runs[0]).at("step_seconds");
  const double t4 = store.run_metrics(out.runs[2]).at("step_seconds");
  EXPECT_GT(t4, t1 / 2.0);
}

TEST(Runner, AFailingExperimentIsRecordedAsFailed) {
  TempDb tmp;
  auto store = db::ResultsStore::open(tmp.path);
  // A model that does not exist: the run never starts, the experiment reports the error.
  const auto spec = parse_experiment(
      "name = \"broken\"\nkind = \"scaling\"\n[scaling]\nmodel = \"no-such-model\"\nsources = [\"analytic\"]\n", "b.toml");
  const Outcome out = run_experiment(spec, store, quiet());
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("no-such-model"), std::string::npos);
  EXPECT_TRUE(store.find_experiment("broken").has_value());
}

}  // namespace parlab::experiments
