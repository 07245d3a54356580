#include "runtime/compute/cpu/bf16.h"
#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"

namespace parlab::compute::cpu {

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  for (int64_t i = 0; i < N; ++i) out[i] = inp1[i] + inp2[i];
}

// Integer arithmetic on the bits, so the loops vectorise (AVX-512 / AVX2 clones).
__attribute__((target_clones("avx512f", "avx2", "default"))) void to_bf16(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_from_float(in[i]);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void from_bf16(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16(in[i]);
}

}  // namespace parlab::compute::cpu
