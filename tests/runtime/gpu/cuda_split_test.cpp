// The splits the GPU runtime trains, on two GPUs (NCCL cannot put two ranks on one GPU), against
// the CPU run of the same seed over Gloo: DDP and ZeRO-1/2/3 (NCCL's uneven reduce-scatter and
// all-gather, buckets and gathered layers in GPU memory, the shard updated by the device AdamW). Weights agree within
// fp32 rounding (the GEMMs and NCCL sum in other orders than OpenBLAS and the Gloo ring), and the GPU run is
// bit-identical run to run. Also tensor parallelism (with and without sequence parallelism, and
// with ZeRO-2 on four GPUs), two pipeline stages (1F1B, GPipe, interleaved) and tp=2,pp=2 on four:
// their boundary tensors stay in GPU memory and move over NCCL. Skips saying how many GPUs it needs.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <cstdio>
#include <mutex>
#include <thread>

#include "runtime/comm/rendezvous.h"
#include "runtime/model/cuda/cuda_model.h"
#include "runtime/gpu/device.h"
#include "runtime/device/device.h"
#include "runtime/train/export.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer_checkpoint.h"
#include "tests/runtime/gpu/gpu_test_support.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

constexpr double kFp32Tolerance = 1e-4;  // as cuda_train_test.cpp: max |gpu - cpu| / max |cpu|

struct WorldEnd {
  std::vector<float> params;  // rank 0's whole model
  std::string fingerprint;
};

WorldEnd run_world(bool cuda, const std::string& plan, int world, int64_t until) {
  const TrainConfig config = testing::tiny_config(plan, world, 64, AdamWConfig{.lr = 1e-2});
  auto store = comm::make_in_process_store();
  WorldEnd out;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = testing::kTestTimeout;
        auto c = comm::make_gloo_communicator(store, r, world, go);
        TrainerOptions to;
        to.record_events = false;
        device::CudaRank gpu;
        if (cuda) {
          device::check_plan(device::Kind::kCuda, config.plan);
          device::CudaRankOptions o;
          o.timeout = testing::kTestTimeout;
          gpu = device::open_cuda_rank(store, r, world, r, o);
          to.collectives = gpu.world.get();
          to.make_device_model = gpu.make_model;
          to.make_device_optimizer = gpu.make_optimizer;
        }
        Trainer t(config, *c, to);
        while (t.state().step < until) t.step();
        std::vector<float> params = gather_full_params(t);
        const std::string fp = state_fingerprint(t).combined_hex();
        if (r == 0) {
          out.params = std::move(params);
          out.fingerprint = fp;
        }
        c->barrier()->wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

void expect_split_matches_cpu(const std::string& plan, int world = 2) {
  PARLAB_REQUIRE_CUDA_DEVICES(world);
  const WorldEnd cpu = run_world(false, plan, world, 5);
  const WorldEnd gpu = run_world(true, plan, world, 5);
  const WorldEnd again = run_world(true, plan, world, 5);
  const double diff = testing::relative_diff(gpu.params, cpu.params);
  gpu_test::report(plan + " on " + std::to_string(world) + " GPUs vs as many CPU ranks, 5 AdamW steps", diff,
                   kFp32Tolerance);
  EXPECT_LE(diff, kFp32Tolerance);
  EXPECT_EQ(gpu.fingerprint, again.fingerprint) << "GPU run to run";
  const WorldEnd start = run_world(false, plan, world, 0);
  EXPECT_GT(testing::relative_diff(cpu.params, start.params), 100 * kFp32Tolerance) << "training moved the weights";
}

TEST(CudaSplit, DdpOnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("gbs=16,mb=4"); }

TEST(CudaSplit, Zero1OnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("gbs=16,mb=4,zero=1"); }

// Buckets bound in GPU memory and reduce-scattered into the device gradient shard.
TEST(CudaSplit, Zero2OnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("gbs=16,mb=4,zero=2"); }

// Layers all-gathered into GPU buffers right before they compute, the shard updated on the GPU.
TEST(CudaSplit, Zero3OnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("gbs=16,mb=4,zero=3"); }

// Tensor parallelism: fc1/fc2 slices from the host model's initialisation at global positions,
// fc2's partial sum reduced in GPU memory over the TP group's NCCL, bias and residual added there.
TEST(CudaSplit, TensorParallelOnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("tp=2,gbs=16,mb=4"); }

// Sequence parallelism: reduce-scatter, the finish on this rank's rows, all-gather.
TEST(CudaSplit, TensorAndSequenceParallelOnTwoGpusMatchesTheCpuRun) {
  expect_split_matches_cpu("tp=2,sp=on,gbs=16,mb=4");
}

// Two pipeline stages (1F1B, four microbatches in flight): each GPU holds its layer span at the
// global flat offsets, activations and gradients cross between stages GPU to GPU (NCCL pairs).
TEST(CudaSplit, PipelineOnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("pp=2,gbs=16,mb=4"); }

TEST(CudaSplit, GpipePipelineOnTwoGpusMatchesTheCpuRun) { expect_split_matches_cpu("pp=2,schedule=gpipe,gbs=16,mb=4"); }

// Two chunks per stage, packed in each GPU's own buffers.
TEST(CudaSplit, InterleavedPipelineOnTwoGpusMatchesTheCpuRun) {
  expect_split_matches_cpu("pp=2,v=2,schedule=interleaved,gbs=16,mb=4");
}

TEST(CudaSplit, TensorAndPipelineOnFourGpusMatchesTheCpuRun) { expect_split_matches_cpu("tp=2,pp=2,gbs=16,mb=4", 4); }

TEST(CudaSplit, Zero2OfTensorSlicesOnFourGpusMatchesTheCpuRun) {
  expect_split_matches_cpu("tp=2,dp=2,zero=2,gbs=16,mb=4", 4);
}

// Device memory by the split (issue 31) on as many GPUs as ranks: each rank's device account
// (the CudaModel's own buffers, the executor's compute buffers, the device AdamW's moments)
// holds parameters, gradients and optimizer state exactly as the memory ledger says -- under
// ZeRO-3 a half of the parameters on each of two GPUs, under DDP the whole model -- and the
// steps after the first call no cudaMalloc (the pool hands back what the first step released).
// cudaMemGetInfo's used bytes do not grow over those steps either.
struct DeviceMemoryEnd {
  MemoryReport report;
  int64_t allocations_after_first = 0, allocations_at_end = 0;
  int64_t used_after_first = 0, used_at_end = 0;  // cudaMemGetInfo: total - free
};

int64_t device_used_bytes() {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) return -1;
  return static_cast<int64_t>(total_bytes - free_bytes);
}

std::vector<DeviceMemoryEnd> run_device_memory(const std::string& plan, int world, int steps) {
  const TrainConfig config = testing::tiny_config(plan, world, 64, AdamWConfig{.lr = 1e-2});
  auto store = comm::make_in_process_store();
  std::vector<DeviceMemoryEnd> out(world);
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = testing::kTestTimeout;
        auto c = comm::make_gloo_communicator(store, r, world, go);
        device::CudaRankOptions o;
        o.timeout = testing::kTestTimeout;
        device::CudaRank gpu = device::open_cuda_rank(store, r, world, r, o);
        TrainerOptions to;
        to.record_events = false;
        to.collectives = gpu.world.get();
        to.make_device_model = gpu.make_model;
        to.make_device_optimizer = gpu.make_optimizer;
        Trainer t(config, *c, to);
        const auto& cuda = dynamic_cast<const compute::cuda::CudaModel&>(*t.state().device_model);
        compute::cuda::DeviceGuard guard(r);
        t.step();
        out[r].allocations_after_first = cuda.device_memory().raw_allocations();
        out[r].used_after_first = device_used_bytes();
        while (t.state().step < steps) t.step();
        out[r].allocations_at_end = cuda.device_memory().raw_allocations();
        out[r].used_at_end = device_used_bytes();
        out[r].report = memory_report(t, strategy::load_cluster("cpu-local"));
        c->barrier()->wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

TEST(CudaSplit, DeviceMemoryOnTwoGpusIsWhatTheLedgerSaysAndSteadyStepsAllocateNothing) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  using model::MemoryCategory;
  for (int zero = 0; zero <= 3; ++zero) {
    const std::string plan = "gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(zero);
    SCOPED_TRACE(plan);
    for (const DeviceMemoryEnd& e : run_device_memory(plan, 2, 4)) {
      const MemoryReport& m = e.report;
      for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer,
                               MemoryCategory::kActivations, MemoryCategory::kTemporary})
        std::printf("  GPU zero=%d rank %d %-11s measured %8lld B, ledger %8.0f B\n", zero, m.rank,
                    std::string(model::to_string(c)).c_str(), static_cast<long long>(m.measured(c)), m.ledger(c));
      std::printf("  GPU zero=%d rank %d cudaMemGetInfo used %lld B after step 1, %lld B after step 4\n", zero, m.rank,
                  static_cast<long long>(e.used_after_first), static_cast<long long>(e.used_at_end));
      for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer})
        EXPECT_EQ(static_cast<double>(m.measured(c)), m.ledger(c)) << "rank " << m.rank << " " << model::to_string(c);
      EXPECT_GT(e.allocations_after_first, 0);
      EXPECT_EQ(e.allocations_at_end, e.allocations_after_first) << "rank " << m.rank << ": cudaMalloc after step 1";
      EXPECT_EQ(e.used_at_end, e.used_after_first) << "rank " << m.rank << ": device memory grew after step 1";
    }
  }
}

}  // namespace
}  // namespace parlab::train
