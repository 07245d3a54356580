// The device AdamW (runtime/device/cuda_optimizer.h, compute::cuda::adamw_step) against the CPU
// AdamW (train::AdamW) on random parameters and gradients: after several steps the parameters and
// both state buffers hold the same bits, for every branch of the kernel (weight decay on/off,
// either lerp form), and the state survives a download/upload round trip. Skips without a GPU.
#include <gtest/gtest.h>

#include "runtime/gpu/device.h"
#include "runtime/gpu/memory.h"
#include "runtime/device/cuda_optimizer.h"
#include "tests/runtime/gpu/gpu_test_support.h"

namespace parlab::device {
namespace {

namespace cuda = compute::cuda;

struct Case {
  const char* name;
  train::AdamWConfig config;
};

void expect_same(const std::string& what, const std::vector<float>& got, const std::vector<float>& want) {
  EXPECT_TRUE(gpu_test::bitwise_equal(got, want)) << what << ": max rel diff " << gpu_test::max_rel_diff(got, want);
}

TEST(CudaOptimizer, DeviceAdamWMatchesTheCpuAdamWBitForBitOnRandomData) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  constexpr int64_t n = 100'003;  // not a multiple of any block size
  constexpr int kSteps = 4;
  for (const Case& c : {Case{"decay, lerp near m", {.lr = 3e-3, .weight_decay = 0.1}},
                        Case{"no decay, lerp near m", {.lr = 1e-2, .weight_decay = 0.0}},
                        Case{"decay, lerp near g", {.lr = 1e-3, .beta1 = 0.3, .weight_decay = 0.01}},
                        Case{"no decay, lerp near g", {.lr = 1e-3, .beta1 = 0.2, .weight_decay = 0.0}}}) {
    SCOPED_TRACE(c.name);
    train::AdamW cpu(c.config, {0, n});
    train::AdamW host(c.config, {0, n});  // the device twin's host side: counts steps, holds lr
    std::vector<float> p_cpu = gpu_test::random_normal(n, 1);
    cuda::DeviceGuard guard(0);
    cuda::Stream stream;
    cuda::DeviceBuffer<float> p(n), g(n);
    p.upload(p_cpu, stream.get());
    std::unique_ptr<train::DeviceOptimizer> dev = make_cuda_optimizer(host, 0, stream.get());
    ASSERT_NE(dev, nullptr);
    for (int s = 0; s < kSteps; ++s) {
      const std::vector<float> grads = gpu_test::random_normal(n, 100 + s, 0.1f);
      cpu.step(p_cpu, grads);
      g.upload(grads, stream.get());
      host.count_external_step();
      dev->step(host, p.span(), g.span());
    }
    std::vector<float> p_dev(n);
    p.download(p_dev, stream.get());
    expect_same("parameters", p_dev, p_cpu);
    dev->download_state(host);
    for (const std::string b : {"exp_avg", "exp_avg_sq"}) {
      const auto want = cpu.buffer(b), got = host.buffer(b);
      expect_same(b, {got.begin(), got.end()}, {want.begin(), want.end()});
    }
    // Moved: a kernel that did nothing would leave the initial values.
    EXPECT_FALSE(gpu_test::bitwise_equal(p_dev, gpu_test::random_normal(n, 1)));

    // Round trip: a fresh twin given the downloaded state continues exactly like the CPU.
    std::unique_ptr<train::DeviceOptimizer> again = make_cuda_optimizer(host, 0, stream.get());
    again->upload_state(host);
    const std::vector<float> grads = gpu_test::random_normal(n, 999, 0.1f);
    cpu.step(p_cpu, grads);
    g.upload(grads, stream.get());
    host.count_external_step();
    again->step(host, p.span(), g.span());
    p.download(p_dev, stream.get());
    expect_same("parameters after a reload", p_dev, p_cpu);
  }
}

TEST(CudaOptimizer, SgdHasNoDeviceTwinSoTheTrainerUpdatesOnTheHost) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const train::Sgd sgd(train::SgdConfig{}, {0, 16});
  cuda::DeviceGuard guard(0);
  cuda::Stream stream;
  EXPECT_EQ(make_cuda_optimizer(sgd, 0, stream.get()), nullptr);
}

}  // namespace
}  // namespace parlab::device
