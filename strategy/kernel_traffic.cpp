// Memory traffic of a transformer's bandwidth-bound kernels (step_program.h): the part of a
// forward or backward that runs at the memory's speed, not the GEMMs'. Each count is read off
// the kernel's tensors -- what it reads and writes, in the activation dtype, plus 1-byte dropout
// masks -- for the kernels Megatron-LM runs between its GEMMs (Shoeybi et al. 2019; Korthikanti
// et al. 2022 list the same tensors in their activation-memory count). No constant here is fitted
// to a measured step time.
#include "strategy/step_program.h"

namespace parlab::strategy {
namespace {

// Elements one rank's bandwidth-bound kernels touch for one microbatch of a transformer.
struct KernelShapes {
  double e = 2;        // bytes per activation element (2 in mixed precision, 4 in fp32)
  double outside = 0;  // s b h elements outside the tensor-parallel regions (/ t with sequence parallel)
  double scores = 0;   // attention scores: b (a / t) s^2
  double hidden = 0;   // MLP hidden activations: s b f / t
  double logits = 0;   // s b V / t
};

KernelShapes kernel_shapes(const ModelSpec& m, const Plan& p) {
  KernelShapes k;
  const double t = p.tp, b = double(p.microbatch), s = double(m.seq_len);
  k.e = activation_bytes_per_element(p.precision);
  k.outside = s * b * double(m.hidden) / (p.sequence_parallel ? t : 1);
  k.scores = b * double(m.heads) / t * s * s;
  k.hidden = s * b * double(m.ffn) / t;
  k.logits = s * b * double(m.vocab) / t;
  return k;
}

// Per kernel, forward (reads + writes, 1-byte dropout masks) -> backward:
//   LayerNorm x2             read x, write y: 2e          -> read x, dy, write dx: 3e
//   bias-dropout-add x2      read x, residual, write, mask: 3e + 1 -> read dy, mask, write: 2e + 1
//   on the attention scores (b a/t s^2 elements; Megatron 2022 has no fused attention kernel):
//     Q K^T writes them, softmax reads and writes, dropout reads, writes and masks, P V reads:
//     e + 2e + (2e + 1) + e = 6e + 1
//     -> dP written, softmax backward reads y and dy and writes, dropout backward reads dy and
//     the mask and writes, dV and dQ/dK read P and dS: e + 3e + (2e + 1) + 3e = 9e + 1
//   GeLU (+ bias)            read, write: 2e (hidden)     -> read x, dy, write: 3e
//   (SwiGLU: read gate and up, write: 3e               -> read both, dy, write both: 5e)
// The attention GEMMs' FLOPs are counted as well (forward_flops): for s 2048 and h/a 96..160 they
// are bound by writing and reading the scores, which is what these bytes time.
// The attention core (scores through P V), which selective recompute replays.
double attention_core_forward_bytes(const KernelShapes& k) { return (6 * k.e + 1) * k.scores; }
double block_forward_bytes(const ModelSpec& m, const KernelShapes& k) {
  const double mlp = m.gated_mlp ? 3 * k.e * k.hidden : 2 * k.e * k.hidden;
  return (2 * 2 * k.e + 2 * (3 * k.e + 1)) * k.outside + attention_core_forward_bytes(k) + mlp;
}
double block_backward_bytes(const ModelSpec& m, const KernelShapes& k) {
  const double mlp = m.gated_mlp ? 5 * k.e * k.hidden : 3 * k.e * k.hidden;
  return (2 * 3 * k.e + 2 * (2 * k.e + 1)) * k.outside + (9 * k.e + 1) * k.scores + mlp;
}

// Embedding: add the position embedding and drop out (read 2e, write e, mask) -> the dropout's
// and the lookup's gradients (read e + mask, write e; scatter-add e). Head: the final LayerNorm,
// then the vocab-parallel cross-entropy over fp32 logits (read the bf16 logits, write fp32,
// read them again for max, sum and log: e + 4 + 4) -> read the fp32 softmax, write the gradient
// (4 + e).
double layer_forward_bytes(const ModelSpec& m, const LayerSpec& l, const KernelShapes& k) {
  switch (l.kind) {
    case LayerKind::kEmbedding:
      return (3 * k.e + 1) * k.outside;
    case LayerKind::kHead:
      return 2 * k.e * k.outside + (k.e + 8) * k.logits;
    case LayerKind::kBlock:
      return block_forward_bytes(m, k);
  }
  return 0;
}
// The weight-gradient GEMMs add into the gradient buffer (Megatron's gradient-accumulation
// fusion: C += dY^T X): they read the gradient and write it back, 2 x the gradient's bytes per
// weight element and microbatch, where the measured GEMM rate (gemm_efficiency, a GEMM writing
// its 16-bit output once) paid one activation-width write. The difference, per weight element
// the rank holds: 2 x 2 - 2 = 2 bytes with 16-bit gradients, 2 x 4 - 2 = 6 with fp32 main
// gradients. Blocks and the head (its weight is the vocabulary-parallel embedding's, tied or
// not); the embedding's gradient is a scatter-add, counted with its kernels above.
double gradient_accumulation_bytes(const ModelSpec& m, const LayerSpec& l, const Plan& p, const KernelShapes& k) {
  if (l.kind == LayerKind::kEmbedding) return 0;
  const double weights =
      l.kind == LayerKind::kHead ? double(m.vocab) * double(m.hidden) / p.tp : double(l.param_count) / p.tp;
  return (2 * state_bytes_per_param(p).grads - k.e) * weights;
}

double layer_backward_bytes(const ModelSpec& m, const LayerSpec& l, const KernelShapes& k) {
  switch (l.kind) {
    case LayerKind::kEmbedding:
      return (3 * k.e + 1) * k.outside;
    case LayerKind::kHead:
      return 3 * k.e * k.outside + (4 + k.e) * k.logits;
    case LayerKind::kBlock:
      return block_backward_bytes(m, k);
  }
  return 0;
}

}  // namespace

double forward_memory_bytes(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p, LayerRange r) {
  if (m.kind != ModelKind::kTransformer) return 0;
  const KernelShapes k = kernel_shapes(m, p);
  double bytes = 0;
  for (int i = r.begin; i < r.end; ++i) bytes += layer_forward_bytes(m, layers[i], k);
  return bytes;
}

double backward_memory_bytes(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p, LayerRange r) {
  if (m.kind != ModelKind::kTransformer) return 0;
  const KernelShapes k = kernel_shapes(m, p);
  double bytes = 0;
  for (int i = r.begin; i < r.end; ++i) {
    bytes += layer_backward_bytes(m, layers[i], k) + gradient_accumulation_bytes(m, layers[i], p, k);
    if (p.recompute == Recompute::kFull) bytes += layer_forward_bytes(m, layers[i], k);
    if (p.recompute == Recompute::kSelective && layers[i].kind == LayerKind::kBlock)
      bytes += attention_core_forward_bytes(k);
  }
  return bytes;
}

}  // namespace parlab::strategy
