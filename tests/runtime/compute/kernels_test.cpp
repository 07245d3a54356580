// Every CPU kernel against an independent naive double-precision reference (plain loops), in the
// spirit of llm.c's test_gpt2: each check prints the largest relative difference it saw.
#include "runtime/compute/cpu/kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "runtime/compute/blas_threads.h"
#include "runtime/compute/counter_rng.h"
#include "tests/runtime/compute/random_vector.h"
#include "base/errors.h"

namespace parlab::compute::cpu {
namespace {

using testing::random_vector;

// max_i |a_i - b_i| / max(|b_i|, floor); the floor keeps near-zero entries from dominating.
double max_rel_diff(const std::vector<float>& a, const std::vector<double>& b, double floor = 1e-2) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), floor));
  }
  return worst;
}

void report(const char* what, double diff) { std::printf("  %-30s max rel diff %.3g\n", what, diff); }

class KernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { pin_blas_to_one_thread(); }
};

TEST_F(KernelsTest, LinearForwardMatchesNaiveDouble) {
  const int64_t B = 5, C = 7, OC = 3;
  auto inp = random_vector(B * C, 1), w = random_vector(OC * C, 2), bias = random_vector(OC, 3);
  std::vector<float> out(B * OC, 99.0f);  // garbage: forward must overwrite
  linear_forward(out.data(), inp.data(), w.data(), bias.data(), B, C, OC);
  std::vector<double> ref(B * OC);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < OC; ++o) {
      double acc = bias[o];
      for (int64_t c = 0; c < C; ++c) acc += static_cast<double>(inp[b * C + c]) * w[o * C + c];
      ref[b * OC + o] = acc;
    }
  const double diff = max_rel_diff(out, ref);
  report("linear_forward", diff);
  EXPECT_LT(diff, 1e-5);
}

TEST_F(KernelsTest, LinearBackwardAccumulatesNaiveDouble) {
  const int64_t B = 6, C = 9, OC = 4;
  auto inp = random_vector(B * C, 4), w = random_vector(OC * C, 5), dout = random_vector(B * OC, 6);
  // Start from nonzero gradients: the kernel must ADD, not overwrite.
  auto dinp = random_vector(B * C, 7), dw = random_vector(OC * C, 8), db = random_vector(OC, 9);
  std::vector<double> rdinp(dinp.begin(), dinp.end()), rdw(dw.begin(), dw.end()), rdb(db.begin(), db.end());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < OC; ++o) {
      const double d = dout[b * OC + o];
      rdb[o] += d;
      for (int64_t c = 0; c < C; ++c) {
        rdinp[b * C + c] += d * w[o * C + c];
        rdw[o * C + c] += d * inp[b * C + c];
      }
    }
  linear_backward(dinp.data(), GradWrite::kAccumulate, dw.data(), db.data(), dout.data(), inp.data(), w.data(), B, C,
                  OC);
  const double d1 = max_rel_diff(dinp, rdinp), d2 = max_rel_diff(dw, rdw), d3 = max_rel_diff(db, rdb);
  report("linear_backward dinp", d1);
  report("linear_backward dweight", d2);
  report("linear_backward dbias", d3);
  EXPECT_LT(d1, 1e-5);
  EXPECT_LT(d2, 1e-5);
  EXPECT_LT(d3, 1e-5);
}

TEST_F(KernelsTest, LinearBackwardWithoutInputGradient) {
  const int64_t B = 2, C = 3, OC = 2;
  auto inp = random_vector(B * C, 10), w = random_vector(OC * C, 11), dout = random_vector(B * OC, 12);
  std::vector<float> dw(OC * C, 0.0f), db(OC, 0.0f);
  linear_backward(nullptr, GradWrite::kOverwrite, dw.data(), db.data(), dout.data(), inp.data(), w.data(), B, C, OC);
  // dbias[o] = dout[0][o] + dout[1][o]
  EXPECT_FLOAT_EQ(db[1], dout[1] + dout[3]);
}

TEST_F(KernelsTest, GeluForwardHandValues) {
  // gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), e.g. x = 1:
  //   u = 0.7978845608 * 1.044715 = 0.8335605; tanh(u) = 0.6823839; 0.5 * 1.6823839 = 0.8411920
  const std::vector<float> x = {-3.0f, -1.0f, -0.5f, 0.0f, 0.5f, 1.0f, 2.0f, 3.0f};
  const std::vector<double> expected = {-0.0036373921, -0.1588080094, -0.1542859902, 0.0,
                                        0.3457140098,  0.8411919906,  1.9545976941,  2.9963626079};
  std::vector<float> y(x.size());
  gelu_forward(y.data(), x.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_NEAR(y[i], expected[i], 2e-7 * std::max(1.0, std::abs(expected[i]))) << "x = " << x[i];
  }
}

TEST_F(KernelsTest, GeluBackwardHandValuesAndNaiveDouble) {
  // gelu'(1) = 0.5 (1 + 0.6823839) + 0.5 (1 - 0.6823839^2) * 0.7978846 * (1 + 0.134145) = 1.0829641
  const std::vector<float> x = {-3.0f, -1.0f, 0.0f, 1.0f, 2.0f};
  const std::vector<double> expected = {-0.0115841666, -0.0829640838, 0.5, 1.0829640838, 1.0860992566};
  std::vector<float> ones(x.size(), 1.0f), dx(x.size());
  gelu_backward(dx.data(), GradWrite::kOverwrite, x.data(), ones.data(), static_cast<int64_t>(x.size()));
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dx[i], expected[i], 1e-6) << "x = " << x[i];

  // Many points, with a random upstream gradient, against the double-precision derivative.
  const int64_t N = 4096;
  auto inp = random_vector(N, 13), dout = random_vector(N, 14);
  for (float& v : inp) v *= 3.0f;
  std::vector<float> dinp(N);
  gelu_backward(dinp.data(), GradWrite::kOverwrite, inp.data(), dout.data(), N);
  std::vector<double> ref(N);
  const double s = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < N; ++i) {
    const double v = inp[i], t = std::tanh(s * (v + 0.044715 * v * v * v));
    ref[i] = dout[i] * (0.5 * (1 + t) + 0.5 * v * (1 - t * t) * s * (1 + 3 * 0.044715 * v * v));
  }
  // Floor 1 (the scale of dout): in the tails gelu' is a difference of O(1) terms, and fp32 keeps
  // only their absolute error. The largest error (~5e-6, near |x| = 5) is tanh_approx's few-ulp
  // error times d(gelu')/dt = x (...) ~ 16 there; libm tanhf would give ~6e-7.
  const double diff = max_rel_diff(dinp, ref, 1.0);
  report("gelu_backward", diff);
  EXPECT_LT(diff, 1e-5);
}

TEST_F(KernelsTest, GeluVectorClonesRoundLikeScalarCode) {
  // gelu_forward runs an AVX-512 / AVX2 / baseline clone picked at load time; whichever runs
  // here must give the bits of the plain scalar formula (no FMA contraction), so results do not
  // depend on the machine's vector width.
  const int64_t N = 1003;  // not a multiple of any vector width: the tail runs too
  auto x = random_vector(N, 16);
  for (float& v : x) v *= 4.0f;
  std::vector<float> y(N);
  gelu_forward(y.data(), x.data(), N);
  for (int64_t i = 0; i < N; ++i) {
    volatile float cube = 0.044715f * x[i] * x[i] * x[i];  // volatile: keep the scalar rounding
    const float u = 0.7978845608028654f * (x[i] + cube);
    const float t = tanh_approx(u);
    ASSERT_EQ(y[i], 0.5f * x[i] * (1.0f + t)) << "x = " << x[i];
  }
}

TEST_F(KernelsTest, GeluBackwardInPlace) {
  std::vector<float> x = {0.0f, 1.0f}, d = {2.0f, 2.0f};
  gelu_backward(d.data(), GradWrite::kOverwrite, x.data(), d.data(), 2);
  EXPECT_FLOAT_EQ(d[0], 1.0f);  // 2 * gelu'(0) = 2 * 0.5
}

TEST_F(KernelsTest, TanhApproximationIsCloseToLibm) {
  double worst = 0.0;
  for (int i = -200000; i <= 200000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;  // [-20, 20]
    worst = std::max(worst, std::abs(static_cast<double>(tanh_approx(x)) - std::tanh(double(x))));
  }
  report("tanh_approx abs", worst);
  EXPECT_LT(worst, 5e-7);  // a few fp32 ulp of values up to 1
  EXPECT_EQ(tanh_approx(50.0f), 1.0f);
  EXPECT_EQ(tanh_approx(-50.0f), -1.0f);
  EXPECT_EQ(tanh_approx(0.0f), 0.0f);
}

TEST_F(KernelsTest, ResidualForward) {
  std::vector<float> a = {1, 2}, b = {10, 20}, out(2);
  residual_forward(out.data(), a.data(), b.data(), 2);
  EXPECT_EQ(out, (std::vector<float>{11, 22}));
}

TEST_F(KernelsTest, SoftmaxCrossEntropyTwoClassHandExample) {
  // logits (0, ln 3): probs = (1/(1+3), 3/(1+3)) = (0.25, 0.75).
  // label 0: loss = -ln 0.25 = ln 4 = 1.3862944; dlogits = scale * (0.25 - 1, 0.75 - 0).
  // label 1: loss = -ln 0.75 = 0.2876821;        dlogits = scale * (0.25, 0.75 - 1).
  const std::vector<float> logits = {0.0f, std::log(3.0f), 0.0f, std::log(3.0f)};
  const std::vector<int32_t> labels = {0, 1};
  std::vector<float> probs(4), losses(2), dlogits(4);
  softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), labels.data(), 2, 2);
  EXPECT_NEAR(probs[0], 0.25f, 1e-7);
  EXPECT_NEAR(probs[1], 0.75f, 1e-7);
  EXPECT_NEAR(losses[0], 1.3862944f, 1e-6);
  EXPECT_NEAR(losses[1], 0.2876821f, 1e-6);
  softmax_cross_entropy_backward(dlogits.data(), GradWrite::kOverwrite, probs.data(), labels.data(), 0.5f, 2, 2);
  EXPECT_NEAR(dlogits[0], -0.375f, 1e-7);
  EXPECT_NEAR(dlogits[1], 0.375f, 1e-7);
  EXPECT_NEAR(dlogits[2], 0.125f, 1e-7);
  EXPECT_NEAR(dlogits[3], -0.125f, 1e-7);
}

TEST_F(KernelsTest, SoftmaxCrossEntropyMatchesNaiveDoubleAndIsStable) {
  const int64_t B = 4, C = 5;
  auto logits = random_vector(B * C, 15);
  logits[0] = 200.0f;  // would overflow exp() without the max shift
  const std::vector<int32_t> labels = {0, 4, 2, 1};
  std::vector<float> probs(B * C), losses(B);
  softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), labels.data(), B, C);
  const float scale = 1.0f / 3.0f;
  std::vector<float> dlogits(B * C);
  softmax_cross_entropy_backward(dlogits.data(), GradWrite::kOverwrite, probs.data(), labels.data(), scale, B, C);
  // Reference: loss_b = logsumexp(l_b) - l_b[y_b]; d loss_b / d l_bc = softmax_c - [c == y_b].
  std::vector<double> ref_loss(B), ref_dlogits(B * C);
  for (int64_t b = 0; b < B; ++b) {
    double mx = -1e300, sum = 0.0;
    for (int64_t c = 0; c < C; ++c) mx = std::max(mx, double(logits[b * C + c]));
    for (int64_t c = 0; c < C; ++c) sum += std::exp(logits[b * C + c] - mx);
    ref_loss[b] = std::log(sum) + mx - logits[b * C + labels[b]];
    for (int64_t c = 0; c < C; ++c) {
      const double p = std::exp(logits[b * C + c] - mx) / sum;
      ref_dlogits[b * C + c] = (p - (c == labels[b] ? 1.0 : 0.0)) * scale;
    }
  }
  const double diff = max_rel_diff(losses, ref_loss);
  report("softmax_cross_entropy loss", diff);
  EXPECT_LT(diff, 1e-5);
  EXPECT_TRUE(std::isfinite(losses[0]));
  const double ddiff = max_rel_diff(dlogits, ref_dlogits);
  report("softmax_cross_entropy dlogits", ddiff);
  EXPECT_LT(ddiff, 1e-5);
}

TEST_F(KernelsTest, BadLabelIsRejected) {
  const std::vector<float> logits = {0.0f, 1.0f};
  const std::vector<int32_t> labels = {2};
  std::vector<float> probs(2), losses(1);
  EXPECT_THROW(softmax_cross_entropy_forward(losses.data(), probs.data(), logits.data(), labels.data(), 1, 2),
               RuntimeError);
}

TEST_F(KernelsTest, EmptyBatchIsANoOp) {
  std::vector<float> w = {1.0f, 2.0f}, bias = {3.0f}, dw = {5.0f, 6.0f}, db = {7.0f};
  linear_forward(nullptr, nullptr, w.data(), bias.data(), 0, 2, 1);
  linear_backward(nullptr, GradWrite::kOverwrite, dw.data(), db.data(), nullptr, nullptr, w.data(), 0, 2, 1);
  gelu_forward(nullptr, nullptr, 0);
  softmax_cross_entropy_forward(nullptr, nullptr, nullptr, nullptr, 0, 2);
  EXPECT_EQ(dw, (std::vector<float>{5.0f, 6.0f}));
  EXPECT_EQ(db, (std::vector<float>{7.0f}));
}

}  // namespace
}  // namespace parlab::compute::cpu
