#pragma once
// lab-mlp: the network every parlab strategy trains (layout and math in param_layout.h).
//
// Parameters and gradients live in one flat fp32 buffer each (same layout). A LabMlp may hold
// only the layers [first_layer, end_layer) of a pipeline stage: its buffers then cover just that
// flat range, and offsets stay GLOBAL (params()[0] is flat offset owned_range().begin).
//
// The executor drives it one layer and one microbatch at a time:
//   forward_layer(l, mb)   for l = a .. b-1   (reads activation(l), writes activation(l+1))
//   backward_layer(l, mb)  for l = b-1 .. a   (reads dactivation(l+1), writes dactivation(l))
// backward_layer ACCUMULATES layer l's parameter gradients into grads(), so microbatches sum, and
// when it returns, layer_range(l) of the gradient buffer is final for this microbatch (the moment
// a DDP bucket ending there may launch its all-reduce). The head's backward scales by
// mb.loss_scale() = 1/global_batch, so a plain SUM over microbatches and ranks is the gradient of
// the global mean loss.
// Not thread-safe: one LabMlp per rank (backward uses a scratch buffer held by the model).
//
// Where the numbers live: each tensor's values and gradient are reached through a binding (a
// pointer per tensor). A replica binds every tensor into its own flat buffers. A ZeRO rank holds
// less (ModelStorage): without parameters (ZeRO-3) the executor binds a layer to the buffer it
// all-gathered just before the layer computes and unbinds it after; without gradients
// (ZeRO-2/3) it binds them to the bucket buffers the reduce-scatter reads. Computing on an
// unbound tensor throws, so a gathered layer freed too early is an error, not garbage.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/microbatch.h"
#include "runtime/model/model.h"
#include "runtime/model/param_layout.h"

namespace parlab::model {

// What a LabMlp allocates for its layers, and where it charges the bytes.
struct ModelStorage {
  bool params = true;                // a full copy of the owned layers' parameters (false: ZeRO-3)
  bool grads = true;                 // and of their gradients (false: ZeRO-2 and 3)
  MemoryAccount* account = nullptr;  // parameters, gradients and backward scratch (temporary)
  // Mixed precision from the start (see set_mixed_precision). The fp32 parameter buffer is then
  // the optimizer's master copy and is charged as optimizer state; the bf16 copies the matmuls
  // read are the parameters, as the memory ledger counts them (2 x 2 bytes per block weight, one
  // copy per product, + 12 per parameter).
  bool mixed_precision = false;
  // Weight-gradient groups: how many microbatches' rows a block's weight-gradient products reduce
  // over at once, where the caller allows it (set_weight_grads_deferrable). 1: each its own.
  int weight_grad_group = 1;
};

// The host implementation of model::Model (model.h): its compute buffers are its host buffers.
// Methods that match Model's override them.
class LabMlp : public Model {
 public:
  // The whole network, initialised from `seed`.
  LabMlp(const MlpShape& shape, uint64_t seed);
  // Only layers [first_layer, end_layer) (0..L-1 blocks, L head), initialised from `seed` to the
  // same values the whole network would have there. Throws ConfigError on an empty or
  // out-of-range span.
  LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer);
  // The same holding only what `storage` asks for (unbound tensors must be bound before use).
  LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer, ModelStorage storage);
  // A tensor-parallel slice of layers [first_layer, end_layer) of the network `shape` (the whole
  // network's shape): the model then has shape() = tp_local_shape(shape, tp), its flat buffer
  // holds only the slices (in strategy::local_param_layout order), each element initialised to
  // the whole network's value at its global position. Throws ConfigError unless tp.size divides
  // shape.ffn.
  LabMlp(const MlpShape& shape, uint64_t seed, int first_layer, int end_layer, ModelStorage storage, TpSlice tp);
  // Several chunks (ascending, disjoint, non-empty): the flat buffer holds their tensors one
  // chunk after the other (strategy::local_param_layout's order), starting at the offset of the
  // first chunk's first layer, so a single chunk keeps the layout's own offsets. Layers between
  // chunks are not held.
  LabMlp(const MlpShape& shape, uint64_t seed, std::vector<LayerChunk> chunks, ModelStorage storage, TpSlice tp);

  const MlpShape& shape() const { return layout_.shape(); }
  const ParamLayout& layout() const { return layout_; }
  int first_layer() const { return first_layer_; }
  int end_layer() const { return end_layer_; }
  bool owns_layer(int layer) const override;
  const std::vector<LayerChunk>& chunks() const { return chunks_; }
  // Where tensor `t` of layout() starts in this model's flat coordinates (owned_range()); -1
  // when it is not held. The layout's own offset for a model of one chunk.
  int64_t position(const ParamTensor& t) const { return pos_[index_of(t)]; }
  // Flat range held by this object.
  FlatRange owned_range() const { return owned_; }

  // Owned part of the flat buffers: element i is flat offset owned_range().begin + i. Empty
  // when the storage holds no parameters (or gradients).
  bool holds_params() const { return storage_.params; }
  bool holds_grads() const { return storage_.grads; }
  // (A writable view: under mixed precision the bf16 weight copies are then refreshed.)
  std::span<float> params() {
    mark_bf16_stale();
    return params_;
  }
  std::span<const float> params() const { return params_; }
  // (The gradients as values: a block weight's that zero_grads left to its first product, below,
  // are zeroed first where that has not run yet.)
  std::span<float> grads() {
    zero_unwritten_grads();
    return grad_storage();
  }
  std::span<const float> grads() const {
    zero_unwritten_grads();
    return const_cast<LabMlp*>(this)->grad_storage();
  }
  // One named tensor's view (must be owned; throws RuntimeError otherwise).
  std::span<float> param(std::string_view name);
  std::span<const float> param(std::string_view name) const;
  std::span<float> grad(std::string_view name);
  std::span<const float> grad(std::string_view name) const;

  // zero_grads() starts a step; under mixed precision it also marks the bf16 weight copies stale
  // (the optimizer has changed the fp32 master weights since the last forward). With weight-
  // gradient groups a block weight's gradient is not cleared but marked unwritten: the first group
  // product of the step writes it instead of adding to zeros (llm.c's rule; oneDNN's bf16 product
  // runs 17-20% faster writing than accumulating at the lab's shapes, and the clear's pass over
  // 268 MB goes). Anything that reads or adds to it first (grads(), a plain product) zeroes it then.
  void zero_grads();

  // model::Model on the host: the layers compute in the host buffers, nothing to copy.
  std::string_view device_name() const override { return "cpu"; }
  std::span<float> compute_params() override { return params(); }
  std::span<float> compute_grads() override { return grads(); }
  std::span<float> compute_grads(FlatRange range) override;
  void pull_grads(FlatRange) override {}
  void push_params(FlatRange) override {}

  // Mixed precision (plan precision=mixed): the blocks' matmuls take bf16 inputs (weights, the
  // saved activations and upstream gradients rounded to bf16) and accumulate in fp32; parameters,
  // gradients, optimizer state, the residual stream and the head stay fp32. Each weight has two
  // bf16 copies, each laid out for the product that reads it (matmul.h's prepared weights: W and
  // W^T, or oneDNN's packed layout of each where this CPU's oneDNN reads that faster), made once
  // per step. Throws RuntimeError naming the reason where bf16 matmuls are unavailable (no
  // AVX512-BF16, or built without oneDNN).
  void set_mixed_precision(bool on);
  // Drops the bf16 weight copies: each is made again when its product next needs it, as after a
  // ZeRO-3 gather (the workload profile prices that conversion this way).
  void drop_bf16_copies() const { mark_bf16_stale(); }
  // Whether each bf16 copy is made for its own product when that first needs it, as a ZeRO-3 rank
  // makes them from each gather (the default where the storage holds no parameters), or a
  // weight's two copies together, in one pass over it, on its layer's first forward (the default
  // elsewhere: the weights stay for the backward). The workload profile sets it as the rank does.
  void set_bf16_copies_per_pass(bool on) { bf16_per_pass_ = on; }
  // How many bf16 weight copies this model has made (each a pass over one weight tensor).
  int64_t bf16_copies_made() const { return bf16_copies_made_; }
  bool mixed_precision() const { return mixed_; }

  // Binds the tensors of flat `range` (whole tensors of owned layers) to `storage`
  // (range.numel() elements, element i = flat offset range.begin + i); an empty span unbinds
  // them. Throws RuntimeError on a range that cuts a tensor or leaves the owned layers.
  void bind_params(FlatRange range, std::span<float> storage);
  void bind_grads(FlatRange range, std::span<float> storage);

  // Moves the whole gradient buffer into `storage` (owned_range().numel() elements; the current
  // gradients are copied), kept alive by `keep`: the data-parallel group's registered memory,
  // which its all-reduce reads in place (comm::Communicator::allocate_registered). Charged to the
  // account as the gradients it replaces, and released with the model. Throws RuntimeError when
  // the model holds no gradients or the size differs.
  void adopt_grads(std::span<float> storage, std::shared_ptr<void> keep);

  // The initial values of flat elements [range.begin, range.end) into `out`: what init_params
  // writes there, so a ZeRO-3 shard is initialised without the whole model ever existing.
  // `layout` is the model's own (local) layout; for a tensor-parallel slice `tp` says which.
  static void init_values(const ParamLayout& layout, uint64_t seed, FlatRange range, std::span<float> out,
                          TpSlice tp = {});
  // PyTorch-like init: each element of a tensor whose linear map has n inputs is
  // uniform(-1/sqrt(n), 1/sqrt(n)), drawn from CounterRng(seed, kParamInit) at its GLOBAL flat
  // offset, so the values do not depend on the stage split, shard or world size.
  void init_params(uint64_t seed);

  // A fresh state for `batch` samples out of `global_batch` (see MicrobatchState).
  MicrobatchState new_microbatch(int64_t batch, int64_t global_batch) const;

  // Block l: activation(l+1) = activation(l) + fc2(gelu(fc1(activation(l)))), saving fc1/gelu
  // outputs. Head (l = L): logits = head(activation(L)); probs, losses from labels.
  void forward_layer(int layer, MicrobatchState& mb) const;
  // Head: dactivation(L) = dlogits @ head.weight with dlogits = loss_scale (probs - onehot).
  // Block l: dactivation(l) = dactivation(l+1) + (fc1 o gelu o fc2 path)^T dactivation(l+1).
  // Parameter gradients += ; the layer's saved activations and (block) the consumed upstream
  // gradient dactivation(l+1) are released. Throws RuntimeError if
  // forward_layer(l) has not run since (or the upstream gradient is missing).
  void backward_layer(int layer, MicrobatchState& mb);

  // Every owned layer in order; returns mb.loss_sum() when the head is owned, else 0.
  double forward(MicrobatchState& mb) const;
  void backward(MicrobatchState& mb);

  // Matrix-multiply FLOPs (multiply-add = 2) of one forward+backward of `batch` samples through
  // the whole network: 3 x [2 B (h f + f h) L + 2 B h C] (backward = 2x forward: dinp and dweight).
  static double step_matmul_flops(const MlpShape& shape, int64_t batch);

  // ---- Weight-gradient groups (lab_mlp_grad_group.cpp) ----
  // A block's two weight-gradient products (dW += dout^T @ inp) reduce over the microbatch's B
  // rows, and each reads and writes the whole fp32 gradient of its weight: at the lab's B = 64
  // that traffic, not the arithmetic, sets their speed (bench_model). With a group of n > 1
  // (ModelStorage::weight_grad_group) a block whose backward is deferrable (model.h) copies the
  // products' inputs (its input and GELU output rows, its output and pre-GELU gradient rows; bf16
  // under mixed precision) to the group's rows and leaves the products; the backward that brings
  // the group to n microbatches, or the first one not deferrable, computes them once over all the
  // group's rows. The same sums in another order: a fixed world size stays bit-identical.
  // The group's rows are held for the model's life (charged as activations: n x B x 2 (h + f)
  // elements a block, as strategy::weight_grad_group_bytes counts them). TP slices and the head
  // compute their own products every microbatch.
  int weight_grad_group() const { return storage_.weight_grad_group; }
  void set_weight_grads_deferrable(bool deferrable) override { deferrable_ = deferrable; }
  bool weight_grads_pending(FlatRange within) const override;
  using Model::weight_grads_pending;

  // ---- Tensor parallelism (lab_mlp_tp.cpp) ----
  // Under a slice of size > 1 a block's forward_layer leaves the row-parallel PARTIAL sum
  // post_local @ W2_local^T in activation(l+1) (no bias, no residual), and its backward_layer the
  // partial dpre_local @ W1_local in dactivation(l) (no residual branch). The executor reduces
  // them over the TP group (all-reduce, or reduce-scatter + all-gather with sequence
  // parallelism) and calls the finish below on the rows it holds reduced.
  TpSlice tp_slice() const override { return tp_; }
  // The whole network's shape (shape() is the local one).
  MlpShape global_shape() const;
  // The local shape of a slice: ffn / tp.size.
  static MlpShape tp_local_shape(const MlpShape& global, TpSlice tp);
  // Flat offset in the whole network of element j of the local tensor `local`.
  static int64_t tp_global_offset(const ParamTensor& local, const ParamTensor& global, int64_t j, TpSlice tp);
  // activation(l+1)[rows] += fc2.bias + activation(l)[rows] (rows [row_begin, row_end)).
  void tp_finish_forward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end) const override;
  // dactivation(l)[rows] += dactivation(l+1)[rows]; then releases dactivation(l+1).
  void tp_finish_backward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end) override;

 private:
  // Weight-gradient groups: where this backward of block i puts its products' inputs.
  struct GroupSlot {
    bool grouped = false;  // into the group's rows (else the block computes its products now)
    bool close = false;    // and the group's products run at the end of this backward
    int64_t row = 0;       // its first row there
  };
  struct GradGroup {
    CountedVector<float> x, post, dy, dpre;             // fp32: (rows, h), (rows, f), (rows, h), (rows, f)
    CountedVector<uint16_t> x16, post16, dy16, dpre16;  // the same under mixed precision, bf16
    int64_t rows = 0;
    int microbatches = 0;
  };
  void make_weight_grad_groups();
  // The gradient buffer as bound (no zeroing); zero_unwritten_grads zeroes the tensors zero_grads
  // left unwritten (logically zero; the buffer still holds the last step's values).
  std::span<float> grad_storage() { return adopted_grads_.empty() ? std::span<float>(grads_) : adopted_grads_; }
  void zero_unwritten_grads(FlatRange within = {0, INT64_MAX}) const;
  void zero_if_unwritten(size_t tensor) const;
  GroupSlot weight_grad_slot(int i, int64_t B);
  // Block i's rows are in (rows += B); when the slot closes the group, its products run.
  void end_weight_grad_slot(int i, const GroupSlot& slot, int64_t B);
  void block_forward_tp(int i, MicrobatchState& mb) const;
  void block_backward_tp(int i, MicrobatchState& mb);
  void check_owned(int layer) const;
  // Owned elements of a named tensor, as offsets into params_ / grads_.
  FlatRange local_range(std::string_view name) const;
  size_t index_of(const ParamTensor& t) const { return static_cast<size_t>(&t - layout_.tensors().data()); }
  const float* tensor(const ParamTensor& t) const;
  float* tensor_grad(const ParamTensor& t);
  void bind(std::vector<float*>& where, FlatRange range, std::span<float> storage, const char* what);
  const ParamTensor& tensor_of(int layer, int which) const;
  void block_forward(int i, MicrobatchState& mb) const;
  void head_forward(MicrobatchState& mb) const;
  void block_backward(int i, MicrobatchState& mb);
  void head_backward(MicrobatchState& mb);
  // Mixed-precision blocks (lab_mlp_mixed.cpp).
  void block_forward_mixed(int i, MicrobatchState& mb) const;
  void block_backward_mixed(int i, MicrobatchState& mb);
  // The bf16 copy of a weight tensor prepared for `use` (compute/cpu/matmul.h), made from its
  // fp32 values when stale: with the other one where neither is current and the copies are not
  // made per pass (set_bf16_copies_per_pass), else alone.
  compute::cpu::PreparedWeightBf16 weight_bf16(const ParamTensor& t, compute::cpu::WeightUse use) const;
  void mark_bf16_stale() const;

  ParamLayout layout_;
  int first_layer_ = 0;
  int end_layer_ = 0;
  FlatRange owned_;
  ModelStorage storage_;
  CountedVector<float> params_, grads_;
  std::span<float> adopted_grads_;          // adopt_grads(): where the gradients live instead of grads_
  std::shared_ptr<void> adopted_keep_;      // keeps it mapped, and releases its charge with the model
  CountedVector<float> scratch_;            // backward: dgelu (B, f) of a block, or dlogits (B, C) of the head
  std::vector<float*> param_at_, grad_at_;  // per tensor (layout order): its binding, or null
  bool mixed_ = false;
  // Mixed precision: per tensor and use (at 2 t + use), its prepared bf16 copy (weights only) and
  // whether it is current; the forward (const) refreshes them, hence mutable. Charged as
  // parameters (temporary under ZeRO-3).
  mutable std::vector<CountedVector<uint16_t>> weights_bf16_;
  mutable std::vector<char> bf16_fresh_;
  mutable int64_t bf16_copies_made_ = 0;
  bool bf16_per_pass_ = !storage_.params;
  mutable CountedVector<float> forward_scratch_;  // mixed forward: fc1's fp32 product (B, f)
  CountedVector<uint16_t> scratch_bf16_;          // mixed backward: dy (B, h) and dpre (B, f) in bf16
  mutable std::vector<char> grad_unwritten_;      // per tensor: zero_grads left it to its first product
  std::vector<GradGroup> groups_;                 // per block of the network (empty for blocks not held)
  bool deferrable_ = false;
  TpSlice tp_;
  std::vector<LayerChunk> chunks_;
  std::vector<int64_t> pos_;         // per tensor (layout order): its flat position here, or -1
  std::vector<float> tp_zero_bias_;  // (h) zeros: fc2's partial sum takes its bias after the reduction
};

}  // namespace parlab::model
