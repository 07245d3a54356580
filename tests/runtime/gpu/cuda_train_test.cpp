// The trainer on the GPU through runtime/device (CudaModel + NCCL), against the CPU trainer of the
// same seed: the same step program, weights within fp32 rounding (cuBLAS in its default math,
// no TF32: the only difference is summation order), bit-identical run to run and across a
// checkpoint on the GPU, device-independent checkpoints, and a rank that skips its all-reduces
// makes its peer's NCCL collective time out (the communicator aborted) instead of hanging.
// Every test skips without a CUDA device, naming the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <filesystem>
#include <thread>

#include "runtime/comm/rendezvous.h"
#include "runtime/device/device.h"
#include "runtime/train/export.h"
#include "runtime/train/trainer_checkpoint.h"
#include "tests/runtime/gpu/gpu_test_support.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

namespace fs = std::filesystem;

// fp32 on both sides, different summation orders in the GEMMs and the bias reductions: after a few
// AdamW steps the weights agree to this (max |gpu - cpu| / max |cpu|).
constexpr double kFp32Tolerance = 1e-4;

device::CudaRankOptions gpu_options() {
  device::CudaRankOptions o;
  o.timeout = testing::kTestTimeout;
  return o;
}

struct RunEnd {
  std::vector<float> params;
  StateFingerprint fingerprint;
  std::vector<double> losses;
};

// One rank (world of one) trains until `until`, optionally resuming from / saving to `root`. On
// the GPU the optimizer runs on the device (as `parlab train --device cuda` does) unless
// `host_optimizer`: then the update goes through host copies of the gradients and weights.
RunEnd run_one(bool cuda, const std::string& plan, int64_t until, const fs::path& root = {}, bool resume = false,
               bool save = false, bool host_optimizer = false) {
  const TrainConfig config = testing::tiny_config(plan, 1, 64, AdamWConfig{.lr = 1e-2});
  auto store = comm::make_in_process_store();
  comm::GlooOptions go;
  go.timeout = testing::kTestTimeout;
  auto world = comm::make_gloo_communicator(store, 0, 1, go);
  TrainerOptions to;
  to.record_events = false;
  device::CudaRank gpu;
  if (cuda) {
    gpu = device::open_cuda_rank(store, 0, 1, 0, gpu_options());
    to.collectives = gpu.world.get();
    to.make_device_model = gpu.make_model;
    if (!host_optimizer) to.make_device_optimizer = gpu.make_optimizer;
  }
  Trainer t(config, *world, to);
  CommCoordinator coord(*world, testing::kTestTimeout);
  if (resume) resume_trainer(t, checkpoint::LoadOptions(root), coord);
  RunEnd out;
  while (t.state().step < until) {
    const StepRecord r = t.step();
    out.losses.push_back(r.loss_sum / double(r.global_batch));
  }
  if (save) save_trainer(t, checkpoint::SaveOptions(root, 3, {}), coord);
  out.params = gather_full_params(t);
  out.fingerprint = state_fingerprint(t);
  return out;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("parlab_gpu_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

// Two microbatches of 4: the GPU model keeps both microbatches' activations (two slots).
constexpr const char* kPlan = "gbs=8,mb=4";

TEST(CudaTrain, OneGpuMatchesTheCpuRunOfTheSameSeedWithinFp32Rounding) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const RunEnd cpu = run_one(false, kPlan, 6);
  const RunEnd gpu = run_one(true, kPlan, 6);
  const double diff = testing::relative_diff(gpu.params, cpu.params);
  gpu_test::report("weights after 6 AdamW steps, gpu vs cpu", diff, kFp32Tolerance);
  EXPECT_LE(diff, kFp32Tolerance);
  ASSERT_EQ(gpu.losses.size(), cpu.losses.size());
  for (size_t s = 0; s < cpu.losses.size(); ++s) EXPECT_NEAR(gpu.losses[s], cpu.losses[s], 1e-4 * cpu.losses[s]) << s;
  // And training moved the weights far more than the tolerance.
  const RunEnd start = run_one(false, kPlan, 0);
  EXPECT_GT(testing::relative_diff(cpu.params, start.params), 100 * kFp32Tolerance);
}

// The device AdamW does the host AdamW's fp32 operations in the same order: on the same GPU
// gradients the two update paths end in the same bits, state included.
TEST(CudaTrain, TheDeviceOptimizerIsBitIdenticalToTheHostOptimizerOnTheSameGpuGradients) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const RunEnd on_device = run_one(true, kPlan, 5);
  const RunEnd on_host = run_one(true, kPlan, 5, {}, false, false, /*host_optimizer=*/true);
  EXPECT_TRUE(gpu_test::bitwise_equal(on_device.params, on_host.params))
      << "max rel diff " << testing::relative_diff(on_device.params, on_host.params);
  EXPECT_EQ(on_device.fingerprint.combined_hex(), on_host.fingerprint.combined_hex());
}

TEST(CudaTrain, TheGpuRunIsBitIdenticalRunToRunAndAcrossACheckpoint) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const RunEnd a = run_one(true, kPlan, 5);
  const RunEnd b = run_one(true, kPlan, 5);
  EXPECT_EQ(a.fingerprint.combined_hex(), b.fingerprint.combined_hex());
  const fs::path root = fresh_dir("resume");
  run_one(true, kPlan, 3, root, false, true);
  const RunEnd resumed = run_one(true, kPlan, 5, root, true, false);
  EXPECT_EQ(resumed.fingerprint.combined_hex(), a.fingerprint.combined_hex());
  fs::remove_all(root);
}

TEST(CudaTrain, AGpuCheckpointResumesOnTheCpuAndTheReverse) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const RunEnd cpu = run_one(false, kPlan, 5);
  const fs::path g = fresh_dir("g2c"), c = fresh_dir("c2g");
  const RunEnd gpu3 = run_one(true, kPlan, 3, g, false, true);
  const RunEnd cpu3 = run_one(false, kPlan, 3, c, false, true);
  const RunEnd on_cpu = run_one(false, kPlan, 5, g, true, false);
  const RunEnd on_gpu = run_one(true, kPlan, 5, c, true, false);
  EXPECT_LE(testing::relative_diff(on_cpu.params, cpu.params), kFp32Tolerance);
  EXPECT_LE(testing::relative_diff(on_gpu.params, cpu.params), kFp32Tolerance);
  // Resumed, not restarted: a fresh start would be 5 steps of its own, 2 steps short here.
  EXPECT_LE(testing::relative_diff(gpu3.params, cpu3.params), kFp32Tolerance);
  fs::remove_all(g);
  fs::remove_all(c);
}

TEST(CudaTrain, ARankThatSkipsItsAllReducesMakesThePeersNcclCollectiveTimeOut) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  const TrainConfig base = testing::tiny_config("gbs=16,mb=4", 2, 64, AdamWConfig{.lr = 1e-2});
  auto store = comm::make_in_process_store();
  std::vector<std::string> errors(2);
  std::vector<double> seconds(2, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      TrainConfig config = base;
      config.comm_timeout = std::chrono::milliseconds(2000);
      comm::GlooOptions go;
      go.timeout = testing::kTestTimeout;
      auto world = comm::make_gloo_communicator(store, r, 2, go);
      device::CudaRank gpu = device::open_cuda_rank(store, r, 2, r, gpu_options());
      TrainerOptions to;
      to.collectives = gpu.world.get();
      to.make_device_model = gpu.make_model;
      if (r == 1) to.faults.skip_collectives_step = 1;
      Trainer t(config, *world, to);
      const auto t0 = std::chrono::steady_clock::now();
      try {
        for (int s = 0; s < 3; ++s) t.step();
      } catch (const comm::CollectiveTimeout& e) {
        errors[r] = std::string("timeout: ") + e.what();
      } catch (const std::exception& e) {
        errors[r] = std::string("other: ") + e.what();
      }
      seconds[r] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  for (auto& t : threads) t.join();
  // Rank 0 waits for a bucket rank 1 never sends: a typed timeout, within the timeout and slack.
  EXPECT_EQ(errors[0].rfind("timeout: ", 0), 0u) << errors[0];
  EXPECT_LT(seconds[0], 30.0);
}

}  // namespace
}  // namespace parlab::train
