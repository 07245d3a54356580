#pragma once
// CUDA fp32 kernels of the lab network: the same *_forward / *_backward pairs, shapes, layouts
// and accumulate-vs-overwrite rules as runtime/compute/cpu/kernels.h (read that file for the
// math), on DEVICE pointers, stream-ordered. Every kernel accepts a batch of 0 (no-op).
//
// Determinism: no atomics anywhere. Reductions (bias gradients, softmax sums) are trees of fixed
// shape over fixed element-to-thread assignments, and cuBLAS runs with CUBLAS_DEFAULT_MATH and
// its own workspace (cublas.h), so the same inputs give the same bits on every run on one GPU.
// Element-wise kernels are compiled without FMA contraction (-fmad=false), like the CPU kernels
// (-ffp-contract=off), so GELU and the residual round exactly like the CPU code; the GEMMs and
// the softmax sum in a different order than OpenBLAS and the CPU loop, so those agree with the
// CPU to ~1e-6 relative, not bitwise.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/compute/cuda/cublas.h"

namespace parlab::compute::cuda {

// ---- linear (PyTorch nn.Linear layout), cuBLAS sgemm on blas.stream() -----------------------
// out (B, OC) = inp (B, C) @ weight (OC, C)^T + bias (OC); out is overwritten.
void linear_forward(const CublasHandle& blas, float* out, const float* inp, const float* weight, const float* bias,
                    int64_t B, int64_t C, int64_t OC);

// Accumulates dinp (B, C) += dout @ weight (skipped when dinp is null),
// dweight (OC, C) += dout^T @ inp, dbias (OC) += sum_b dout[b, :] (fixed-order reduction).
void linear_backward(const CublasHandle& blas, float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int64_t B, int64_t C, int64_t OC);

// ---- GELU, tanh approximation, with the CPU's rational tanh -------------------------------
// out (N) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); out may alias inp.
void gelu_forward(cudaStream_t stream, float* out, const float* inp, int64_t N);
// dinp (N) = dout * gelu'(inp), OVERWRITTEN; dinp may alias dout.
void gelu_backward(cudaStream_t stream, float* dinp, const float* inp, const float* dout, int64_t N);

// ---- residual ------------------------------------------------------------------------------
// out = inp1 + inp2 (N); out may alias either input.
void residual_forward(cudaStream_t stream, float* out, const float* inp1, const float* inp2, int64_t N);
// dinp1 += dout; dinp2 += dout (either may be null).
void residual_backward(cudaStream_t stream, float* dinp1, float* dinp2, const float* dout, int64_t N);

// Tensor parallelism's forward finish (model::LabMlp::tp_finish_forward): y (N) += bias[i % h]
// + x (N), the same fp32 expression as the host's, for the rows a rank holds reduced.
void bias_residual_accumulate(cudaStream_t stream, float* y, const float* bias, const float* x, int64_t N, int64_t h);

// ---- softmax cross-entropy -----------------------------------------------------------------
// logits (B, C), labels (B) -> probs (B, C), losses (B) = logsumexp - logit[label], the sum of
// exponentials in double as on the CPU. Labels MUST be in [0, C): a device kernel cannot throw,
// so callers check labels on the host before uploading them (DeviceMlp does); a row with a bad
// label gets a NaN loss instead of reading out of bounds.
void softmax_cross_entropy_forward(cudaStream_t stream, float* losses, float* probs, const float* logits,
                                   const int32_t* labels, int64_t B, int64_t C);
// dlogits (B, C) = loss_scale * (probs - onehot(labels)), OVERWRITTEN.
void softmax_cross_entropy_backward(cudaStream_t stream, float* dlogits, const float* probs, const int32_t* labels,
                                    float loss_scale, int64_t B, int64_t C);

// ---- building blocks (exposed for tests and the bench) --------------------------------------
// out (B, OC): every row = bias (OC).
void broadcast_rows(cudaStream_t stream, float* out, const float* bias, int64_t B, int64_t OC);
// dbias (OC) += column sums of dout (B, OC). Each column is summed by a fixed set of threads in
// a fixed order (strided partial sums, then a fixed tree), so the result never changes.
void column_sums_accumulate(cudaStream_t stream, float* dbias, const float* dout, int64_t B, int64_t OC);

// ---- fault injection -----------------------------------------------------------------------
// Holds `stream`: work queued on it after construction waits until release() (or the
// destructor), or until `max_seconds` passed on the device clock, whichever comes first. Used to
// make a collective miss its deadline on a single GPU (tests of the NCCL timeout path) and by
// fault injection ("the device is stuck").
class StreamStall {
 public:
  StreamStall(cudaStream_t stream, double max_seconds);
  ~StreamStall();
  StreamStall(const StreamStall&) = delete;
  StreamStall& operator=(const StreamStall&) = delete;
  void release();

 private:
  MappedFlag flag_;
  Event done_;  // after the stall kernel: the flag may be freed once it completed
};

}  // namespace parlab::compute::cuda
