#include "runtime/compute/cpu/kernels.h"

namespace parlab::compute::cpu {

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  for (int64_t i = 0; i < N; ++i) out[i] = inp1[i] + inp2[i];
}

void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N) {
  if (dinp1 != nullptr) {
    for (int64_t i = 0; i < N; ++i) dinp1[i] += dout[i];
  }
  if (dinp2 != nullptr) {
    for (int64_t i = 0; i < N; ++i) dinp2[i] += dout[i];
  }
}

}  // namespace parlab::compute::cpu
