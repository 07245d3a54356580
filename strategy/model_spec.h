#pragma once
// ModelSpec: the shape of the network being planned, and what follows from it — parameters per
// layer, FLOPs per token, the largest single operator, and the named parameter tensors.
//
// Three kinds:
//   transformer  GPT / Llama style decoder: embedding, `layers` blocks, final norm + output head.
//   mlp          the runtime's lab network: `layers` residual blocks x <- x + fc2(GELU(fc1(x))),
//                then a head h -> classes. Inputs already have width h (no embedding).
//   params       a bare parameter count for ledger-only planning (no layer structure, so no
//                tensor or pipeline split and no step program).
//
// The layer list (`layer_list()`) is the unit every other part shares: a pipeline stage owns a
// contiguous range of it, a step-program op names a range of it, and the runtime executes it.
#include <cstdint>
#include <string>
#include <vector>

namespace parlab::strategy {

enum class Precision { kFp32, kMixed };

enum class ModelKind { kTransformer, kMlp, kParams };

// How a tensor is divided under tensor parallelism (Megatron): a column-parallel linear splits
// its output dimension (rows of an nn.Linear weight), a row-parallel linear its input dimension;
// the vocabulary-parallel embedding splits rows. Replicated tensors (norms, row-parallel biases)
// are whole on every TP rank.
enum class TpSplit { kReplicated, kColumn, kRow, kVocab };

struct ParamTensor {
  std::string name;            // PyTorch-style: "blocks.3.fc1.weight"
  std::vector<int64_t> shape;  // nn.Linear weight: {out_features, in_features}
  int64_t numel = 0;
  TpSplit tp_split = TpSplit::kReplicated;
};

enum class LayerKind { kEmbedding, kBlock, kHead };

struct LayerSpec {
  std::string name;  // "embed", "layers.7", "blocks.2", "head"
  LayerKind kind = LayerKind::kBlock;
  std::vector<ParamTensor> params;
  int64_t param_count = 0;
  // Forward FLOPs for one token (one sample for the MLP); backward is 2x (dX and dW GEMMs).
  double forward_flops_per_token = 0;
  // Collectives this layer needs per microbatch under tensor parallelism (Megatron f/g pairs):
  // a transformer block has one after attention and one after the MLP (2 forward, 2 backward);
  // an MLP-only block has one; the vocab-parallel embedding one forward; the head none here
  // (its logits' cross-entropy reduction is a few scalars per token and ignored).
  int tp_collectives_forward = 0;
  int tp_collectives_backward = 0;
};

struct ModelSpec {
  std::string name;
  ModelKind kind = ModelKind::kTransformer;

  // transformer and mlp
  int64_t layers = 0;  // transformer blocks / residual MLP blocks
  int64_t hidden = 0;  // h
  int64_t ffn = 0;     // f (MLP inner width)

  // transformer only
  int64_t heads = 0;
  int64_t kv_heads = 0;  // < heads: grouped-query attention (Llama 2 70B); == heads otherwise
  int64_t seq_len = 0;
  int64_t vocab = 0;
  bool gated_mlp = false;         // SwiGLU: gate, up (h->f) and down (f->h) as in Llama
  bool biases = true;             // GPT has biases and LayerNorm bias; Llama has none
  bool learned_positions = true;  // GPT learned position embeddings; Llama uses RoPE (no params)
  bool tied_embeddings = true;    // output head shares the token embedding (GPT, Megatron)

  // mlp only
  int64_t classes = 0;

  // params only
  double param_count = 0;

  // Training defaults carried by the preset (lab-mlp trains fp32 with microbatch 64). A TOML that
  // names no precision: mixed, except an MLP on a machine without bf16 products (fp32;
  // strategy::host_multiplies_bf16).
  int64_t default_microbatch = 1;
  Precision default_precision = Precision::kMixed;
  double default_lr = 0;  // 0: the optimizer's own default (AdamW 1e-3)

  // Tokens one sample contributes: seq_len for a transformer, 1 for the MLP.
  int64_t tokens_per_sample() const;

  std::vector<LayerSpec> layer_list() const;
  // Sum over the layer list (exact) or the given count for kind == kParams.
  double total_params() const;
  // Parameters of one block (transformer or MLP).
  int64_t params_per_block() const;
  // Forward FLOPs per token of the whole model (2 x multiply-accumulates, plus attention
  // scores); backward is twice that. Megatron: 24 h^2 + 4 s h per block, 2 h V for the logits.
  double forward_flops_per_token() const;
  double backward_flops_per_token() const { return 2 * forward_flops_per_token(); }
  // The same two from layer_list() already built.
  static double forward_flops_per_token(const std::vector<LayerSpec>& layer_list);
  static double backward_flops_per_token(const std::vector<LayerSpec>& layer_list) {
    return 2 * forward_flops_per_token(layer_list);
  }
  // The largest single weight tensor, in elements (the embedding for GPT models).
  int64_t largest_operator_params() const;
  // Parameters of the largest layer in the layer list.
  int64_t largest_layer_params() const;

  bool has_layers() const { return kind != ModelKind::kParams; }
  std::string kind_name() const;
};

// Checks that the spec is self-consistent (positive sizes, heads divide hidden, kv_heads divide
// heads, ...); throws ConfigError naming the field. `where` prefixes field names ("model").
void validate(const ModelSpec& model, const std::string& where = "model");

}  // namespace parlab::strategy
