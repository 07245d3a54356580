#pragma once
// CPU kernels of the lab network, llm.c style: each op is a *_forward / *_backward pair on raw
// row-major buffers, shapes in the comments. Every kernel accepts a batch of 0 (no-op).
// Matrix products go through matmul.h (oneDNN, or OpenBLAS without it), on the calling thread
// only; call compute::pin_blas_to_one_thread() first.
//
// The one gradient rule:
//   parameter gradients (dweight, dbias) always ACCUMULATE (+=), so microbatches sum in place;
//   input gradients are written as the caller says with a GradWrite argument, so every call
//   site shows whether it starts a buffer or adds to one (the residual branch adds).
#include <cstdint>

#include "runtime/compute/cpu/matmul.h"

namespace parlab::compute::cpu {

enum class GradWrite { kOverwrite, kAccumulate };

// ---- linear (PyTorch nn.Linear layout) -----------------------------------------------------
// out = inp @ weight^T + bias
// inp (B, C), weight (OC, C), bias (OC) or null, out (B, OC); out is overwritten.
void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t B, int64_t C,
                    int64_t OC);

// dout (B, OC) is dL/dout.
//   dinp    (B, C)   (=|+=) dout @ weight      as `write` says (skipped when dinp is null)
//   dweight (OC, C)  +=     dout^T @ inp       (skipped when dweight is null: linear_weight_grad
//                                                later, over several microbatches' rows at once)
//   dbias   (OC)     +=     sum_b dout[b, :]    (skipped when dbias is null: a fused kernel sums it)
void linear_backward(float* dinp, GradWrite write, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t B, int64_t C, int64_t OC);

// The same with bf16 inputs (raw bf16 bits) and fp32 accumulation and outputs (precision=mixed;
// needs bf16_supported() from matmul.h), on the weight prepared for each product
// (prepare_weight_bf16: `weight` for the forward, `weight_t` for the input gradient, both of the
// layer's (OC, C) weight; weight_t is unread when dinp is null). No dbias: bias gradients are
// summed from the fp32 upstream gradient (bias_backward, or the fused GELU backward).
void linear_forward_bf16(float* out, const uint16_t* inp, const PreparedWeightBf16& weight, const float* bias,
                         int64_t B, int64_t C, int64_t OC);
void linear_backward_bf16(float* dinp, GradWrite write, float* dweight, const uint16_t* dout, const uint16_t* inp,
                          const PreparedWeightBf16& weight_t, int64_t B, int64_t C, int64_t OC);

// dweight (OC, C) += dout^T @ inp over `rows` rows: the weight gradient alone, as linear_backward
// computes it, for the rows of one microbatch or of several stacked (dout (rows, OC) and inp
// (rows, C) row-major). One product over more rows reads and writes the fp32 dweight once where
// one per microbatch would each time (LabMlp's weight-gradient groups).
// kOverwrite: dweight = the product (the step's first, where dweight holds nothing yet).
void linear_weight_grad(float* dweight, const float* dout, const float* inp, int64_t rows, int64_t C, int64_t OC,
                        GradWrite write = GradWrite::kAccumulate);
void linear_weight_grad_bf16(float* dweight, const uint16_t* dout, const uint16_t* inp, int64_t rows, int64_t C,
                             int64_t OC, GradWrite write = GradWrite::kAccumulate);

// dbias (OC) += sum_b dout[b, :], rows in order (the same bits as linear_backward's).
void bias_backward(float* dbias, const float* dout, int64_t B, int64_t OC);

// ---- GELU, tanh approximation (PyTorch approximate='tanh') ----------------------------------
// out = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// inp, out (N); out may alias inp.
void gelu_forward(float* out, const float* inp, int64_t N);

// dinp (=|+=) dout * gelu'(inp), with
//   gelu'(x) = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// dinp may alias dout only when overwriting.
void gelu_backward(float* dinp, GradWrite write, const float* inp, const float* dout, int64_t N);

// Bias + GELU of a block's fc1, each direction in one pass over the (B, N) matrix:
//   forward:  the bias is added in the matmul's epilogue (linear_forward's bias argument), then
//             gelu_forward reads the product once;
//   backward: dpre (=|+=) dpost * gelu'(pre) and dbias += sum_b of it (rows in order, the same
//             bits as bias_backward), one pass. dpre may alias dpost only when overwriting.
void gelu_bias_backward(float* dpre, GradWrite write, float* dbias, const float* pre, const float* dpost, int64_t B,
                        int64_t N);
// Mixed precision: from the matmul's fp32 output pre_f32 (bias included), the saved bf16 GELU
// input and the bf16 GELU output (the next matmul's input), one pass.
void gelu_forward_bf16(uint16_t* pre, uint16_t* post, const float* pre_f32, int64_t N);
// dpre (bf16, the next matmul's input, overwritten) = dpost * gelu'(pre), summed in fp32 into
// dbias, one pass.
void gelu_bias_backward_bf16(uint16_t* dpre, float* dbias, const uint16_t* pre, const float* dpost, int64_t B,
                             int64_t N);

// tanh used by the GELU kernels: a branch-free rational approximation (|error| <= 2 ulp-ish,
// see gelu.cpp) that the compiler vectorises; exposed so tests can check it against std::tanh.
float tanh_approx(float x);

// ---- residual ------------------------------------------------------------------------------
// out = inp1 + inp2, all (N); out may alias either input. Its backward is the identity on both
// inputs: a block writes dx = dy, then the branch's linear_backward accumulates onto it.
void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N);

// ---- softmax cross-entropy -----------------------------------------------------------------
// logits (B, C), labels (B) in [0, C) -> probs (B, C) = softmax(logits[b, :]),
// losses (B) = -log probs[b, labels[b]] (computed as logsumexp - logit, not from the rounded prob).
// Throws parlab::RuntimeError on a label outside [0, C).
void softmax_cross_entropy_forward(float* losses, float* probs, const float* logits, const int32_t* labels, int64_t B,
                                   int64_t C);

// dlogits (B, C) (=|+=) loss_scale * (probs - onehot(labels)).
// loss_scale is dL/dlosses[b]: 1/global_batch makes L the mean over the global batch.
void softmax_cross_entropy_backward(float* dlogits, GradWrite write, const float* probs, const int32_t* labels,
                                    float loss_scale, int64_t B, int64_t C);

}  // namespace parlab::compute::cpu
