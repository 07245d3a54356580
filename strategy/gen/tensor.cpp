// Tensor parallelism (Megatron-LM, Shoeybi et al. 2019). A column-parallel linear followed by a
// row-parallel one needs no communication in between; the row-parallel output is a partial sum
// that one all-reduce completes:
//   Y = X A, A = [A_1 ... A_t] (columns);  Z = Y B, B = [B_1; ...; B_t] (rows);  Z = sum_i Y_i B_i.
// So a transformer block carries two all-reduces in forward (after attention, after the MLP)
// and two in backward (the gradients of the replicated inputs); an MLP-only block one each way.
// With sequence parallelism (Korthikanti et al. 2022) each all-reduce becomes a reduce-scatter
// plus an all-gather of the same bytes: same traffic, but activations outside the TP regions
// are split by t.
// The collectives are synchronous with the layer, so they sit on the compute stream.
#include "strategy/gen/builder.h"

namespace parlab::strategy::gen {
namespace {

class TensorParallel final : public Hooks {
 public:
  void after_compute(Builder& b, const Slot& slot, LayerRange range, int op_id) override {
    int count = 0;
    for (int i = range.begin; i < range.end; ++i)
      count += slot.forward ? b.layers()[i].tp_collectives_forward : b.layers()[i].tp_collectives_backward;
    if (count == 0) return;
    const double bytes = tp_collective_bytes(b.model(), b.plan());
    const std::string tag = std::string("tp.") + (slot.forward ? "fwd" : "bwd") + ".mb" +
                            std::to_string(slot.microbatch) + "." +
                            (range.size() == 1 ? layer_tag(b.layers()[range.begin]) : "c" + std::to_string(slot.chunk));
    auto emit = [&](OpKind kind, const std::string& suffix) {
      Op op;
      op.kind = kind;
      op.stream = Stream::kCompute;
      op.group = b.group_index(GroupKind::kTP);
      op.bytes = bytes;
      op.count = count;
      op.layers = range;
      op.microbatch = slot.microbatch;
      op.chunk = slot.chunk;
      op.tag = tag + suffix;
      op.deps = {op_id};
      b.add(std::move(op));
    };
    if (b.plan().sequence_parallel) {
      emit(OpKind::kReduceScatter, ".rs");
      emit(OpKind::kAllGather, ".ag");
    } else {
      emit(OpKind::kAllReduce, "");
    }
  }
};

}  // namespace

std::unique_ptr<Hooks> make_tensor_parallel_hooks() { return std::make_unique<TensorParallel>(); }

}  // namespace parlab::strategy::gen
