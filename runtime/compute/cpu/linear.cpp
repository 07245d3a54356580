#include <algorithm>

#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"

namespace parlab::compute::cpu {

// The three products of a linear layer as row-major GEMMs:
//   forward  out (B, OC)  = inp (B, C) @ weight^T      M = B,  N = OC, K = C
//   dinp     (B, C)      (+)= dout (B, OC) @ weight     M = B,  N = C,  K = OC
//   dweight  (OC, C)      += dout^T (OC, B) @ inp      M = OC, N = C,  K = B
namespace {
GemmShape forward_shape(int64_t B, int64_t C, int64_t OC) {
  return {.M = B, .N = OC, .K = C, .trans_a = false, .trans_b = true, .accumulate = false};
}
GemmShape dinp_shape(int64_t B, int64_t C, int64_t OC, GradWrite write) {
  return {.M = B, .N = C, .K = OC, .trans_a = false, .trans_b = false, .accumulate = write == GradWrite::kAccumulate};
}
GemmShape dweight_shape(int64_t B, int64_t C, int64_t OC, GradWrite write = GradWrite::kAccumulate) {
  return {.M = OC, .N = C, .K = B, .trans_a = true, .trans_b = false, .accumulate = write == GradWrite::kAccumulate};
}
}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t B, int64_t C,
                    int64_t OC) {
  if (B == 0) return;
  gemm_f32(forward_shape(B, C, OC), inp, weight, out, bias);
}

void linear_backward(float* dinp, GradWrite write, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  if (dinp != nullptr) gemm_f32(dinp_shape(B, C, OC, write), dout, weight, dinp);
  if (dweight != nullptr) gemm_f32(dweight_shape(B, C, OC), dout, inp, dweight);
  if (dbias != nullptr) bias_backward(dbias, dout, B, OC);
}

void linear_forward_bf16(float* out, const uint16_t* inp, const PreparedWeightBf16& weight, const float* bias,
                         int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  gemm_bf16(forward_shape(B, C, OC), inp, weight, out, bias);
}

void linear_backward_bf16(float* dinp, GradWrite write, float* dweight, const uint16_t* dout, const uint16_t* inp,
                          const PreparedWeightBf16& weight_t, int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  if (dinp != nullptr) gemm_bf16(dinp_shape(B, C, OC, write), dout, weight_t, dinp);
  if (dweight != nullptr) gemm_bf16(dweight_shape(B, C, OC), dout, inp, dweight);
}

void linear_weight_grad(float* dweight, const float* dout, const float* inp, int64_t rows, int64_t C, int64_t OC,
                        GradWrite write) {
  if (rows == 0) {
    if (write == GradWrite::kOverwrite) std::fill(dweight, dweight + OC * C, 0.0f);
    return;
  }
  gemm_f32(dweight_shape(rows, C, OC, write), dout, inp, dweight);
}

void linear_weight_grad_bf16(float* dweight, const uint16_t* dout, const uint16_t* inp, int64_t rows, int64_t C,
                             int64_t OC, GradWrite write) {
  if (rows == 0) {
    if (write == GradWrite::kOverwrite) std::fill(dweight, dweight + OC * C, 0.0f);
    return;
  }
  gemm_bf16(dweight_shape(rows, C, OC, write), dout, inp, dweight);
}

void bias_backward(float* dbias, const float* dout, int64_t B, int64_t OC) {
  // Row by row keeps the inner loop contiguous; the order of the sum is fixed (deterministic).
  for (int64_t b = 0; b < B; ++b) {
    const float* row = dout + b * OC;
    for (int64_t o = 0; o < OC; ++o) dbias[o] += row[o];
  }
}

}  // namespace parlab::compute::cpu
