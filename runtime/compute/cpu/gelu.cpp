#include <cmath>

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
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N) {
  for (int64_t i = 0; i < N; ++i) dinp[i] = gelu_derivative(inp[i]) * dout[i];
}

}  // namespace parlab::compute::cpu
