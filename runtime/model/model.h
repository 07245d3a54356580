#pragma once
// model::Model: what the executor, the optimizer path and checkpoints need of the network one
// rank computes, whichever device computes it. LabMlp (runtime/model/lab_mlp.h) computes on the
// host; the CUDA model (runtime/model/cuda/cuda_model.h) on one GPU. Both run the same step
// program through train::Executor.
//
// Two places the numbers live:
//   host buffers     params() / grads(): host memory, flat layout of owned_range() (element i =
//                    flat offset owned_range().begin + i). The optimizer, ModelShards, checkpoints
//                    and exports read and write only these, so a checkpoint is the same global
//                    tensors whichever device wrote it, and a GPU run resumes on the CPU and back.
//   compute buffers  compute_params() / compute_grads(): what the layers compute on and the
//                    collectives move. For LabMlp they ARE the host buffers; for the CUDA model
//                    they are device memory (handed to an NcclCommunicator, never dereferenced).
// Between the two, explicit copies the executor places in the step program:
//   pull_grads(range)   compute -> host, before the optimizer reads the reduced gradients;
//   push_params(range)  host -> compute, after the optimizer (or a checkpoint load) changed them.
//   pull_params(range)  compute -> host, when the optimizer runs on the device
//                       (train/device_optimizer.h) and the host copy must catch up before a
//                       checkpoint or an export reads it.
// All are no-ops when the buffers coincide. Outside a step the host parameters are the truth,
// except after device-optimizer steps: then the compute parameters are, until pull_params.
//
// Boundary tensors (compute_boundary): what sends, receives and tensor-parallel collectives move
// is compute memory, so on a GPU a pipeline hand-off and a TP reduction go device to device over
// NCCL; the host MicrobatchState then carries only the data, the labels and the head's outputs.
//
// The per-layer contract is LabMlp's: forward_layer(l, mb) for l ascending reads activation(l);
// backward_layer(l, mb) descending ACCUMULATES layer l's gradients into the compute gradients
// (microbatches sum; the head scales by mb.loss_scale()). On any device the head's forward leaves
// logits and losses in `mb` (host), so loss_sum() and correct() read the same on every device.
#include <memory>
#include <span>
#include <string_view>

#include "runtime/model/memory_account.h"
#include "runtime/model/microbatch.h"
#include "runtime/model/param_layout.h"

namespace parlab::model {

// Tensor parallelism (Megatron-LM): which of `size` slices of every block this model holds.
// fc1 is column-parallel (rows [rank f/t, (rank+1) f/t) of fc1.weight and fc1.bias), fc2
// row-parallel (the same columns of fc2.weight); fc2.bias and the head are replicated.
struct TpSlice {
  int rank = 0;
  int size = 1;
};

// Layers [begin, end) of the network. A pipeline stage holds one such chunk, or several under
// the interleaved schedule (stage s of p holds virtual stages s, s + p, ...).
struct LayerChunk {
  int begin = 0;
  int end = 0;
};

// A buffer in a model's compute memory (device memory on a GPU): ZeRO's bucket buffers, gathered
// layers and shard storage, which the layers bind and the collectives move. Zeroed when made,
// unless the maker says the buffer's first user overwrites it whole (BufferInit::kOverwritten:
// a gathered layer), so no pass clears what is about to be written.
enum class BufferInit { kZero, kOverwritten };
class ComputeBuffer {
 public:
  virtual ~ComputeBuffer() = default;
  virtual std::span<float> span() = 0;
};

class Model {
 public:
  virtual ~Model() = default;

  // "cpu", "cuda": where compute buffers live (a communicator must accept them).
  virtual std::string_view device_name() const = 0;

  virtual const ParamLayout& layout() const = 0;
  const MlpShape& shape() const { return layout().shape(); }
  virtual int first_layer() const = 0;
  virtual int end_layer() const = 0;
  virtual FlatRange owned_range() const = 0;

  // Host buffers (see above); empty when the storage holds no full copy (ZeRO-2/3).
  virtual bool holds_params() const = 0;
  virtual bool holds_grads() const = 0;
  virtual std::span<float> params() = 0;
  virtual std::span<const float> params() const = 0;
  virtual std::span<float> grads() = 0;
  virtual std::span<const float> grads() const = 0;

  // Compute buffers (device memory on a GPU), same layout as the host buffers.
  virtual std::span<float> compute_params() = 0;
  virtual std::span<float> compute_grads() = 0;
  // The compute gradients of flat `range` (inside owned_range()) only: what a collective on one
  // bucket reads, while the layers before it may not have computed yet (LabMlp leaves a gradient
  // its first product will write untouched until then).
  virtual std::span<float> compute_grads(FlatRange range) {
    return compute_grads().subspan(static_cast<size_t>(range.begin - owned_range().begin),
                                   static_cast<size_t>(range.numel()));
  }
  // Copies of flat `range` (inside owned_range()) between the two; no-ops on the host.
  virtual void pull_grads(FlatRange range) = 0;
  virtual void push_params(FlatRange range) = 0;
  // Only device models (whose compute buffers are not their host buffers) must override it.
  virtual void pull_params(FlatRange range) { (void)range; }

  // Compute memory (ComputeBuffer above). The defaults are the host's: counted host vectors and
  // plain loops, for models whose compute buffers are their host buffers (compute_is_host()).
  virtual bool compute_is_host() const { return true; }
  virtual std::unique_ptr<ComputeBuffer> make_compute_buffer(int64_t elements, MemoryAccount* account,
                                                             MemoryCategory category, BufferInit init);
  // dst += src, element-wise, both compute memory of the same size (microbatches accumulate
  // their reduced bucket chunks into the gradient shard).
  virtual void compute_accumulate(std::span<float> dst, std::span<const float> src);
  // dst = src, both compute memory of the same size (a pipeline send's copy of its tensor).
  virtual void compute_copy(std::span<float> dst, std::span<const float> src);
  // Between compute memory and host memory of the same size (shard storage around checkpoints).
  virtual void compute_to_host(std::span<float> host, std::span<const float> compute);
  virtual void compute_from_host(std::span<float> compute, std::span<const float> host);
  virtual void compute_zero(std::span<float> compute);

  // Zeroes the compute gradients (the start of a step).
  virtual void zero_grads() = 0;
  // Binds the tensors of flat `range` to `storage` in compute memory (ZeRO-2/3; lab_mlp.h).
  virtual void bind_params(FlatRange range, std::span<float> storage) = 0;
  virtual void bind_grads(FlatRange range, std::span<float> storage) = 0;

  // Boundary tensors in compute memory: activation(l) of `mb` (gradient: dactivation(l)), the
  // (B, h) tensor a pipeline send or recv moves and a tensor-parallel collective reduces in place.
  // The host's are the MicrobatchState's own (the default); a device model's live in its memory
  // (its slot for `mb`, made on first use: a stage's recv may come before the microbatch's first
  // forward) and never pass through the host. The span stays valid until release_microbatch(mb)
  // or the next step's zero_grads(); a writer (recv, TP collective) leaves the tensor set.
  virtual std::span<float> compute_boundary(int l, bool gradient, MicrobatchState& mb);
  // The executor is done with `mb` for this step (its last forward, backward, send or TP
  // collective ran): its activations are freed (MicrobatchState::release_activations), and a
  // device model frees its slot. Labels, logits and losses stay on the host state.
  virtual void release_microbatch(MicrobatchState& mb);

  virtual void forward_layer(int layer, MicrobatchState& mb) const = 0;
  virtual void backward_layer(int layer, MicrobatchState& mb) = 0;
  // Weight-gradient groups (LabMlp: set_weight_grad_group): `deferrable` says of the
  // backward_layer calls that follow whether a later microbatch's backward of the same layers
  // comes before anything reads or moves their gradients, so the model may leave a block's weight
  // gradient to be computed with that microbatch's. Under a deferral the gradient of layer l is
  // final only once weight_grads_pending() is false. A model without groups ignores it.
  virtual void set_weight_grads_deferrable(bool deferrable) { (void)deferrable; }
  // Whether a group still holds rows of a weight whose gradient overlaps flat `within` (this
  // model's coordinates): an op that reads that range must wait for the group to close.
  virtual bool weight_grads_pending(FlatRange within) const {
    (void)within;
    return false;
  }
  bool weight_grads_pending() const { return weight_grads_pending(owned_range()); }
  // Whether this model holds layer `layer` (an interleaved pipeline stage holds several spans).
  virtual bool owns_layer(int layer) const { return layer >= first_layer() && layer < end_layer(); }

  // Tensor parallelism (lab_mlp.h says what a slice's layers leave for the executor to reduce).
  // A model that does not implement slices holds the whole network: size 1, and the finishes
  // are never called on it (the executor calls them only under a slice of size > 1).
  virtual TpSlice tp_slice() const { return {}; }
  virtual void tp_finish_forward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end) const;
  virtual void tp_finish_backward(int layer, MicrobatchState& mb, int64_t row_begin, int64_t row_end);

  // Returns once the layers' queued work is done (a device runs them asynchronously): the
  // executor calls it at the end of each compute op, so op times are compute times on every
  // device. The host computes synchronously: nothing to wait for.
  virtual void synchronize() const {}

 protected:
  // Implementations decide whether they copy (LabMlp does; a device model does not).
  Model() = default;
  Model(const Model&) = default;
  Model(Model&&) = default;
  Model& operator=(const Model&) = default;
  Model& operator=(Model&&) = default;
};

}  // namespace parlab::model
