// Real processes through the real CLI: `parlab train --nproc 2` (PARLAB_BIN) spawns two workers
// that rendezvous through the run directory and train over Gloo. Checked against references
// computed here without the runtime: the dumped weights are the seeded initial weights, the
// dumped inputs are the dataset's samples, and the dumped (all-reduced) gradients equal a plain
// single-process LabMlp pass over the same global batch.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "cli_fixture.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/launch/process.h"
#include "runtime/launch/supervisor.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/data.h"
#include "runtime/train/sampler.h"
#include "runtime/train/telemetry.h"
#include "tests/support/ports.h"

namespace parlab::launch {
namespace {

const model::MlpShape kShape{.hidden = 32, .ffn = 64, .blocks = 2, .classes = 4};
constexpr uint64_t kSeed = 11;
using CliTrainTest = CliTest;

TEST_F(CliTrainTest, TwoProcessesTrainAndDumpWhatAReferenceComputes) {
  std::string out;
  const fs::path run = dir_ / "run", dump = dir_ / "dump", trace = dir_ / "trace.json";
  const ExitStatus st = parlab({"train",
                                "--nproc",
                                "2",
                                "--model",
                                (dir_ / "tiny.toml").string(),
                                "--plan",
                                "gbs=16,mb=4,bucket_mb=0.008",
                                "--optimizer",
                                "sgd",
                                "--lr",
                                "0.1",
                                "--steps",
                                "3",
                                "--seed",
                                std::to_string(kSeed),
                                "--data-size",
                                "40",
                                "--run-dir",
                                run.string(),
                                "--dump-step",
                                dump.string(),
                                "--trace",
                                trace.string(),
                                "--timeout",
                                "20"},
                               out);
  ASSERT_TRUE(st.ok()) << st.describe() << "\n" << out;
  EXPECT_NE(out.find("step 3/3"), std::string::npos) << out;
  EXPECT_NE(out.find("Per-rank time per step"), std::string::npos) << out;

  // Per-rank records: 3 steps each, 8 samples of the global 16 each.
  const auto r0 = read_records(rank_records_path(run, 0)), r1 = read_records(rank_records_path(run, 1));
  ASSERT_EQ(r0.size(), 3u);
  ASSERT_EQ(r1.size(), 3u);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(r0[s].samples + r1[s].samples, r0[s].global_batch);
    EXPECT_EQ(r0[s].step, s);
  }
  // 40 samples, batches of 16: the third step is the short one (8).
  EXPECT_EQ(r0[2].global_batch, 8);

  // The independent reference: step 0's global batch through a whole LabMlp, one microbatch.
  const train::SyntheticDataset data({.seed = kSeed, .size = 40, .width = 32, .classes = 4});
  const train::ElasticSampler sampler({.seed = kSeed, .dataset_size = 40, .global_batch = 16});
  const std::vector<int64_t> batch = sampler.batch_indices(sampler.next_batch());
  model::LabMlp ref(kShape, kSeed);
  model::MicrobatchState mb = ref.new_microbatch(16, 16);
  data.fill(batch, mb);
  ref.forward(mb);
  ref.backward(mb);

  std::vector<float> grads_rank0;
  for (int rank = 0; rank < 2; ++rank) {
    const fs::path d = dump / ("rank-" + std::to_string(rank));
    const auto weights = checkpoint::SafetensorsFile::open(d / "weights.safetensors");
    const auto grads = checkpoint::SafetensorsFile::open(d / "grads.safetensors");
    const auto inputs = checkpoint::SafetensorsFile::open(d / "inputs.safetensors");
    std::vector<float> all_grads;
    double max_diff = 0, max_ref = 0;
    for (const model::ParamTensor& t : ref.layout().tensors()) {
      const auto init = ref.param(t.name);  // the reference's weights are still the initial ones
      const std::vector<float> w = weights.read_f32(t.name);
      EXPECT_TRUE(std::equal(w.begin(), w.end(), init.begin(), init.end())) << "rank " << rank << " " << t.name;
      const std::vector<float> g = grads.read_f32(t.name);
      EXPECT_EQ(grads.info(t.name).shape, t.shape);
      const auto rg = ref.grad(t.name);
      for (size_t i = 0; i < g.size(); ++i) {
        max_diff = std::max(max_diff, std::abs(double(g[i]) - rg[i]));
        max_ref = std::max(max_ref, std::abs(double(rg[i])));
      }
      all_grads.insert(all_grads.end(), g.begin(), g.end());
    }
    // Same fp32 argument as the threads equivalence test: summation order only.
    EXPECT_LE(max_diff / max_ref, 1e-5) << "rank " << rank << ": largest gradient difference " << max_diff;
    if (rank == 0)
      grads_rank0 = all_grads;
    else
      EXPECT_EQ(all_grads, grads_rank0) << "the all-reduce gave the ranks different gradients";

    // Rank r holds samples [8r, 8r + 8) of the batch, as 2 microbatches of 4.
    for (int k = 0; k < 2; ++k) {
      const std::vector<int64_t> idx = inputs.read_i64("indices.mb" + std::to_string(k));
      const std::vector<float> x = inputs.read_f32("inputs.mb" + std::to_string(k));
      const std::vector<int64_t> labels = inputs.read_i64("labels.mb" + std::to_string(k));
      ASSERT_EQ(idx.size(), 4u);
      for (int i = 0; i < 4; ++i) {
        EXPECT_EQ(idx[i], batch[8 * rank + 4 * k + i]);
        std::vector<float> sample(32);
        EXPECT_EQ(labels[i], data.sample(idx[i], sample));
        EXPECT_TRUE(std::equal(sample.begin(), sample.end(), x.begin() + 32 * i));
      }
    }
  }

  // The trace has both ranks' compute and comm events.
  std::ifstream tin(trace);
  const nlohmann::json tj = nlohmann::json::parse(tin);
  std::set<std::pair<int, int>> rank_threads;
  for (const auto& e : tj.at("traceEvents"))
    if (e.at("ph") == "X") rank_threads.insert({e.at("pid").get<int>(), e.at("tid").get<int>()});
  EXPECT_EQ(rank_threads, (std::set<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
  EXPECT_TRUE(survivors().empty());
}

TEST_F(CliTrainTest, AFailingWorkerStopsTheRunAndIsNamed) {
  std::string out;
  const fs::path run = dir_ / "run";
  const ExitStatus st =
      parlab({"train", "--nproc", "3", "--model", (dir_ / "tiny.toml").string(), "--plan", "gbs=12,mb=4", "--steps",
              "50", "--run-dir", run.string(), "--timeout", "20", "--fault", "exit:rank=1,step=2,code=3"},
             out);
  EXPECT_TRUE(st.exited);
  EXPECT_NE(st.code, 0) << out;
  EXPECT_NE(out.find("rank 1 exited with code 3"), std::string::npos) << out;
  // The run directory keeps what the workers wrote: rank 1 finished steps 0 and 1, then failed.
  int errors = 0;
  EXPECT_EQ(read_records(rank_records_path(run, 1), &errors).size(), 2u);
  EXPECT_EQ(errors, 1);  // one {"type": "error"} line, the last
  EXPECT_TRUE(survivors().empty()) << survivors().front();
}

TEST_F(CliTrainTest, ManualLaunchWithTorchrunAndSlurmVariables) {
  // What torchrun or srun does: start one `parlab train` per rank with launcher variables and no
  // --nproc; rank 0 hosts the TCP store at MASTER_ADDR:MASTER_PORT. Rank 0 speaks torchrun,
  // rank 1 Slurm: both conventions meet in one job.
  const fs::path run = dir_ / "manual";
  const std::string port = std::to_string(parlab::testing::unused_loopback_port());
  const std::vector<std::string> args = {bin_,        "train",      "--model",   (dir_ / "tiny.toml").string(),
                                         "--plan",    "gbs=8,mb=4", "--steps",   "2",
                                         "--run-dir", run.string(), "--timeout", "20"};
  ChildProcess r0(
      args,
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}},
      dir_ / "manual-0.log");
  ChildProcess r1(args,
                  {{"SLURM_PROCID", "1"},
                   {"SLURM_NTASKS", "2"},
                   {"SLURM_LOCALID", "1"},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", port}},
                  dir_ / "manual-1.log");
  const auto s0 = r0.wait_for(std::chrono::seconds(60)), s1 = r1.wait_for(std::chrono::seconds(60));
  ASSERT_TRUE(s0 && s0->ok()) << (s0 ? s0->describe() : "still running");
  ASSERT_TRUE(s1 && s1->ok()) << (s1 ? s1->describe() : "still running");
  // Nobody set PARLAB_STORE_TOKEN: the ranks drew one job token through the run directory,
  // owner-only (comm/store_token.h), and the TCP store admitted both.
  const fs::path token = run / "store_token";
  ASSERT_TRUE(fs::exists(token));
  EXPECT_EQ(fs::status(token).permissions() & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  const auto a = read_records(rank_records_path(run, 0)), b = read_records(rank_records_path(run, 1));
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  for (int s = 0; s < 2; ++s) {
    EXPECT_EQ(a[s].world, 2);
    EXPECT_EQ(a[s].samples + b[s].samples, 8);
  }
}

TEST_F(CliTrainTest, BadInputFailsBeforeAnyWorkerStarts) {
  std::string out;
  const ExitStatus st = parlab({"train", "--nproc", "3", "--model", (dir_ / "tiny.toml").string(), "--plan",
                                "gbs=16,mb=4", "--run-dir", (dir_ / "run").string()},
                               out);
  EXPECT_EQ(st.code, 2) << out;
  EXPECT_NE(out.find("plan.gbs = 16"), std::string::npos) << out;  // 16 is no multiple of 4 x 3
  EXPECT_FALSE(fs::exists(dir_ / "run" / "rank-0.log"));
}

}  // namespace
}  // namespace parlab::launch
