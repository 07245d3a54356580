// linear_forward / linear_backward on cuBLAS. cuBLAS is column-major; a row-major (R, K) matrix
// is the column-major (K, R) matrix with leading dimension K, i.e. its transpose. So each
// row-major product Y = A B is issued as the column-major product Y^T = B^T A^T (the llm.c
// matmul_forward_cublas / matmul_backward trick).
#include <climits>
#include <string>

#include "runtime/compute/cuda/kernels.h"

namespace parlab::compute::cuda {
namespace {

int as_int(int64_t value, const char* field) {
  if (value < 0 || value > INT_MAX) {
    throw ConfigError(field, std::to_string(value),
                      "must fit cuBLAS's 32-bit int (0 .. " + std::to_string(INT_MAX) + ")");
  }
  return static_cast<int>(value);
}

}  // namespace

void linear_forward(const CublasHandle& blas, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  const int b = as_int(B, "linear.B"), c = as_int(C, "linear.C"), oc = as_int(OC, "linear.OC");
  // Start from the broadcast bias so sgemm (beta = 1) adds the product in the same pass, as the
  // CPU kernel does.
  broadcast_rows(blas.stream(), out, bias, B, OC);
  const float one = 1.0f;
  // out^T (OC, B) += W (OC, C) . inp^T (C, B); W's column-major view is W^T (C, OC): transpose.
  PARLAB_CUBLAS_CHECK(
      cublasSgemm(blas.get(), CUBLAS_OP_T, CUBLAS_OP_N, oc, b, c, &one, weight, c, inp, c, &one, out, oc));
}

void linear_backward(const CublasHandle& blas, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t B, int64_t C, int64_t OC) {
  if (B == 0) return;
  const int b = as_int(B, "linear.B"), c = as_int(C, "linear.C"), oc = as_int(OC, "linear.OC");
  const float one = 1.0f;
  // dinp (B, C) += dout (B, OC) @ W (OC, C):  dinp^T (C, B) += W^T (C, OC) . dout^T (OC, B)
  if (dinp != nullptr) {
    PARLAB_CUBLAS_CHECK(
        cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, c, b, oc, &one, weight, c, dout, oc, &one, dinp, c));
  }
  // dW (OC, C) += dout^T (OC, B) @ inp (B, C):  dW^T (C, OC) += inp^T (C, B) . dout (B, OC)
  PARLAB_CUBLAS_CHECK(
      cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_T, c, oc, b, &one, inp, c, dout, oc, &one, dweight, c));
  column_sums_accumulate(blas.stream(), dbias, dout, B, OC);
}

}  // namespace parlab::compute::cuda
