#include <cmath>

#include "runtime/compute/cpu/bf16.h"
#include "runtime/compute/cpu/kernels.h"
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

PARLAB_VECTOR_CLONES
void gelu_forward_bf16(uint16_t* pre, uint16_t* post, const float* pre_f32, int64_t N) {
  for (int64_t i = 0; i < N; ++i) {
    pre[i] = bf16_from_float(pre_f32[i]);
    post[i] = bf16_from_float(gelu_value(pre_f32[i]));
  }
}

PARLAB_VECTOR_CLONES
void gelu_bias_backward_bf16(uint16_t* dpre, float* dbias, const uint16_t* pre, const float* dpost, int64_t B,
                             int64_t N) {
  for (int64_t b = 0; b < B; ++b) {
    const uint16_t* x = pre + b * N;
    const float* d = dpost + b * N;
    uint16_t* out = dpre + b * N;
    for (int64_t j = 0; j < N; ++j) {
      const float g = gelu_derivative(float_from_bf16(x[j])) * d[j];
      out[j] = bf16_from_float(g);
      dbias[j] += g;
    }
  }
}

}  // namespace parlab::compute::cpu
