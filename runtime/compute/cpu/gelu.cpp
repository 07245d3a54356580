#include <algorithm>
#include <cmath>

#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/compute/gelu_math.h"

namespace parlab::compute::cpu {

float tanh_approx(float x) { return tanh_rational(x); }

// Clones for AVX-512 and AVX2 picked at load time (the build targets baseline x86-64). The file is
// compiled with -ffp-contract=off, so every clone rounds exactly like the scalar code: results
// do not depend on the vector width of the machine. The per-element math is gelu_math.h, shared
// with the CUDA kernels.
#define PARLAB_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

PARLAB_VECTOR_CLONES
void gelu_forward(float* out, const float* inp, int64_t N) {
  for (int64_t i = 0; i < N; ++i) out[i] = gelu_value(inp[i]);
}

PARLAB_VECTOR_CLONES
void gelu_backward(float* dinp, GradWrite write, const float* inp, const float* dout, int64_t N) {
  if (write == GradWrite::kAccumulate) {
    for (int64_t i = 0; i < N; ++i) dinp[i] += gelu_derivative(inp[i]) * dout[i];
  } else {
    for (int64_t i = 0; i < N; ++i) dinp[i] = gelu_derivative(inp[i]) * dout[i];
  }
}

// Row by row: the product goes to dpre and onto dbias while the row is in registers / L1, so
// the (B, N) matrix is read once (the unfused pair read it twice).
PARLAB_VECTOR_CLONES
void gelu_bias_backward(float* dpre, GradWrite write, float* dbias, const float* pre, const float* dpost, int64_t B,
                        int64_t N) {
  const bool add = write == GradWrite::kAccumulate;
  for (int64_t b = 0; b < B; ++b) {
    const float* x = pre + b * N;
    const float* d = dpost + b * N;
    float* out = dpre + b * N;
    for (int64_t j = 0; j < N; ++j) {
      const float g = gelu_derivative(x[j]) * d[j];
      out[j] = add ? out[j] + g : g;
      dbias[j] += g;
    }
  }
}

// The bf16 kernels are the fp32 ones with conversions around them, a block at a time (what the
// tests hold them to, bit for bit): as one fused loop GCC vectorised the mix of 16- and 32-bit
// lanes in 256-bit registers only, and it ran 2.5x (forward) and 1.9x (backward) the fp32
// kernel's time; in blocks the math runs in the fp32 kernels' 512-bit loops and the conversions
// in to_bf16's (64 x 4096, one call, on the 2-core Sapphire Rapids VM: forward 0.74 -> 0.41 ms,
// backward 0.77 -> 0.48 ms; fp32's 0.26 and 0.37). A block of 512 floats stays in L1.
constexpr int64_t kBf16Block = 512;

void gelu_forward_bf16(uint16_t* pre, uint16_t* post, const float* pre_f32, int64_t N) {
  float post_f32[kBf16Block];
  to_bf16(pre, pre_f32, N);
  for (int64_t i = 0; i < N; i += kBf16Block) {
    const int64_t n = std::min(kBf16Block, N - i);
    gelu_forward(post_f32, pre_f32 + i, n);
    to_bf16(post + i, post_f32, n);
  }
}

void gelu_bias_backward_bf16(uint16_t* dpre, float* dbias, const uint16_t* pre, const float* dpost, int64_t B,
                             int64_t N) {
  float x[kBf16Block], g[kBf16Block];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N; j += kBf16Block) {
      const int64_t n = std::min(kBf16Block, N - j);
      from_bf16(x, pre + b * N + j, n);
      gelu_bias_backward(g, GradWrite::kOverwrite, dbias + j, x, dpost + b * N + j, 1, n);
      to_bf16(dpre + b * N + j, g, n);
    }
}

}  // namespace parlab::compute::cpu
