#include <cblas.h>

#include <algorithm>

#include "runtime/compute/cpu/kernels.h"

namespace parlab::compute::cpu {

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t B,
                    int64_t C, int64_t OC) {
  if (B == 0) return;
  // Start from the broadcast bias so sgemm (beta = 1) adds the product in the same pass.
  for (int64_t b = 0; b < B; ++b) std::copy(bias, bias + OC, out + b * OC);
  // out (B, OC) += inp (B, C) @ weight^T (C, OC)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, OC, C, 1.0f, inp, C, weight, C, 1.0f, out,
              OC);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  // dinp (B, C) += dout (B, OC) @ weight (OC, C)
  if (dinp != nullptr) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, C, OC, 1.0f, dout, OC, weight, C,
                1.0f, dinp, C);
  }
  // dweight (OC, C) += dout^T (OC, B) @ inp (B, C)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, B, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  // dbias (OC) += column sums of dout; row by row keeps the inner loop contiguous.
  for (int64_t b = 0; b < B; ++b) {
    const float* row = dout + b * OC;
    for (int64_t o = 0; o < OC; ++o) dbias[o] += row[o];
  }
}

}  // namespace parlab::compute::cpu
