#pragma once
// CPU fp32 kernels of the lab network, llm.c style: each op is a *_forward / *_backward pair on
// raw row-major buffers, shapes in the comments. Backward kernels ACCUMULATE (+=) into parameter
// and input gradients unless stated otherwise, so several microbatches (or the residual branch
// and the main branch) sum without extra buffers. Every kernel accepts a batch of 0 (no-op).
// Matrix products go to OpenBLAS sgemm; call compute::pin_blas_to_one_thread() first.
#include <cstdint>

namespace parlab::compute::cpu {

// ---- linear (PyTorch nn.Linear layout) -----------------------------------------------------
// out = inp @ weight^T + bias
// inp (B, C), weight (OC, C), bias (OC), out (B, OC); out is overwritten.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t B,
                    int64_t C, int64_t OC);

// dout (B, OC) is dL/dout. Accumulates
//   dinp    (B, C)   += dout @ weight          (skipped when dinp is null)
//   dweight (OC, C)  += dout^T @ inp
//   dbias   (OC)     += sum_b dout[b, :]
void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t B, int64_t C, int64_t OC);

// ---- GELU, tanh approximation (PyTorch approximate='tanh') ----------------------------------
// out = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// inp, out (N); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t N);

// dinp = dout * gelu'(inp), OVERWRITTEN (dinp may alias dout), with
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t N);

// tanh used by the GELU kernels: a branch-free rational approximation (|error| <= 2 ulp-ish,
// see gelu.cpp) that the compiler vectorises; exposed so tests can check it against std::tanh.
float tanh_approx(float x);

// ---- residual ------------------------------------------------------------------------------
// out = inp1 + inp2, all (N); out may alias either input.
void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N);
// dinp1 += dout; dinp2 += dout (either may be null).
void residual_backward(float* dinp1, float* dinp2, const float* dout, int64_t N);

// ---- softmax cross-entropy -----------------------------------------------------------------
// logits (B, C), labels (B) in [0, C) -> probs (B, C) = softmax(logits[b, :]),
// losses (B) = -log probs[b, labels[b]] (computed as logsumexp - logit, not from the rounded prob).
// Throws parlab::RuntimeError on a label outside [0, C).
void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits,
                                   const int32_t* labels, int64_t B, int64_t C);

// dlogits (B, C) = loss_scale * (probs - onehot(labels)), OVERWRITTEN.
// loss_scale is dL/dlosses[b]: 1/global_batch makes L the mean over the global batch.
void softmax_cross_entropy_backward(float* dlogits, const float* probs, const int32_t* labels,
                                    float loss_scale, int64_t B, int64_t C);

}  // namespace parlab::compute::cpu
