#pragma once
// GELU (tanh approximation, PyTorch approximate='tanh') for one element, shared by the CPU
// kernels (cpu/gelu.cpp, vectorised by the compiler) and the CUDA kernels (cuda/kernels.cu), so
// both round the same way:
//   gelu(x)  = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//   gelu'(x) = 0.5 (1 + tanh(u)) + 0.5 x (1 - tanh(u)^2) du/dx,  du/dx = sqrt(2/pi) (1 + 3 0.044715 x^2)
//
// tanh is an odd rational function p(x)/q(x) of degree 13/6 on x clamped to [-9, 9] (beyond
// which tanh rounds to +-1 in fp32). Coefficients from Eigen's generic_fast_tanh_float (MPL2),
// fitted for fp32 to within a few ulp. Why not std::tanh: a libm call per element cannot be
// vectorised, and GELU is the largest non-GEMM cost of a block (~10% of the step with std::tanh at
// the lab-mlp preset; see bench/model_bench.cpp). Both compilers must not contract a*b+c into
// an FMA here (-ffp-contract=off on the CPU, -fmad=false for nvcc) for the results to agree bit
// for bit.
#if defined(__CUDACC__)
#define PARLAB_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define PARLAB_HOST_DEVICE inline
#endif

namespace parlab::compute {

inline constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;  // sqrt(2 / pi)
inline constexpr float kGeluCubic = 0.044715f;

PARLAB_HOST_DEVICE float tanh_rational(float x_in) {
  // Selects on values (not std::clamp's references) so a loop over it stays branch-free.
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

PARLAB_HOST_DEVICE float gelu_value(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  return 0.5f * x * (1.0f + tanh_rational(u));
}

// d gelu / dx at x.
PARLAB_HOST_DEVICE float gelu_derivative(float x) {
  const float u = kGeluSqrt2OverPi * (x + kGeluCubic * x * x * x);
  const float t = tanh_rational(u);
  const float du_dx = kGeluSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du_dx;
}

}  // namespace parlab::compute
