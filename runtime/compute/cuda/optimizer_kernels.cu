// AdamW on the device (optimizer_kernels.h says why each operation is an intrinsic).
#include "runtime/gpu/cuda_check.h"
#include "runtime/compute/cuda/optimizer_kernels.h"

namespace parlab::compute::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;

// The loop body of adamw_pass (runtime/train/optimizer.cpp), operation for operation:
//   p = p * decay                                   (when decays)
//   m = near_m ? m + w (g - m) : g - (g - m) (1 - w)
//   v = v beta2 + ((1 - beta2) g) g
//   p = p - step_size (m / (sqrt(v) / sqrt(1 - beta2^t) + eps))
template <bool kDecays, bool kNearM>
__global__ void adamw_kernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m,
                             float* __restrict__ v, int64_t n, AdamWScalars k) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float pi = p[i];
    const float gi = g[i];
    const float m0 = m[i];
    if (kDecays) pi = __fmul_rn(pi, k.decay);
    const float diff = __fsub_rn(gi, m0);
    const float mi =
        kNearM ? __fadd_rn(m0, __fmul_rn(k.w, diff)) : __fsub_rn(gi, __fmul_rn(diff, __fsub_rn(1.0f, k.w)));
    const float vi = __fadd_rn(__fmul_rn(v[i], k.beta2), __fmul_rn(__fmul_rn(k.one_minus_beta2, gi), gi));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(vi), k.bias_correction2_sqrt), k.eps);
    m[i] = mi;
    v[i] = vi;
    p[i] = __fsub_rn(pi, __fmul_rn(k.step_size, __fdiv_rn(mi, denom)));
  }
}

template <bool kDecays, bool kNearM>
void launch(cudaStream_t stream, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& k) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  adamw_kernel<kDecays, kNearM>
      <<<static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks), kThreads, 0, stream>>>(p, g, m, v, n, k);
  PARLAB_CUDA_CHECK_LAUNCH("adamw_kernel");
}

}  // namespace

void adamw_step(cudaStream_t stream, float* p, const float* g, float* m, float* v, int64_t n, const AdamWScalars& k) {
  if (n == 0) return;
  if (k.decays && k.near_m)
    launch<true, true>(stream, p, g, m, v, n, k);
  else if (k.decays)
    launch<true, false>(stream, p, g, m, v, n, k);
  else if (k.near_m)
    launch<false, true>(stream, p, g, m, v, n, k);
  else
    launch<false, false>(stream, p, g, m, v, n, k);
}

}  // namespace parlab::compute::cuda
