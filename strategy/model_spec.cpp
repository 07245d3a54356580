#include "strategy/model_spec.h"

#include <algorithm>
#include <numeric>

#include "base/errors.h"

namespace parlab::strategy {
namespace {

ParamTensor tensor(std::string name, std::vector<int64_t> shape, TpSplit split) {
  ParamTensor t{std::move(name), std::move(shape), 1, split};
  for (int64_t d : t.shape) t.numel *= d;
  return t;
}

LayerSpec finish(LayerSpec layer) {
  layer.param_count = 0;
  for (const auto& p : layer.params) layer.param_count += p.numel;
  return layer;
}

// One decoder block. Parameters (GPT naming follows Megatron's 12h^2 + 13h per layer):
//   ln1 (h [+h]), attn.qkv ((h + 2 h_kv) x h, column-parallel), attn.proj (h x h, row-parallel),
//   ln2, then fc1/fc2 (4h) or gate/up/down (SwiGLU, Llama).
// Forward FLOPs per token: 2 per multiply-accumulate over every weight, plus attention scores and
// the weighted sum of values, 2 s h each (Megatron's 24 h^2 + 4 s h for h_kv = h, f = 4h).
LayerSpec transformer_block(const ModelSpec& m, int64_t i) {
  const int64_t h = m.hidden, f = m.ffn;
  const int64_t kv = m.kv_heads > 0 ? m.kv_heads : m.heads;
  const int64_t h_kv = h / m.heads * kv;
  const std::string p = "layers." + std::to_string(i) + ".";
  LayerSpec L;
  L.name = "layers." + std::to_string(i);
  L.kind = LayerKind::kBlock;
  auto norm = [&](const std::string& n) {
    L.params.push_back(tensor(p + n + ".weight", {h}, TpSplit::kReplicated));
    if (m.biases) L.params.push_back(tensor(p + n + ".bias", {h}, TpSplit::kReplicated));
  };
  auto linear = [&](const std::string& n, int64_t out, int64_t in, TpSplit split) {
    L.params.push_back(tensor(p + n + ".weight", {out, in}, split));
    if (m.biases) {
      // A row-parallel bias is added after the all-reduce, so it is replicated.
      L.params.push_back(tensor(p + n + ".bias", {out}, split == TpSplit::kRow ? TpSplit::kReplicated : split));
    }
  };
  norm("ln1");
  linear("attn.qkv", h + 2 * h_kv, h, TpSplit::kColumn);
  linear("attn.proj", h, h, TpSplit::kRow);
  norm("ln2");
  if (m.gated_mlp) {
    linear("mlp.gate", f, h, TpSplit::kColumn);
    linear("mlp.up", f, h, TpSplit::kColumn);
    linear("mlp.down", h, f, TpSplit::kRow);
  } else {
    linear("mlp.fc1", f, h, TpSplit::kColumn);
    linear("mlp.fc2", h, f, TpSplit::kRow);
  }
  const double matmul_params = double(h) * (h + 2 * h_kv) + double(h) * h + double(m.gated_mlp ? 3 : 2) * h * f;
  L.forward_flops_per_token = 2 * matmul_params + 4.0 * double(m.seq_len) * h;
  L.tp_collectives_forward = 2;
  L.tp_collectives_backward = 2;
  return finish(std::move(L));
}

std::vector<LayerSpec> transformer_layers(const ModelSpec& m) {
  std::vector<LayerSpec> out;
  LayerSpec embed;
  embed.name = "embed";
  embed.kind = LayerKind::kEmbedding;
  embed.params.push_back(tensor("embed.tokens.weight", {m.vocab, m.hidden}, TpSplit::kVocab));
  if (m.learned_positions)
    embed.params.push_back(tensor("embed.positions.weight", {m.seq_len, m.hidden}, TpSplit::kReplicated));
  embed.forward_flops_per_token = 0;  // a gather, no multiply-accumulates
  embed.tp_collectives_forward = 1;   // vocab-parallel lookup: partial rows summed
  out.push_back(finish(std::move(embed)));

  for (int64_t i = 0; i < m.layers; ++i) out.push_back(transformer_block(m, i));

  LayerSpec head;
  head.name = "head";
  head.kind = LayerKind::kHead;
  head.params.push_back(tensor("final_norm.weight", {m.hidden}, TpSplit::kReplicated));
  if (m.biases) head.params.push_back(tensor("final_norm.bias", {m.hidden}, TpSplit::kReplicated));
  // Tied embeddings reuse embed.tokens.weight for the logits (no new parameters here).
  if (!m.tied_embeddings) head.params.push_back(tensor("head.weight", {m.vocab, m.hidden}, TpSplit::kVocab));
  head.forward_flops_per_token = 2.0 * m.hidden * m.vocab;  // logits
  head.tp_collectives_backward = 1;  // gradient of the replicated input to the parallel output layer
  out.push_back(finish(std::move(head)));
  return out;
}

// The lab network: blocks.{i}.fc1 (f x h), blocks.{i}.fc2 (h x f), head (C x h), nn.Linear
// naming. Under TP, fc1 is column- and fc2 row-parallel (one all-reduce each way per block); the
// small head stays replicated. Forward FLOPs per sample: 2 (h f + f h) per block, 2 h C head.
std::vector<LayerSpec> mlp_layers(const ModelSpec& m) {
  std::vector<LayerSpec> out;
  const int64_t h = m.hidden, f = m.ffn;
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    LayerSpec L;
    L.name = "blocks." + std::to_string(i);
    L.kind = LayerKind::kBlock;
    L.params.push_back(tensor(p + "fc1.weight", {f, h}, TpSplit::kColumn));
    L.params.push_back(tensor(p + "fc1.bias", {f}, TpSplit::kColumn));
    L.params.push_back(tensor(p + "fc2.weight", {h, f}, TpSplit::kRow));
    L.params.push_back(tensor(p + "fc2.bias", {h}, TpSplit::kReplicated));
    L.forward_flops_per_token = 4.0 * h * f;
    L.tp_collectives_forward = 1;
    L.tp_collectives_backward = 1;
    out.push_back(finish(std::move(L)));
  }
  LayerSpec head;
  head.name = "head";
  head.kind = LayerKind::kHead;
  head.params.push_back(tensor("head.weight", {m.classes, h}, TpSplit::kReplicated));
  head.params.push_back(tensor("head.bias", {m.classes}, TpSplit::kReplicated));
  head.forward_flops_per_token = 2.0 * h * m.classes;
  out.push_back(finish(std::move(head)));
  return out;
}

}  // namespace

int64_t ModelSpec::tokens_per_sample() const { return kind == ModelKind::kTransformer ? seq_len : 1; }

std::vector<LayerSpec> ModelSpec::layer_list() const {
  switch (kind) {
    case ModelKind::kTransformer:
      return transformer_layers(*this);
    case ModelKind::kMlp:
      return mlp_layers(*this);
    case ModelKind::kParams:
      return {};
  }
  return {};
}

double ModelSpec::total_params() const {
  if (kind == ModelKind::kParams) return param_count;
  double n = 0;
  for (const auto& l : layer_list()) n += double(l.param_count);
  return n;
}

int64_t ModelSpec::params_per_block() const {
  for (const auto& l : layer_list())
    if (l.kind == LayerKind::kBlock) return l.param_count;
  return 0;
}

double ModelSpec::forward_flops_per_token() const { return forward_flops_per_token(layer_list()); }

double ModelSpec::forward_flops_per_token(const std::vector<LayerSpec>& layers) {
  double f = 0;
  for (const auto& l : layers) f += l.forward_flops_per_token;
  return f;
}

int64_t ModelSpec::largest_operator_params() const {
  int64_t best = 0;
  for (const auto& l : layer_list())
    for (const auto& p : l.params) best = std::max(best, p.numel);
  return best;
}

int64_t ModelSpec::largest_layer_params() const {
  int64_t best = 0;
  for (const auto& l : layer_list()) best = std::max(best, l.param_count);
  return best;
}

std::string ModelSpec::kind_name() const {
  switch (kind) {
    case ModelKind::kTransformer:
      return "transformer";
    case ModelKind::kMlp:
      return "mlp";
    case ModelKind::kParams:
      return "params";
  }
  return "?";
}

void validate(const ModelSpec& m, const std::string& where) {
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) throw ConfigError(where + "." + field, std::to_string(v), "must be a positive integer");
  };
  if (m.kind == ModelKind::kParams) {
    if (!(m.param_count > 0))
      throw ConfigError(where + ".params", std::to_string(m.param_count), "must be a positive number");
    return;
  }
  positive("layers", m.layers);
  positive("hidden", m.hidden);
  positive("ffn", m.ffn);
  if (m.default_microbatch <= 0) positive("microbatch", m.default_microbatch);
  if (m.kind == ModelKind::kMlp) {
    positive("classes", m.classes);
    return;
  }
  positive("heads", m.heads);
  positive("seq_len", m.seq_len);
  positive("vocab", m.vocab);
  if (m.hidden % m.heads != 0)
    throw ConfigError(where + ".heads", std::to_string(m.heads),
                      "must divide hidden (" + std::to_string(m.hidden) + ")");
  if (m.kv_heads < 0 || m.kv_heads > m.heads || (m.kv_heads > 0 && m.heads % m.kv_heads != 0))
    throw ConfigError(where + ".kv_heads", std::to_string(m.kv_heads),
                      "must divide heads (" + std::to_string(m.heads) + ")");
}

}  // namespace parlab::strategy
