// The batch runner records what it computed: runs, metrics and per-rank timings land in a real
// SQLite file, and a failing experiment is recorded as failed without stopping the others.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "experiments/lib/runner.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace {

struct TempDb {
  std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / ("runner-" + std::to_string(::getpid()) + ".db");
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

// A calibrated cpu-local written here, so the test never depends on the caller's directory (a
// results/ folder there would otherwise be read): 2 cores shared by up to 4 workers at 20 GFLOP/s
// each, with memory and links so fast that compute is all a step costs.
struct CalibratedHere {
  std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("runner-results-" + std::to_string(::getpid()));
  CalibratedHere() {
    std::filesystem::create_directories(dir / "clusters");
    std::ofstream(dir / "clusters" / "cpu-local.toml")
        << "name = \"cpu-local\"\nnodes = 1\ndevices_per_node = 4\nnics_per_node = 1\ncores_per_node = 2\n"
           "calibrated = true\n[device]\nname = \"cpu-core\"\nmemory_gib = 64\npeak_tflops_fp32 = 0.02\n"
           "peak_tflops_bf16 = 0.02\nmemory_bandwidth_gb_per_s = 1e6\n[intra]\nkind = \"loopback\"\n"
           "bandwidth_gb_per_s = 1e6\nlatency_us = 0\n[inter]\nkind = \"loopback\"\nbandwidth_gb_per_s = "
           "1e6\nlatency_us = 0\n";
    ::setenv("PARLAB_RESULTS", dir.c_str(), 1);
  }
  ~CalibratedHere() {
    ::unsetenv("PARLAB_RESULTS");
    std::filesystem::remove_all(dir);
  }
};

TEST(Runner, AnalyticScalingOnACalibratedClusterMatchesTheHandDerivation) {
  TempDb tmp;
  CalibratedHere calibrated;
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
    EXPECT_GT(timings[0].backward_seconds, timings[0].forward_seconds);
  }
  // By hand: lab-mlp (8 blocks of 1024 -> 4096 -> 1024, 16 classes) forward + backward of 256
  // samples = 3 x [2 x 256 x (2 x 1024 x 4096) x 8 + 2 x 256 x 1024 x 16] FLOPs at 20 GFLOP/s.
  const double flops = 3.0 * (2.0 * 256 * (2.0 * 1024 * 4096) * 8 + 2.0 * 256 * 1024 * 16);
  const double t1 = store.run_metrics(out.runs[0]).at("step_seconds");
  const double t2 = store.run_metrics(out.runs[1]).at("step_seconds");
  const double t4 = store.run_metrics(out.runs[2]).at("step_seconds");
  EXPECT_GE(t1, flops / 20e9 * 0.999);  // the GEMMs alone; GELU, loss and the update add a little
  EXPECT_LE(t1, flops / 20e9 * 1.05);
  // Two workers on two cores halve it; four share the same two cores: no faster than two.
  EXPECT_NEAR(t2, t1 / 2, 0.03 * t1);
  EXPECT_NEAR(t4, t1 / 2, 0.03 * t1);
}

TEST(Runner, AFailingExperimentIsRecordedAsFailed) {
  TempDb tmp;
  auto store = db::ResultsStore::open(tmp.path);
  // A model that does not exist: the run never starts, the experiment reports the error.
  const auto spec = parse_experiment(
      "name = \"broken\"\nkind = \"scaling\"\n[scaling]\nmodel = \"no-such-model\"\nsources = [\"analytic\"]\n",
      "b.toml");
  const Outcome out = run_experiment(spec, store, quiet());
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("no-such-model"), std::string::npos);
  EXPECT_TRUE(store.find_experiment("broken").has_value());
}

}  // namespace parlab::experiments
