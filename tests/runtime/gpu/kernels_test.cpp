// Every CUDA kernel against its CPU twin (runtime/compute/cpu/kernels.h) on random inputs, llm.c
// style: each check prints the largest difference relative to the tensor's scale
// (gpu_test::max_rel_diff) and its tolerance. Why these tolerances:
//   linear (sgemm) 2e-5  fp32 sums of up to 4096 products in another order differ by ~1e-6 of
//                        the tensor's scale (random-walk rounding, sqrt(K) eps); TF32 (10-bit
//                        mantissa, ~1e-3 per product) would show ~2e-4 and fail.
//   bias sums     1e-5   64..1024 terms in another order: ~1e-7.
//   GELU          1e-6   same formula, no FMA on either side: expected bit-identical (printed).
//   residual      exact  one IEEE addition per element.
//   softmax/CE    1e-5   expf differs from glibc's by <= 2 ulp; sums in double: ~1e-7.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cuda/kernels.h"
#include "tests/runtime/gpu/gpu_test_support.h"

namespace parlab::compute::cuda {
namespace {

using gpu_test::bitwise_equal;
using gpu_test::max_rel_diff;
using gpu_test::random_normal;
using gpu_test::report;

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PARLAB_REQUIRE_CUDA_DEVICES(1);
    pin_blas_to_one_thread();
    guard_ = std::make_unique<DeviceGuard>(0);
    stream_ = std::make_unique<Stream>();
    blas_ = std::make_unique<CublasHandle>(stream_->get());
  }
  cudaStream_t stream() const { return stream_->get(); }

  template <typename T>
  DeviceBuffer<T> on_device(const std::vector<T>& host) {
    DeviceBuffer<T> buf(host.size());
    buf.upload(host, stream());
    return buf;
  }
  std::vector<float> on_host(const DeviceBuffer<float>& buf) {
    std::vector<float> host(buf.size());
    buf.download(host, stream());
    return host;
  }

  std::unique_ptr<DeviceGuard> guard_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<CublasHandle> blas_;
};

struct LinearShape {
  int64_t B, C, OC;
};
// The lab-mlp's fc1 and fc2 at microbatch 64, its head, and odd sizes (no multiple of a tile).
const LinearShape kLinearShapes[] = {{64, 1024, 4096}, {64, 4096, 1024}, {64, 1024, 16}, {37, 129, 17}};

TEST_F(CudaKernelsTest, LinearForwardMatchesCpu) {
  for (const auto& [B, C, OC] : kLinearShapes) {
    const auto inp = random_normal(B * C, 1), w = random_normal(OC * C, 2, 0.03f), bias = random_normal(OC, 3);
    std::vector<float> want(B * OC);
    cpu::linear_forward(want.data(), inp.data(), w.data(), bias.data(), B, C, OC);
    auto d_inp = on_device(inp), d_w = on_device(w), d_bias = on_device(bias);
    auto d_out = on_device(std::vector<float>(B * OC, 99.0f));  // garbage: must be overwritten
    linear_forward(*blas_, d_out.data(), d_inp.data(), d_w.data(), d_bias.data(), B, C, OC);
    const double diff = max_rel_diff(on_host(d_out), want);
    report("linear_forward B" + std::to_string(B) + " C" + std::to_string(C) + " OC" + std::to_string(OC), diff, 2e-5);
    EXPECT_LT(diff, 2e-5);
  }
}

TEST_F(CudaKernelsTest, LinearBackwardAccumulatesLikeCpu) {
  for (const auto& [B, C, OC] : kLinearShapes) {
    const auto inp = random_normal(B * C, 4), w = random_normal(OC * C, 5, 0.03f), dout = random_normal(B * OC, 6);
    // Nonzero starting gradients: the kernels must ADD.
    auto dinp = random_normal(B * C, 7), dw = random_normal(OC * C, 8), db = random_normal(OC, 9);
    auto d_inp = on_device(inp), d_w = on_device(w), d_dout = on_device(dout);
    auto d_dinp = on_device(dinp), d_dw = on_device(dw), d_db = on_device(db);
    cpu::linear_backward(dinp.data(), cpu::GradWrite::kAccumulate, dw.data(), db.data(), dout.data(), inp.data(),
                         w.data(), B, C, OC);
    linear_backward(*blas_, d_dinp.data(), d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), B, C, OC);
    const std::string shape = " B" + std::to_string(B) + " C" + std::to_string(C) + " OC" + std::to_string(OC);
    const double d1 = max_rel_diff(on_host(d_dinp), dinp), d2 = max_rel_diff(on_host(d_dw), dw),
                 d3 = max_rel_diff(on_host(d_db), db);
    report("linear_backward dinp" + shape, d1, 2e-5);
    report("linear_backward dweight" + shape, d2, 2e-5);
    report("linear_backward dbias" + shape, d3, 1e-5);
    EXPECT_LT(d1, 2e-5);
    EXPECT_LT(d2, 2e-5);
    EXPECT_LT(d3, 1e-5);
  }
}

TEST_F(CudaKernelsTest, LinearBackwardWithoutDinpSkipsIt) {
  const int64_t B = 8, C = 16, OC = 4;
  auto d_inp = on_device(random_normal(B * C, 1)), d_w = on_device(random_normal(OC * C, 2));
  auto d_dout = on_device(random_normal(B * OC, 3));
  DeviceBuffer<float> d_dw(OC * C), d_db(OC);
  d_dw.zero(stream());
  d_db.zero(stream());
  linear_backward(*blas_, nullptr, d_dw.data(), d_db.data(), d_dout.data(), d_inp.data(), d_w.data(), B, C, OC);
  // dbias = column sums of dout, by hand in double.
  const auto dout = random_normal(B * OC, 3);
  std::vector<float> want(OC, 0.0f);
  for (int64_t o = 0; o < OC; ++o) {
    double s = 0;
    for (int64_t b = 0; b < B; ++b) s += dout[b * OC + o];
    want[o] = static_cast<float>(s);
  }
  EXPECT_LT(max_rel_diff(on_host(d_db), want), 1e-6);
}

TEST_F(CudaKernelsTest, GeluMatchesCpuBitForBit) {
  const int64_t N = 100003;
  // Scale 4 reaches the tanh clamp (|u| > 9 for |x| > ~4.8) and its far tails.
  const auto x = random_normal(N, 11, 4.0f), dout = random_normal(N, 12);
  std::vector<float> want(N), dwant(N);
  cpu::gelu_forward(want.data(), x.data(), N);
  cpu::gelu_backward(dwant.data(), cpu::GradWrite::kOverwrite, x.data(), dout.data(), N);
  auto d_x = on_device(x), d_dout = on_device(dout);
  DeviceBuffer<float> d_out(N);
  gelu_forward(stream(), d_out.data(), d_x.data(), N);
  const auto got = on_host(d_out);
  gelu_backward(stream(), d_dout.data(), d_x.data(), d_dout.data(), N);  // in place, as LabMlp
  const auto dgot = on_host(d_dout);
  const double d1 = max_rel_diff(got, want), d2 = max_rel_diff(dgot, dwant);
  report("gelu_forward", d1, 1e-6);
  report("gelu_backward (in place)", d2, 1e-6);
  std::printf("  gelu bit-identical to the CPU: forward %s, backward %s\n", bitwise_equal(got, want) ? "yes" : "no",
              bitwise_equal(dgot, dwant) ? "yes" : "no");
  EXPECT_LT(d1, 1e-6);
  EXPECT_LT(d2, 1e-6);
}

TEST_F(CudaKernelsTest, ResidualIsExact) {
  const int64_t N = 4097;
  const auto a = random_normal(N, 21), b = random_normal(N, 22), dout = random_normal(N, 23);
  std::vector<float> want(N);
  cpu::residual_forward(want.data(), a.data(), b.data(), N);
  auto d_a = on_device(a), d_b = on_device(b), d_dout = on_device(dout);
  residual_forward(stream(), d_a.data(), d_a.data(), d_b.data(), N);  // out aliases inp1
  EXPECT_TRUE(bitwise_equal(on_host(d_a), want));
  // backward accumulates into both; a null side is skipped.
  auto g1 = random_normal(N, 24), g2 = random_normal(N, 25);
  auto d_g1 = on_device(g1), d_g2 = on_device(g2);
  for (int64_t i = 0; i < N; ++i) g1[i] += dout[i], g2[i] += dout[i];
  residual_backward(stream(), d_g1.data(), d_g2.data(), d_dout.data(), N);
  EXPECT_TRUE(bitwise_equal(on_host(d_g1), g1));
  EXPECT_TRUE(bitwise_equal(on_host(d_g2), g2));
  residual_backward(stream(), nullptr, d_g2.data(), d_dout.data(), N);
  for (int64_t i = 0; i < N; ++i) g2[i] += dout[i];
  EXPECT_TRUE(bitwise_equal(on_host(d_g2), g2));
}

TEST_F(CudaKernelsTest, SoftmaxCrossEntropyMatchesCpu) {
  for (const int64_t C : {16, 1000, 3}) {
    const int64_t B = 64;
    const auto logits = random_normal(B * C, 31, 3.0f);
    const auto labels = gpu_test::random_labels(B, C, 32);
    const float loss_scale = 1.0f / 256.0f;  // this microbatch is a quarter of the global batch
    std::vector<float> probs(B * C), losses(B), dlogits(B * C);
    cpu::softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), labels.data(), B, C);
    cpu::softmax_cross_entropy_backward(dlogits.data(), cpu::GradWrite::kOverwrite, probs.data(), labels.data(),
                                        loss_scale, B, C);
    auto d_logits = on_device(logits);
    auto d_labels = on_device(labels);
    DeviceBuffer<float> d_probs(B * C), d_losses(B), d_dlogits(B * C);
    softmax_cross_entropy_forward(stream(), d_losses.data(), d_probs.data(), d_logits.data(), d_labels.data(), B, C);
    softmax_cross_entropy_backward(stream(), d_dlogits.data(), d_probs.data(), d_labels.data(), loss_scale, B, C);
    const double dp = max_rel_diff(on_host(d_probs), probs), dl = max_rel_diff(on_host(d_losses), losses),
                 dd = max_rel_diff(on_host(d_dlogits), dlogits);
    const std::string c = " C" + std::to_string(C);
    report("softmax probs" + c, dp, 1e-5);
    report("cross-entropy losses" + c, dl, 1e-5);
    report("softmax_ce_backward" + c, dd, 1e-5);
    EXPECT_LT(dp, 1e-5);
    EXPECT_LT(dl, 1e-5);
    EXPECT_LT(dd, 1e-5);
  }
}

TEST_F(CudaKernelsTest, BadLabelGivesNaNLossNotAWildRead) {
  const int64_t B = 2, C = 4;
  auto d_logits = on_device(random_normal(B * C, 41));
  auto d_labels = on_device(std::vector<int32_t>{1, 7});  // 7 is outside [0, 4)
  DeviceBuffer<float> d_probs(B * C), d_losses(B);
  softmax_cross_entropy_forward(stream(), d_losses.data(), d_probs.data(), d_logits.data(), d_labels.data(), B, C);
  const auto losses = on_host(d_losses);
  EXPECT_TRUE(std::isfinite(losses[0]));
  EXPECT_TRUE(std::isnan(losses[1]));
}

TEST_F(CudaKernelsTest, ZeroBatchTouchesNothing) {
  DeviceBuffer<float> buf(8);
  const std::vector<float> sentinel(8, 7.0f);
  buf.upload(sentinel, stream());
  linear_forward(*blas_, buf.data(), buf.data(), buf.data(), buf.data(), 0, 2, 4);
  linear_backward(*blas_, buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), buf.data(), 0, 2, 4);
  gelu_forward(stream(), buf.data(), buf.data(), 0);
  softmax_cross_entropy_forward(stream(), buf.data(), buf.data(), buf.data(), nullptr, 0, 4);
  column_sums_accumulate(stream(), buf.data(), buf.data(), 0, 8);
  EXPECT_EQ(on_host(buf), sentinel);
}

TEST_F(CudaKernelsTest, BiasGradientIsAFixedOrderReduction) {
  // The largest bias reduction of the lab-mlp at microbatch 1024 (fc1: OC = 4096), run twice.
  const int64_t B = 1024, OC = 4096;
  const auto dout = random_normal(B * OC, 51);
  auto d_dout = on_device(dout);
  DeviceBuffer<float> first(OC), second(OC);
  first.zero(stream());
  second.zero(stream());
  column_sums_accumulate(stream(), first.data(), d_dout.data(), B, OC);
  column_sums_accumulate(stream(), second.data(), d_dout.data(), B, OC);
  const auto a = on_host(first), b = on_host(second);
  EXPECT_TRUE(bitwise_equal(a, b));
  std::vector<float> want(OC);
  for (int64_t o = 0; o < OC; ++o) {
    double s = 0;
    for (int64_t r = 0; r < B; ++r) s += dout[r * OC + o];
    want[o] = static_cast<float>(s);
  }
  const double diff = max_rel_diff(a, want);
  report("column sums B1024 OC4096 vs double", diff, 1e-5);
  EXPECT_LT(diff, 1e-5);
}

TEST_F(CudaKernelsTest, StreamStallHoldsTheStreamUntilReleased) {
  DeviceBuffer<float> a(1024), b(1024);
  Event after;
  {
    StreamStall stall(stream(), /*max_seconds=*/30.0);
    copy_on_device(b.data(), a.data(), a.bytes(), stream());
    after.record(stream());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(after.ready());  // held: the stall lasts until release (or 30 s)
    stall.release();
  }
  after.synchronize();
  EXPECT_TRUE(after.ready());
}

}  // namespace
}  // namespace parlab::compute::cuda
