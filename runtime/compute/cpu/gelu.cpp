#include <cmath>

#include "runtime/compute/cpu/kernels.h"

namespace parlab::compute::cpu {
namespace {

constexpr float kSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kCubic = 0.044715f;

// tanh as an odd rational function p(x)/q(x) of degree 13/6 on x clamped to [-9, 9] (beyond which
// tanh rounds to +-1 in fp32). Coefficients from Eigen's generic_fast_tanh_float (MPL2), which
// fits them for fp32 to within a few ulp. Why not std::tanh: a libm call per element cannot be
// vectorised, and GELU is the largest non-GEMM cost of the block (~10% of the step with
// std::tanh at the lab-mlp preset; see bench/model_bench.cpp).
inline float tanh_rational(float x_in) {
  // Selects on values (not std::clamp's references) so the loop stays branch-free.
  float x = x_in > 9.0f ? 9.0f : x_in;
  x = x < -9.0f ? -9.0f : x;
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  return p / q;
}

}  // namespace

float tanh_approx(float x) { return tanh_rational(x); }

// Clones for AVX-512 and AVX2 picked at load time (the build targets baseline x86-64). The file is
// compiled with -ffp-contract=off, so every clone rounds exactly like the scalar code: results
// do not depend on the vector width of the machine.
#define PARLAB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

PARLAB_VECTOR_CLONES
void gelu_forward(float* out, const float* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = 0.5f * x * (1.0f + tanh_rational(u));
  }
}

PARLAB_VECTOR_CLONES
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = tanh_rational(u);
    const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    const float local_grad = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du_dx;
    dinp[i] = local_grad * dout[i];
  }
}

}  // namespace parlab::compute::cpu
