// build_step(): the pipeline skeleton plus the hooks of the other strategies.
#include "strategy/gen/builder.h"

#include <algorithm>

namespace parlab::strategy {
namespace gen {

std::string layer_tag(const LayerSpec& layer) { return layer.name; }

Builder::Builder(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan, int rank,
                 BuildOptions options)
    : model_(model), plan_(plan), options_(options), layers_(layers) {
  prog_.rank = rank;
  prog_.world = plan.world();
  prog_.plan = plan;
  coords_ = coords_of(plan, rank);
  prog_.stage = coords_.pp;
  layout_ = local_param_layout(model, layers_, plan, rank);
  chunks_ = stage_chunks(layers_, plan, coords_.pp);

  // Groups, named by their index among groups of the same kind: dp.<k> where k enumerates the
  // (tp, pp) positions, tp.<k> the (dp, pp) positions, pp.<k> the (tp, dp) positions.
  auto add_group = [&](GroupKind kind, std::vector<int> ranks, int index) {
    prog_.groups.push_back({kind, std::string(to_string(kind)) + "." + std::to_string(index), std::move(ranks)});
  };
  const RankCoords c = coords_;
  add_group(GroupKind::kDP, dp_group(plan, rank), c.tp + plan.tp * c.pp);
  add_group(GroupKind::kTP, tp_group(plan, rank), c.dp + plan.dp * c.pp);
  add_group(GroupKind::kPP, pp_group(plan, rank), c.tp + plan.tp * c.dp);
  // Tied embeddings: the first and last stage keep their copies equal with an all-reduce.
  if (model.kind == ModelKind::kTransformer && model.tied_embeddings && plan.pp > 1 &&
      (c.pp == 0 || c.pp == plan.pp - 1)) {
    add_group(GroupKind::kEmbedding, {rank_of(plan, {c.dp, c.tp, 0}), rank_of(plan, {c.dp, c.tp, plan.pp - 1})},
              c.tp + plan.tp * c.dp);
  }
  std::vector<int> world(plan.world());
  for (int i = 0; i < plan.world(); ++i) world[i] = i;
  prog_.groups.push_back({GroupKind::kWorld, "world", world});

  if (plan.tp > 1) hooks_.push_back(make_tensor_parallel_hooks());
  hooks_.push_back(make_data_parallel_hooks(plan));
}

int Builder::add(Op&& op) {
  op.id = int(prog_.ops.size());
  if (op.stream == Stream::kCompute && (op.is_compute() || op.is_collective())) last_compute_ = op.id;
  prog_.ops.push_back(std::move(op));
  return int(prog_.ops.size()) - 1;
}

Op& Builder::append(OpKind kind, Stream stream) {
  Op& op = prog_.ops.emplace_back();
  op.id = int(prog_.ops.size()) - 1;
  op.kind = kind;
  op.stream = stream;
  if (op.stream == Stream::kCompute && (op.is_compute() || op.is_collective())) last_compute_ = op.id;
  return op;
}

int Builder::group_index(GroupKind kind) const {
  for (size_t i = 0; i < prog_.groups.size(); ++i)
    if (prog_.groups[i].kind == kind) return int(i);
  return -1;
}

double Builder::tokens_per_microbatch() const { return double(plan_.microbatch) * model_.tokens_per_sample(); }
double Builder::forward_flops(LayerRange r) const { return strategy::forward_flops(model_, layers_, plan_, r); }
double Builder::backward_flops(LayerRange r) const { return strategy::backward_flops(model_, layers_, plan_, r); }
double Builder::boundary_activation_bytes() const { return strategy::boundary_activation_bytes(model_, plan_); }

std::pair<int64_t, int64_t> Builder::flat_range(LayerRange r) const {
  int64_t begin = -1, end = -1;
  for (const auto& t : layout_) {
    if (!r.contains(t.layer)) continue;
    if (begin < 0) begin = t.offset;
    end = t.offset + t.numel;
  }
  if (begin < 0) return {0, 0};
  return {begin, end};
}

void Builder::emit_compute(const Slot& slot, LayerRange range, Deps deps) {
  for (auto& h : hooks_)
    for (int d : h->before_compute(*this, slot, range)) deps.push_back(d);
  if (deps.size() > 1) {  // ascending, each once
    std::vector<int> ids(deps.begin(), deps.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    deps = std::move(ids);
  }
  Op& op = append(slot.forward ? OpKind::kForward : OpKind::kBackward, Stream::kCompute);
  op.layers = range;
  op.microbatch = slot.microbatch;
  op.chunk = slot.chunk;
  op.phase = plan_.pp > 1 ? slot.phase : Phase::kNone;
  // A stage computes the same few ranges for every microbatch: each one's work found once.
  auto [it, fresh] = work_.try_emplace({slot.forward, range.begin, range.end});
  if (fresh)
    it->second = slot.forward
                     ? std::pair{forward_flops(range), strategy::forward_memory_bytes(model_, layers_, plan_, range)}
                     : std::pair{backward_flops(range), strategy::backward_memory_bytes(model_, layers_, plan_, range)};
  op.flops = it->second.first;
  op.memory_bytes = it->second.second;
  if (tags()) {
    const std::string what = range.size() == 1 ? layer_tag(layers_[range.begin]) : "c" + std::to_string(slot.chunk);
    op.tag = std::string(slot.forward ? "fwd" : "bwd") + ".mb" + std::to_string(slot.microbatch) + "." + what;
  }
  op.deps = std::move(deps);
  const int id = op.id;
  for (auto& h : hooks_) h->after_compute(*this, slot, range, id);
}

void Builder::emit_slot(const Slot& slot) {
  const int p = plan_.pp;
  const int k_total = p * plan_.v;
  const int vs = slot.chunk * p + coords_.pp;  // virtual stage
  const LayerRange range = chunks_[slot.chunk];
  const bool from_prev = slot.forward ? vs > 0 : vs < k_total - 1;
  const bool to_next = slot.forward ? vs < k_total - 1 : vs > 0;
  const int prev_stage = (coords_.pp + p - 1) % p, next_stage = (coords_.pp + 1) % p;
  const std::string what =
      tags() ? std::string(slot.forward ? "act" : "grad") + ".mb" + std::to_string(slot.microbatch) : std::string();

  Deps deps;
  if (from_prev) {
    Op& recv = append(OpKind::kRecv, Stream::kComm);
    recv.peer = rank_of(plan_, {coords_.dp, coords_.tp, slot.forward ? prev_stage : next_stage});
    recv.bytes = boundary_activation_bytes();
    recv.microbatch = slot.microbatch;
    recv.chunk = slot.chunk;
    recv.group = group_index(GroupKind::kPP);
    if (tags()) recv.tag = what + ".vs" + std::to_string(slot.forward ? vs : vs + 1);
    deps.push_back(recv.id);
  }

  bool per_layer = options_.per_layer_ops;
  for (auto& h : hooks_) per_layer = per_layer || h->needs_per_layer(slot);
  if (!per_layer) {
    emit_compute(slot, range, deps);
  } else if (slot.forward) {
    for (int i = range.begin; i < range.end; ++i) {
      emit_compute(slot, {i, i + 1}, deps);
      deps.clear();
    }
  } else {
    for (int i = range.end - 1; i >= range.begin; --i) {
      emit_compute(slot, {i, i + 1}, deps);
      deps.clear();
    }
  }

  if (to_next) {
    const int after = last_compute_;
    Op& send = append(OpKind::kSend, Stream::kComm);
    send.peer = rank_of(plan_, {coords_.dp, coords_.tp, slot.forward ? next_stage : prev_stage});
    send.bytes = boundary_activation_bytes();
    send.microbatch = slot.microbatch;
    send.chunk = slot.chunk;
    send.group = group_index(GroupKind::kPP);
    if (tags()) send.tag = what + ".vs" + std::to_string(slot.forward ? vs + 1 : vs);
    send.deps = {after};
  }
}

void Builder::build() {
  const std::vector<Slot> slots = schedule_slots(plan_, coords_.pp);
  // A slot is at least a compute op, most also a receive and a send, a run of TP calls or more:
  // room for some six saves moving every op of the program again as it grows.
  prog_.ops.reserve(6 * slots.size() + 16);
  for (auto& h : hooks_) h->start(*this);
  for (const Slot& slot : slots) emit_slot(slot);
  for (auto& h : hooks_) h->finish(*this);
}

}  // namespace gen

namespace {
double tp_share(const ModelSpec& m, const LayerSpec& layer, int tp) {
  if (m.kind == ModelKind::kMlp && layer.kind == LayerKind::kHead) return 1.0;
  return 1.0 / tp;
}
double tokens(const ModelSpec& m, const Plan& p) { return double(p.microbatch) * m.tokens_per_sample(); }
}  // namespace

double forward_flops(const ModelSpec& m, const Plan& p, LayerRange r) { return forward_flops(m, m.layer_list(), p, r); }
double backward_flops(const ModelSpec& m, const Plan& p, LayerRange r) {
  return backward_flops(m, m.layer_list(), p, r);
}

double forward_flops(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p, LayerRange r) {
  double f = 0;
  for (int i = r.begin; i < r.end; ++i) f += layers[i].forward_flops_per_token * tp_share(m, layers[i], p.tp);
  return f * tokens(m, p);
}

double backward_flops(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p, LayerRange r) {
  const double fwd = forward_flops(m, layers, p, r);
  double f = 2 * fwd;
  if (p.recompute == Recompute::kFull) f += fwd;
  if (p.recompute == Recompute::kSelective && m.kind == ModelKind::kTransformer) {
    for (int i = r.begin; i < r.end; ++i)
      if (layers[i].kind == LayerKind::kBlock) f += 4.0 * double(m.seq_len) * m.hidden / p.tp * tokens(m, p);
  }
  return f;
}

double optimizer_traffic_bytes_per_param(const Plan& p) { return p.optimizer == OptimizerKind::kAdam ? 28 : 20; }
double optimizer_flops_per_param(const Plan& p) { return p.optimizer == OptimizerKind::kAdam ? 12 : 3; }
double grad_accumulation_bytes_per_element(const Plan&) { return 4; }

double tp_collective_bytes(const ModelSpec& m, const Plan& p) {
  return tokens(m, p) * m.hidden * boundary_bytes_per_element(p);
}

double boundary_activation_bytes(const ModelSpec& m, const Plan& p) {
  return tp_collective_bytes(m, p) / (p.sequence_parallel ? p.tp : 1);
}

StepProgram build_step(const ModelSpec& model, const Plan& plan, int rank, BuildOptions options) {
  return build_step(model, model.layer_list(), plan, rank, options);
}

StepProgram build_step(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan, int rank,
                       BuildOptions options) {
  gen::Builder b(model, layer_list, plan, rank, options);
  b.build();
  return b.take();
}

}  // namespace parlab::strategy
