// Checkpoints outlive their split: a tp=2,pp=2 checkpoint (each rank writing the global-tensor
// runs of its slices) resumes as dp=4, as pp=4 and on one worker with the same weights and
// optimizer state bit for bit, and under its own split continues bit-identically.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <thread>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/train/export.h"
#include "runtime/train/trainer_checkpoint.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

namespace fs = std::filesystem;

TrainConfig config(const std::string& plan, int world) {
  TrainConfig c;
  c.model = strategy::parse_model_toml(
      "name = \"tiny4\"\nkind = \"mlp\"\nlayers = 4\nhidden = 32\nffn = 64\nclasses = 4\n"
      "microbatch = 4\nprecision = \"fp32\"\n",
      "tiny4.toml");
  c.plan = resolve_train_plan(c.model, "gbs=16,mb=4" + (plan.empty() ? "" : "," + plan), world,
                              strategy::load_cluster("cpu-local"));
  c.optimizer = AdamWConfig{.lr = 1e-2};
  c.data_size = 64;
  c.seed = 7;
  c.comm_timeout = testing::kTestTimeout;
  return c;
}

struct End {
  std::vector<float> at_resume;  // whole-model weights right after resuming (before any step)
  StateFingerprint fingerprint_at_resume;
  std::vector<float> final_params;
  StateFingerprint final_fingerprint;
  int64_t resumed_step = 0;
};

// On `world` threads: resume from `root` if asked, note the state, train to `until`, save if asked.
End run(const std::string& plan, int world, bool resume, int64_t until, bool save, const fs::path& root) {
  const TrainConfig cfg = config(plan, world);
  auto store = comm::make_in_process_store();
  End out;
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = testing::kTestTimeout;
        auto c = comm::make_gloo_communicator(store, r, world, go);
        TrainerOptions to;
        to.record_events = false;
        Trainer trainer(cfg, *c, to);
        CommCoordinator coord(*c, testing::kTestTimeout);
        int64_t resumed = 0;
        if (resume) resumed = resume_trainer(trainer, checkpoint::LoadOptions(root), coord).step;
        std::vector<float> at = gather_full_params(trainer);
        const StateFingerprint f0 = state_fingerprint(trainer);
        while (trainer.state().step < until) trainer.step();
        if (save) save_trainer(trainer, checkpoint::SaveOptions(root, 3), coord);
        std::vector<float> fin = gather_full_params(trainer);
        const StateFingerprint f1 = state_fingerprint(trainer);
        c->barrier()->wait();
        if (r == 0) {
          std::lock_guard lock(mu);
          out = {std::move(at), f0, std::move(fin), f1, resumed};
        }
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
      }
    });
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << plan << ": " << f;
  return out;
}

TEST(SplitCheckpointTest, Tp2Pp2CheckpointResumesUnderEverySplitWithTheSameState) {
  const fs::path root = fs::temp_directory_path() / ("parlab_split_ckpt_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const End saved = run("tp=2,pp=2", 4, false, 3, true, root);
  ASSERT_FALSE(saved.final_params.empty());
  const End straight = run("tp=2,pp=2", 4, false, 6, false, root / "unused");

  for (const auto& [plan, world] :
       {std::pair{std::string("tp=2,pp=2"), 4}, std::pair{std::string(""), 4}, std::pair{std::string("pp=4"), 4},
        std::pair{std::string(""), 1}, std::pair{std::string("tp=4"), 4}}) {
    const End resumed = run(plan, world, true, 6, false, root);
    const std::string what = (plan.empty() ? "dp" : plan) + " on " + std::to_string(world);
    EXPECT_EQ(resumed.resumed_step, 3) << what;
    // The same weights and optimizer state, whatever the split that reads them.
    EXPECT_EQ(resumed.at_resume, saved.final_params) << what;
    EXPECT_EQ(resumed.fingerprint_at_resume.combined_hex(), saved.final_fingerprint.combined_hex()) << what;
    // Training on: the same split continues bit-identically; another within float rounding.
    const double d = testing::relative_diff(resumed.final_params, straight.final_params);
    std::printf("  resumed as %s: weights after 6 steps differ from the uninterrupted tp=2,pp=2 run by %.3g\n",
                what.c_str(), d);
    if (plan == "tp=2,pp=2") {
      EXPECT_EQ(resumed.final_fingerprint.combined_hex(), straight.final_fingerprint.combined_hex()) << what;
    }
    EXPECT_LE(d, 1e-4) << what;
  }
  fs::remove_all(root);
}

}  // namespace
}  // namespace parlab::train
