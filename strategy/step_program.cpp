#include "strategy/step_program.h"

#include <algorithm>
#include <cstdio>

#include "base/units.h"

namespace parlab::strategy {

double grad_bytes_per_element(const Plan& p) { return state_bytes_per_param(p).wire_grads; }
double param_bytes_per_element(const Plan& p) { return state_bytes_per_param(p).wire_params; }

std::vector<LocalTensor> local_param_layout(const ModelSpec& m, const Plan& p, int rank) {
  return local_param_layout(m, m.layer_list(), p, rank);
}

std::vector<LocalTensor> local_param_layout(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                                            int rank) {
  std::vector<LocalTensor> out;
  const int stage = coords_of(p, rank).pp;
  int64_t offset = 0;
  for (const auto& range : stage_chunks(layers, p, stage)) {
    for (int i = range.begin; i < range.end; ++i) {
      for (const auto& t : layers[i].params) {
        const int64_t n = t.tp_split == TpSplit::kReplicated ? t.numel : t.numel / p.tp;
        out.push_back({t.name, i, offset, n});
        offset += n;
      }
      // Tied embeddings under pipeline parallelism: the last stage keeps a copy of the token
      // embedding for the logits, in its head layer (Megatron's "word embeddings" copy).
      if (layers[i].kind == LayerKind::kHead && m.kind == ModelKind::kTransformer && m.tied_embeddings && p.pp > 1) {
        const int64_t n = m.vocab * m.hidden / p.tp;
        out.push_back({"head.tied_embedding.weight", i, offset, n});
        offset += n;
      }
    }
  }
  return out;
}

std::pair<int64_t, int64_t> zero_shard(int64_t n, int dp, int r) { return {n * r / dp, n * (r + 1) / dp}; }

std::vector<int64_t> zero_chunk_elements(int64_t begin, int64_t end, int64_t n, int dp) {
  std::vector<int64_t> counts(static_cast<size_t>(std::max(dp, 0)));
  for (int r = 0; r < dp; ++r) {
    const auto [b, e] = zero_shard(n, dp, r);
    counts[size_t(r)] = std::max<int64_t>(0, std::min(e, end) - std::max(b, begin));
  }
  return counts;
}

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kForward:
      return "forward";
    case OpKind::kBackward:
      return "backward";
    case OpKind::kOptimizer:
      return "optimizer";
    case OpKind::kZeroGrad:
      return "zero-grad";
    case OpKind::kAllReduce:
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
    case OpKind::kBroadcast:
      return to_string(collective_of(k));  // one spelling: collectives.cpp
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
  }
  return "?";
}
std::string_view to_string(Stream s) { return s == Stream::kCompute ? "compute" : "comm"; }
std::string_view to_string(GroupKind g) {
  switch (g) {
    case GroupKind::kDP:
      return "dp";
    case GroupKind::kTP:
      return "tp";
    case GroupKind::kPP:
      return "pp";
    case GroupKind::kEmbedding:
      return "emb";
    case GroupKind::kWorld:
      return "world";
  }
  return "?";
}
std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::kNone:
      return "";
    case Phase::kWarmup:
      return "warmup";
    case Phase::kSteady:
      return "steady";
    case Phase::kCooldown:
      return "cooldown";
  }
  return "?";
}

CollectiveOp collective_of(OpKind k) {
  switch (k) {
    case OpKind::kReduceScatter:
      return CollectiveOp::kReduceScatter;
    case OpKind::kAllGather:
      return CollectiveOp::kAllGather;
    case OpKind::kBroadcast:
      return CollectiveOp::kBroadcast;
    default:
      return CollectiveOp::kAllReduce;
  }
}

namespace {
// A run's pattern (Op::pattern_calls), " [reduce-scatter all-gather ...]"; empty for other ops.
std::string pattern_text(const Op& op) {
  if (op.pattern_calls == 0) return "";
  std::string s = " [";
  for (int k = 0; k < op.pattern_calls; ++k) s += (k ? " " : "") + std::string(to_string(op.call_kind(k)));
  return s + "]";
}
}  // namespace

std::string describe(const StepProgram& prog, const Op& op) {
  std::string s = std::string(to_string(op.kind));
  if (op.kind == OpKind::kZeroGrad) return s + " " + op.tag + " " + units::format_bytes(op.memory_bytes);
  if (op.is_compute()) {
    char buf[96];
    std::snprintf(buf, sizeof buf, " %s layers [%d,%d) %.4g GFLOP", op.tag.c_str(), op.layers.begin, op.layers.end,
                  op.flops / 1e9);
    return s + buf;
  }
  s += " " + op.tag + " " + units::format_bytes(op.bytes);
  s += pattern_text(op);
  if (op.count > 1) s += " x" + std::to_string(op.count);
  if (op.is_collective()) s += " " + prog.group_of(op).name;
  if (op.is_p2p()) s += (op.kind == OpKind::kSend ? " to " : " from ") + std::to_string(op.peer);
  return s;
}

std::string to_text(const StepProgram& prog) {
  std::string out;
  char buf[256];
  for (const Op& op : prog.ops) {
    std::snprintf(buf, sizeof buf, "%d %s %s %s", op.id, std::string(to_string(op.stream)).c_str(),
                  std::string(to_string(op.kind)).c_str(), op.tag.c_str());
    std::string line = buf;
    if (op.is_layer_compute())
      line += " layers " + std::to_string(op.layers.begin) + "-" + std::to_string(op.layers.end);
    if (op.kind == OpKind::kOptimizer || op.kind == OpKind::kZeroGrad ||
        (op.is_collective() && op.flat_end > op.flat_begin))
      line += " elems " + std::to_string(op.flat_begin) + "-" + std::to_string(op.flat_end);
    if (op.is_collective() || op.is_p2p()) {
      std::snprintf(buf, sizeof buf, " %.0fB", op.bytes);
      line += buf;
      if (op.min_chunk_bytes >= 0) {
        std::snprintf(buf, sizeof buf, " min-chunk %.0fB", op.min_chunk_bytes);
        line += buf;
      }
      if (op.overlaps_compute) line += " overlaps-compute";
      line += pattern_text(op);
      if (op.count > 1) line += " x" + std::to_string(op.count);
    }
    if (op.is_collective()) line += " " + prog.group_of(op).name;
    if (op.is_p2p()) line += (op.kind == OpKind::kSend ? " to " : " from ") + std::to_string(op.peer);
    if (op.phase != Phase::kNone) line += " " + std::string(to_string(op.phase));
    if (!op.deps.empty()) {
      line += " deps";
      for (int d : op.deps) line += " " + std::to_string(d);
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace parlab::strategy
