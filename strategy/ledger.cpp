#include "strategy/ledger.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "strategy/partition.h"
#include "base/units.h"

namespace parlab::strategy {
namespace {

double held_numel(const ParamTensor& p, int tp) {
  return p.tp_split == TpSplit::kReplicated ? double(p.numel) : double(p.numel) / tp;
}

// Mixed precision as parlab's runtime keeps it (MixedState::kFp32Main in plan.h).
bool fp32_main(const Plan& p) { return p.precision == Precision::kMixed && p.mixed_state == MixedState::kFp32Main; }

// Whether the runtime keeps a bf16 copy of a tensor under fp32-main: the lab MLP's blocks round
// their two weight matrices (the matmul inputs); biases are added and the head computes in fp32,
// straight from the master copy. Other models: every tensor (the convention for a network whose
// runtime is not parlab's).
bool has_bf16_copy(const ModelSpec& m, const LayerSpec& layer, const ParamTensor& t) {
  if (m.kind != ModelKind::kMlp) return true;
  return layer.kind == LayerKind::kBlock && t.name.size() >= 6 && t.name.compare(t.name.size() - 6, 6, "weight") == 0;
}

// The bf16 copies a copied tensor keeps between steps under fp32-main: the lab MLP's runtime keeps
// one per product that reads the weight, each in the layout that product reads fastest (the
// forward's W and the input gradient's W^T, runtime/compute/cpu/matmul.h's prepared weights), and
// at ZeRO-3 one at a time (the forward's gather makes the forward's, the backward's the other);
// other models one (the convention for a network whose runtime is not parlab's).
int bf16_copies_kept(const ModelSpec& m) { return m.kind == ModelKind::kMlp ? 2 : 1; }

// "8 B", "2 B", "12 B": bytes per element.
std::string per_elem(double b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g B", b);
  return buf;
}

// " / 4 (ZeRO-1 over dp 4)" when `sharded`, else "".
std::string shard_note(bool sharded, const Plan& p) {
  if (!sharded || p.dp <= 1) return "";
  return " / " + std::to_string(p.dp) + " (ZeRO-" + std::to_string(p.zero) + " over dp " + std::to_string(p.dp) + ")";
}

// What `held` counts: a rank's parameters after its tensor and pipeline split.
std::string held_note(double held, const Plan& p) {
  std::string s = units::format_count(held) + " params";
  if (p.tp > 1 && p.pp > 1)
    s += " (this stage's, split tensors / tp " + std::to_string(p.tp) + ")";
  else if (p.tp > 1)
    s += " (split tensors / tp " + std::to_string(p.tp) + ")";
  else if (p.pp > 1)
    s += " (this stage's)";
  return s;
}

// Collects each category's formula while compute_ledger computes it (null: not asked for). The
// planner computes thousands of ledgers and reads none of their formulas: a pass writes its text
// only when `asked()`, and its numbers the same way either way.
struct Explainer {
  std::vector<LedgerTerm>* terms = nullptr;
  bool asked() const { return terms != nullptr; }
  void add(const char* category, const std::string& expression, double bytes) const {
    if (!terms) return;
    terms->push_back(
        {category, std::string(category) + " = " + expression + " = " + units::format_bytes(bytes), bytes});
  }
};

// Model state of `held` parameters (of which `copied` have bf16 copies, `copies` each) by ZeRO stage.
//   params      ZeRO-0..2: every rank keeps them; ZeRO-3: its 1/dp. Under fp32-main they are the
//               bf16 copies, and at ZeRO-3 none persist (each is made from a layer's gather and
//               freed with it: temporary, below).
//   gradients   ZeRO-0/1 whole, ZeRO-2/3 1/dp (fp32 under fp32-main: Megatron's main grads).
//   optimizer   moments 1/dp from ZeRO-1; the fp32 master copy of fp32-main 1/dp only at ZeRO-3
//               (below it the optimizer updates its shard of a replicated fp32 buffer).
void set_model_state(MemoryLedger& L, const StateBytes& per, double held, double copied, int copies, const Plan& p,
                     const Explainer& why) {
  const double dp = p.dp;
  const bool fm = fp32_main(p);
  if (fm)
    L.params_bytes = p.zero >= 3 ? 0.0 : copied * copies * per.params;
  else
    L.params_bytes = held * per.params / (p.zero >= 3 ? dp : 1);
  L.grads_bytes = held * per.grads / (p.zero >= 2 ? dp : 1);
  L.optimizer_bytes =
      held * (per.optimizer - per.master) / (p.zero >= 1 ? dp : 1) + held * per.master / (p.zero >= 3 ? dp : 1);
  if (!why.asked()) return;
  if (fm && p.zero >= 3)
    why.add("parameters", "0 (ZeRO-3 under fp32-main: a layer's bf16 copies are made from its gather, as temporary)",
            L.params_bytes);
  else if (fm && copies > 1)
    why.add("parameters",
            std::to_string(copies) + " x " + per_elem(per.params) + " x " + units::format_count(copied) +
                " (bf16 copies of the matmul weights, one per product: W for the forward, W^T for the input "
                "gradient)",
            L.params_bytes);
  else if (fm)
    why.add("parameters",
            per_elem(per.params) + " x " + units::format_count(copied) + " (bf16 copies of the matmul weights)",
            L.params_bytes);
  else
    why.add("parameters", per_elem(per.params) + " x " + held_note(held, p) + shard_note(p.zero >= 3, p),
            L.params_bytes);
  why.add("gradients", per_elem(per.grads) + " x " + held_note(held, p) + shard_note(p.zero >= 2, p), L.grads_bytes);
  std::string opt = per_elem(per.optimizer - per.master) + " x " + held_note(held, p) + shard_note(p.zero >= 1, p);
  if (per.master > 0)
    opt += " + fp32 master " + per_elem(per.master) + " x " + units::format_count(held) + shard_note(p.zero >= 3, p);
  why.add("optimizer", opt, L.optimizer_bytes);
}

// Microbatch-chunks whose activations a stage holds at its peak.
//   GPipe:        all m forwards run before any backward.
//   1F1B:         stage i runs pp - i warm-up forwards before its first backward
//                 (Narayanan et al. 2021; the first stage holds pp microbatches).
//   interleaved:  Megatron's warm-up on stage i is 2 (pp - i - 1) + (v - 1) pp + 1 chunk
//                 forwards; for i = 0 that is pp v + pp - 1 chunks of L/(pp v) layers, i.e.
//                 L (1 + (pp-1)/(pp v)) layers: Korthikanti et al.'s interleaving factor.
int inflight(const Plan& p, int stage) {
  const int64_t m = p.microbatches;
  switch (p.schedule) {
    case Schedule::kGPipe:
      return int(m * 1);
    case Schedule::k1F1B:
      return int(std::min<int64_t>(p.pp - stage, m));
    case Schedule::kInterleaved:
      return int(std::min<int64_t>(2 * (p.pp - stage - 1) + int64_t(p.v - 1) * p.pp + 1, m * p.v));
  }
  return 1;
}

// How many of the `total` in-flight chunk-forwards belong to each model chunk. Forward k of an
// interleaved stage runs chunk (k mod p v) / p (Megatron's order, gen/schedule.cpp), so at the
// first backward chunk 0 -- the one holding the embedding -- has run only about half of them
// when v = 2, a third when v = 3. Charging every in-flight forward with the largest chunk
// overstated the first stage by the embedding's share (4.8% for gpt-530b, one block per chunk).
std::vector<int> inflight_per_chunk(const Plan& p, int total, size_t chunks) {
  std::vector<int> n(chunks, 0);
  if (chunks == 1 || p.schedule != Schedule::kInterleaved) {
    n[0] = total;
    return n;
  }
  for (int k = 0; k < total; ++k) ++n[size_t((k % (p.pp * p.v)) / p.pp)];
  return n;
}

}  // namespace

// Korthikanti et al., "Reducing Activation Recomputation in Large Transformer Models" (2022),
// Table 2, per layer and microbatch, in bytes with 16-bit activations and 1-byte dropout masks:
//   no parallelism            s b h (34 + 5 a s / h)
//   tensor parallel t         s b h (10 + 24/t + 5 a s / (h t))
//   + sequence parallel       s b h (34/t + 5 a s / (h t))
//   selective recompute       drops the 5 a s / h attention term
//   full recompute            2 s b h (the layer input only), / t with sequence parallel
// The 34 decomposes as 10 unsplit (two LayerNorm inputs 4, the QKV and fc1 inputs 4, two
// dropout masks 2) + 24 split by t (Q, K, V 6, projection input 2, fc1 output 8, GELU output 8).
// We keep that decomposition but derive the split part from the shape, so grouped-query
// attention (smaller K, V) and SwiGLU (three f-wide tensors) are counted honestly:
//   split = 2 (Q) + 4 h_kv/h (K, V) + 2 (proj input) + 4 f/h (fc1 out, GELU out) [6 f/h gated].
// The output layer keeps fp32 logits for the cross-entropy: 4 s b V / t (Korthikanti 4.3).
// fp32 activations double every 16-bit term (masks too: a simplification, < 3%).
//
// The lab MLP stores, per sample and block, the block input (h), fc1's output (f) and GELU's
// output (f): (h + 2 f) elements, f split by t; full recompute keeps only the input. Under
// mixed precision (fp32-main, what the runtime does) those three are saved as bf16 copies, the
// head keeps its fp32 input, and the fp32 residual stream between blocks is freed once the next
// block has its output -- see compute_ledger for the two fp32 (B, h) tensors that adds.
double activation_bytes(const LayerSpec& layer, const ModelSpec& m, const Plan& p) {
  const double scale = activation_bytes_per_element(p.precision) / 2.0;
  const double b = double(p.microbatch), t = p.tp;
  if (m.kind == ModelKind::kMlp) {
    const double elem = activation_bytes_per_element(p.precision);
    // Under fp32-main the head computes in fp32: its input stays fp32 (4 bytes).
    const double head_in = fp32_main(p) ? 4.0 : elem;
    if (layer.kind == LayerKind::kHead) return b * (m.hidden * head_in + 4.0 * m.classes);  // input + fp32 logits
    if (p.recompute == Recompute::kFull) return b * m.hidden * elem;
    return b * (m.hidden + 2.0 * m.ffn / t) * elem;
  }
  if (m.kind != ModelKind::kTransformer) return 0;
  const double s = double(m.seq_len), h = double(m.hidden), a = double(m.heads);
  const double sbh = s * b * h;
  const bool sp = p.sequence_parallel;
  switch (layer.kind) {
    case LayerKind::kEmbedding:
      return sbh * 1.0 * (sp ? 1.0 / t : 1.0) * scale;  // embedding dropout mask
    case LayerKind::kHead:
      return 4.0 * s * b * double(m.vocab) / t + 2.0 * sbh / (sp ? t : 1.0) * scale;
    case LayerKind::kBlock:
      break;
  }
  if (p.recompute == Recompute::kFull) return 2.0 * sbh / (sp ? t : 1.0) * scale;
  const double kv = double(m.kv_heads > 0 ? m.kv_heads : m.heads);
  const double unsplit = 10.0;
  const double split = 2.0 + 4.0 * kv / a + 2.0 + (m.gated_mlp ? 6.0 : 4.0) * double(m.ffn) / h;
  const double scores = p.recompute == Recompute::kSelective ? 0.0 : 5.0 * a * s / h;
  const double per_sbh = sp ? (unsplit + split) / t + scores / t : unsplit + split / t + scores / t;
  return sbh * per_sbh * scale;
}

MemoryLedger compute_ledger(const ModelSpec& m, const Plan& p, const ClusterSpec& c, int rank) {
  return compute_ledger(m, m.layer_list(), p, c, rank);
}

namespace {

// What a stage holds of its layers' parameters, per element (tp-sharded), and its largest layer.
struct HeldParams {
  double held = 0, largest_layer_held = 0, copied = 0, largest_layer_copied = 0;
  std::vector<double> act_per_mb_chunk;  // activation bytes of one microbatch, per chunk
};

HeldParams held_params(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                       const std::vector<LayerRange>& chunks, int stage) {
  HeldParams h;
  for (const auto& range : chunks) {
    double chunk_act = 0;
    for (int i = range.begin; i < range.end; ++i) {
      double layer_held = 0, layer_copied = 0;
      for (const auto& t : layers[i].params) {
        layer_held += held_numel(t, p.tp);
        if (has_bf16_copy(m, layers[i], t)) layer_copied += held_numel(t, p.tp);
      }
      h.held += layer_held;
      h.copied += layer_copied;
      h.largest_layer_held = std::max(h.largest_layer_held, layer_held);
      h.largest_layer_copied = std::max(h.largest_layer_copied, layer_copied);
      chunk_act += activation_bytes(layers[i], m, p);
    }
    h.act_per_mb_chunk.push_back(chunk_act);
  }
  // Tied embeddings under pipeline parallelism: the last stage keeps its own copy of the token
  // embedding for the logits (Megatron), kept in sync by an all-reduce of its gradient.
  if (m.tied_embeddings && m.kind == ModelKind::kTransformer && p.pp > 1 && stage == p.pp - 1) {
    h.held += double(m.vocab) * m.hidden / p.tp;
    h.copied += double(m.vocab) * m.hidden / p.tp;
  }
  return h;
}

// Activations: each chunk's microbatches in flight times its per-microbatch bytes.
void add_activations(MemoryLedger& L, const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                     const ClusterSpec& c, const std::vector<LayerRange>& chunks, const HeldParams& h,
                     const Explainer& why) {
  L.inflight_microbatches = inflight(p, L.stage);
  const auto per_chunk = inflight_per_chunk(p, L.inflight_microbatches, h.act_per_mb_chunk.size());
  std::string act_why;
  for (size_t c = 0; c < per_chunk.size(); ++c) {
    L.activations_bytes += per_chunk[c] * h.act_per_mb_chunk[c];
    if (why.asked())
      act_why += (c ? " + " : "") + std::to_string(per_chunk[c]) + " microbatch" + (per_chunk[c] == 1 ? "" : "es") +
                 " in flight" + (p.pp > 1 ? " (" + std::string(to_string(p.schedule)) + ")" : std::string()) + " x " +
                 units::format_bytes(h.act_per_mb_chunk[c]) +
                 (per_chunk.size() > 1 ? " (chunk " + std::to_string(c) + ")" : " per microbatch");
  }
  if (m.kind == ModelKind::kMlp && fp32_main(p)) {
    // The fp32 (B, h) tensors beside the bf16 saves: the data each in-flight microbatch's first
    // block read (its loader keeps it), and once, the running block's fp32 input while its
    // output is written (freed right after; the first block's input is the data itself).
    const double bh4 = double(p.microbatch) * m.hidden * 4.0;
    bool later_block = false;
    for (size_t c = 0; c < chunks.size(); ++c) {
      if (chunks[c].begin == 0) L.activations_bytes += per_chunk[c] * bh4;
      for (int i = chunks[c].begin; i < chunks[c].end; ++i)
        later_block = later_block || (i > 0 && layers[i].kind == LayerKind::kBlock);
    }
    if (later_block) L.activations_bytes += bh4;
    if (why.asked())
      act_why += " + fp32 data and running block input (B x h x 4 B = " + units::format_bytes(bh4) + " each)";
  }
  if (const int group = weight_grad_group(p); m.kind == ModelKind::kMlp && c.shares_cores() && group > 1) {
    // Weight-gradient groups (the CPU runtime's LabMlp): each block held keeps `group`
    // microbatches' rows of its products' inputs, x and dy (h wide), post and dpre (f wide), as
    // its matmuls read them.
    int blocks = 0;
    for (const auto& range : chunks)
      for (int i = range.begin; i < range.end; ++i) blocks += layers[i].kind == LayerKind::kBlock ? 1 : 0;
    const double rows = double(group) * double(p.microbatch);
    const double bytes = blocks * rows * 2.0 * (m.hidden + m.ffn) * activation_bytes_per_element(p.precision);
    L.activations_bytes += bytes;
    if (why.asked())
      act_why += " + weight-gradient groups (" + std::to_string(blocks) + " blocks x " + std::to_string(group) +
                 " microbatches' rows of x, dy, post, dpre = " + units::format_bytes(bytes) + ")";
  }
  why.add("activations", act_why, L.activations_bytes);
}

// Temporary buffers.
//  - DDP and ZeRO-1/2: gradient buckets being reduced while the next fills (PyTorch DDP copies
//    gradients into bucket buffers): 2 buckets, at most the gradients themselves.
//  - ZeRO-3: the all-gathered (unsharded) parameters of the running layer and the prefetched
//    next one, plus the full gradient of a layer before its reduce-scatter.
//  - pipeline: one activation being sent and one being received at a stage boundary.
//    Under fp32-main the gathers are fp32 and the running layer's bf16 copies join them.
void add_temporary(MemoryLedger& L, const ModelSpec& m, const Plan& p, const StateBytes& per, const HeldParams& h,
                   const Explainer& why) {
  std::vector<std::string> temp_why;
  if (p.dp > 1) {
    const double buckets = std::min(2 * p.bucket_bytes, h.held * per.grads);
    L.temp_bytes += buckets;
    if (why.asked())
      temp_why.push_back(buckets < 2 * p.bucket_bytes
                             ? "gradient buckets (all the gradients, " + units::format_bytes(buckets) + ")"
                             : "2 buckets x " + units::format_bytes(p.bucket_bytes));
    if (p.zero >= 3) {
      L.temp_bytes += h.largest_layer_held * (2 * per.wire_params + per.grads);
      if (why.asked())
        temp_why.push_back("largest layer " + units::format_count(h.largest_layer_held) + " x (2 x " +
                           per_elem(per.wire_params) + " gathered, running + prefetched, + " + per_elem(per.grads) +
                           " gradient)");
      if (fp32_main(p)) {  // one copy of the running layer's at a time (bf16_copies_kept)
        L.temp_bytes += h.largest_layer_copied * per.params;
        if (why.asked())
          temp_why.push_back(units::format_count(h.largest_layer_copied) + " x " + per_elem(per.params) +
                             " bf16 copies");
      }
    }
  }
  if (p.pp > 1) {
    const double boundary = double(p.microbatch) * m.tokens_per_sample() * m.hidden * boundary_bytes_per_element(p) /
                            (p.sequence_parallel ? p.tp : 1);
    L.temp_bytes += 2 * boundary;
    if (why.asked()) temp_why.push_back("2 pipeline boundaries (send + receive) x " + units::format_bytes(boundary));
  }
  if (!why.asked()) return;
  std::string temp_text;
  for (size_t i = 0; i < temp_why.size(); ++i) temp_text += (i ? " + " : "") + temp_why[i];
  why.add("temporary", temp_why.empty() ? std::string("0 (one replica: no buckets, no pipeline boundary)") : temp_text,
          L.temp_bytes);
}

// The ledger, and with `why` its formulas: one pass, so a formula shows the numbers it summed.
// `stages` is virtual_stages(layers, p), computed once for all of a plan's stages.
MemoryLedger ledger_pass(const ModelSpec& m, const std::vector<LayerSpec>& layers,
                         const std::vector<LayerRange>& stages, const Plan& p, const ClusterSpec& c, int rank,
                         const Explainer& why) {
  MemoryLedger L;
  L.rank = rank;
  L.stage = coords_of(p, rank).pp;
  L.device_bytes = c.device.memory_bytes;
  const StateBytes per = state_bytes_per_param(p);

  if (!m.has_layers()) {
    // A bare parameter count: model state only, ZeRO over dp (Rajbhandari et al. 2020, Fig. 1:
    // stage 1 shards the K Psi of optimizer state, 2 also the 2 Psi of gradients, 3 the params).
    L.params_held = m.param_count;
    set_model_state(L, per, m.param_count, m.param_count, 1, p, why);
    if (p.zero == 0 && p.dp > 1) L.temp_bytes = 2 * p.bucket_bytes;
    why.add("activations", "not counted (the model is a bare parameter count)", 0);
    why.add("temporary",
            L.temp_bytes > 0 ? "2 buckets x " + units::format_bytes(p.bucket_bytes) : std::string("0 (no DDP buckets)"),
            L.temp_bytes);
    return L;
  }

  const auto chunks = stage_chunks(stages, p, L.stage);
  const HeldParams h = held_params(m, layers, p, chunks, L.stage);
  L.params_held = h.held;
  set_model_state(L, per, h.held, h.copied, bf16_copies_kept(m), p, why);
  add_activations(L, m, layers, p, c, chunks, h, why);
  add_temporary(L, m, p, per, h, why);
  return L;
}

}  // namespace

MemoryLedger compute_ledger(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                            const ClusterSpec& c, int rank) {
  return ledger_pass(m, layers, virtual_stages(layers, p), p, c, rank, Explainer{});
}

ExplainedLedger explain_ledger(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                               const ClusterSpec& c, int rank) {
  ExplainedLedger out;
  out.ledger = ledger_pass(m, layers, virtual_stages(layers, p), p, c, rank, Explainer{&out.terms});
  return out;
}

std::string state_convention(const Plan& p) {
  const bool adam = p.optimizer == OptimizerKind::kAdam;
  const std::string moments = adam ? "AdamW momentum + variance 8 B" : "SGD momentum 4 B";
  if (p.precision == Precision::kFp32)
    return "fp32: parameters 4 B, gradients 4 B, optimizer " + moments + " per parameter";
  if (p.mixed_state == MixedState::kZero)
    return "mixed (mixed_state=zero, the ZeRO paper's): bf16 parameters 2 B, bf16 gradients 2 B, optimizer fp32 "
           "master 4 B + " +
           moments + ", each sharded by its ZeRO stage; collectives move 16 bits";
  return "mixed (mixed_state=fp32-main, parlab's runtime): parameters = bf16 copies of the matmul weights 2 B "
         "(the lab MLP keeps two per weight, one per product; none kept between ZeRO-3 gathers), fp32 main "
         "gradients 4 B, optimizer = fp32 master 4 B (sharded only "
         "at ZeRO-3) + " +
         moments + "; collectives move fp32";
}

std::vector<MemoryLedger> ledger_per_stage(const ModelSpec& m, const Plan& p, const ClusterSpec& c) {
  return ledger_per_stage(m, m.layer_list(), p, c);
}

std::vector<MemoryLedger> ledger_per_stage(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                                           const ClusterSpec& c) {
  std::vector<MemoryLedger> out;
  const auto stages = virtual_stages(layers, p);
  for (int s = 0; s < p.pp; ++s)
    out.push_back(ledger_pass(m, layers, stages, p, c, rank_of(p, {0, 0, s}), Explainer{}));
  return out;
}

MemoryLedger worst_stage(const std::vector<MemoryLedger>& stages) {
  return *std::max_element(stages.begin(), stages.end(),
                           [](const auto& a, const auto& b) { return a.total_bytes() < b.total_bytes(); });
}

RuleVerdict apply_rule(const RuleInputs& in) {
  RuleVerdict v;
  v.replica_bytes = in.params_bytes + in.grads_bytes + in.optimizer_bytes + in.activations_bytes;
  v.ddp_fits = v.replica_bytes <= in.device_bytes;
  v.shard_model_state = v.replica_bytes > in.device_bytes;
  v.tensor_split_needed = in.largest_layer_bytes > in.device_bytes;
  v.pipeline_candidate = in.activations_bytes > in.params_bytes;
  const double state = in.params_bytes + in.grads_bytes + in.optimizer_bytes;
  if (v.ddp_fits)
    v.blocker = "none";
  else if (v.tensor_split_needed)
    v.blocker = "one oversized layer";
  else if (state > in.device_bytes)
    v.blocker = "total state";
  else
    v.blocker = "activations";
  if (v.ddp_fits) {
    v.candidates = {"DDP"};
  } else {
    // The seed's order: shard replicated state first, split an operator only when one layer
    // cannot fit, and consider stages when activations dominate.
    if (v.shard_model_state) v.candidates.push_back("ZeRO sharding");
    if (v.tensor_split_needed) v.candidates.push_back("tensor parallel");
    if (v.pipeline_candidate) v.candidates.push_back("pipeline parallel");
  }
  return v;
}

RuleInputs rule_inputs(const ModelSpec& m, const Plan& plan, const ClusterSpec& c) {
  Plan one = plan;
  one.dp = one.tp = one.pp = 1;
  one.zero = 0;
  one.sequence_parallel = false;
  one.schedule = Schedule::k1F1B;
  one.v = 1;
  one.microbatches = 1;
  const StateBytes per = state_bytes_per_param(plan);
  RuleInputs in;
  const double n = m.total_params();
  in.params_bytes = n * per.params;
  in.grads_bytes = n * per.grads;
  in.optimizer_bytes = n * per.optimizer;
  in.device_bytes = c.device.memory_bytes;
  if (m.has_layers()) {
    for (const auto& layer : m.layer_list()) in.activations_bytes += activation_bytes(layer, m, one);
    in.largest_layer_bytes = double(m.largest_layer_params()) * per.total();
  }
  return in;
}

}  // namespace parlab::strategy
