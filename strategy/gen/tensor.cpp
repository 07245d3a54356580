// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019). A column-parallel linear followed by a
// row-parallel one needs no communication in between; the row-parallel output is a partial sum
// that one all-reduce completes:
//   Y = X A, A = [A_1 ... A_t] (columns);  Z = Y B, B = [B_1; ...; B_t] (rows);  Z = sum_i Y_i B_i.
// So a transformer block carries two all-reduces in forward (after attention, after the MLP)
// and two in backward (the gradients of the replicated inputs); an MLP-only block one each way.
// Full recompute replays each layer's forward inside its backward, collectives included
// (Megatron's checkpointed function is the whole layer), so a backward then carries the
// forward's collectives too; selective recompute replays only the attention core, which
// communicates nothing.
// With sequence parallelism (Korthikanti et al. 2022) each all-reduce becomes a reduce-scatter
// leaving the tensor-parallel region and an all-gather entering the next (g-bar and g of their
// Figure 5): same traffic, but activations outside the TP regions are split by t. Both follow
// the layer's compute, reduce-scatter first: the rows each rank finishes (bias, residual) between
// them are the sequence-parallel region, which is what the runtime executes.
// A transformer block under sequence parallelism keeps only its rank's sequence shard of each
// column-parallel linear's input (what Korthikanti et al.'s 34 s b h / t activation count
// assumes), so its backward all-gathers that input again for the weight gradient: one more
// all-gather per column-parallel linear (QKV and the MLP's first), Section 4.2.2. The lab MLP the
// runtime trains keeps its gathered input, so its blocks do not.
// The collectives are synchronous with the layer, so they sit on the compute stream. Megatron
// launches the backward's re-gather and reduce-scatter asynchronously beside the input- and
// weight-gradient GEMMs; on one GPU the NCCL kernel and the GEMM share the SMs, and the step
// programs do not model that overlap (docs/validation.md, Table 4, shows what it leaves).
//
// A coarse program (one compute op per chunk) and a per-layer one must make the same calls in
// the same order (tests/strategy/one_program_test.cpp): all-reduces of a chunk are one op of
// `count` calls, which expands to the per-layer sequence; the alternating all-gather /
// reduce-scatter pairs cannot be counted that way, so they are written per layer, in the order
// the slot visits its layers. A walk that only times them (BuildOptions::call_runs) takes them as
// runs: one op per run of layers making the same calls, its pattern repeated once per layer.
#include "strategy/gen/builder.h"

namespace parlab::strategy::gen {
namespace {

class TensorParallel final : public Hooks {
 public:
  // Every call of a program has the same group and size: found once, not per call.
  void start(Builder& b) override {
    group_ = b.group_index(GroupKind::kTP);
    bytes_ = tp_collective_bytes(b.model(), b.plan());
  }

  void after_compute(Builder& b, const Slot& slot, LayerRange range, int op_id) override {
    if (b.plan().sequence_parallel) {
      if (b.options().call_runs) return emit_runs(b, slot, range, op_id);
      if (slot.forward) {
        for (int i = range.begin; i < range.end; ++i) emit_pairs(b, slot, i, op_id);
      } else {
        for (int i = range.end - 1; i >= range.begin; --i) emit_pairs(b, slot, i, op_id);
      }
      return;
    }
    int count = 0;
    for (int i = range.begin; i < range.end; ++i) count += calls(b, slot, i);
    if (count > 0) emit(b, slot, OpKind::kAllReduce, range, count, b.tags() ? tag(b, slot, range) : "", op_id);
  }

 private:
  // Collectives layer `i` makes in this slot.
  static int calls(const Builder& b, const Slot& slot, int i) {
    const LayerSpec& l = b.layers()[i];
    if (slot.forward) return l.tp_collectives_forward;
    return l.tp_collectives_backward + (b.plan().recompute == Recompute::kFull ? l.tp_collectives_forward : 0);
  }

  static std::string tag(const Builder& b, const Slot& slot, LayerRange range) {
    return std::string("tp.") + (slot.forward ? "fwd" : "bwd") + ".mb" + std::to_string(slot.microbatch) + "." +
           (range.size() == 1 ? layer_tag(b.layers()[range.begin]) : "c" + std::to_string(slot.chunk));
  }

  void emit_pairs(Builder& b, const Slot& slot, int i, int op_id) {
    const std::string base = b.tags() ? tag(b, slot, {i, i + 1}) : "";
    auto named = [&](const char* suffix) { return b.tags() ? base + suffix : std::string(); };
    for (int k = 0; k < calls(b, slot, i); ++k) {
      emit(b, slot, OpKind::kReduceScatter, {i, i + 1}, 1, named(".rs"), op_id);
      emit(b, slot, OpKind::kAllGather, {i, i + 1}, 1, named(".ag"), op_id);
    }
    for (int k = 0; k < regathers(b, slot, i); ++k)
      emit(b, slot, OpKind::kAllGather, {i, i + 1}, 1, named(".ag.input"), op_id);
  }

  // BuildOptions::call_runs: the calls of emit_pairs(), in the same order, one op per run of
  // consecutive layers (in the slot's order) that make the same calls.
  void emit_runs(Builder& b, const Slot& slot, LayerRange range, int op_id) {
    const int step = slot.forward ? 1 : -1;
    int i = slot.forward ? range.begin : range.end - 1;
    while (range.contains(i)) {
      const int pairs = calls(b, slot, i), gathers = regathers(b, slot, i);
      int j = i + step;
      while (range.contains(j) && calls(b, slot, j) == pairs && regathers(b, slot, j) == gathers) j += step;
      const LayerRange run = slot.forward ? LayerRange{i, j} : LayerRange{j + 1, i + 1};
      const int length = 2 * pairs + gathers;
      if (length > 32) {  // a pattern too long for Op::pattern_gathers: one op per call
        for (int l = i; l != j; l += step) emit_pairs(b, slot, l, op_id);
      } else if (length > 0) {
        // Bits: pairs of (reduce-scatter 0, all-gather 1), then the re-gathers (1).
        uint32_t bits = 0;
        for (int k = 0; k < length; ++k)
          if (k >= 2 * pairs || k % 2 == 1) bits |= 1u << k;
        Op& op = emit(b, slot, pairs > 0 ? OpKind::kReduceScatter : OpKind::kAllGather, run, run.size(),
                      b.tags() ? tag(b, slot, run) + ".run" : "", op_id);
        op.pattern_calls = length;
        op.pattern_gathers = bits;
      }
      i = j;
    }
  }

  // Sequence-parallel inputs a transformer block's backward gathers again (one per
  // column-parallel linear, i.e. per forward all-gather).
  static int regathers(const Builder& b, const Slot& slot, int i) {
    const LayerSpec& l = b.layers()[i];
    if (slot.forward || b.model().kind != ModelKind::kTransformer || l.kind != LayerKind::kBlock) return 0;
    return l.tp_collectives_forward;
  }

  Op& emit(Builder& b, const Slot& slot, OpKind kind, LayerRange layers, int count, std::string tag, int op_id) {
    Op& op = b.append(kind, Stream::kCompute);
    op.group = group_;
    op.bytes = bytes_;
    op.count = count;
    op.layers = layers;
    op.microbatch = slot.microbatch;
    op.chunk = slot.chunk;
    op.tag = std::move(tag);
    op.deps = {op_id};
    return op;
  }

  int group_ = -1;
  double bytes_ = 0;
};

}  // namespace

std::unique_ptr<Hooks> make_tensor_parallel_hooks() { return std::make_unique<TensorParallel>(); }

}  // namespace parlab::strategy::gen
