#pragma once
// DeviceMlp: the lab-mlp on one GPU, the device twin of model::LabMlp (runtime/model/lab_mlp.h).
// Same flat parameter layout (model::ParamLayout), same math per layer (the kernels of kernels.h
// mirror the CPU ones), same contract for the executor:
//   forward_layer(l)   for l = 0 .. L   (reads activation(l), writes activation(l+1); head: loss)
//   backward_layer(l)  for l = L .. 0   ACCUMULATES layer l's parameter gradients into grads()
// and the head's backward scales by loss_scale = 1/global_batch, so a plain SUM of gradients over
// microbatches and ranks (an NCCL all-reduce of grads()) is the gradient of the global mean loss.
//
// Everything runs on stream() of device(); params() and grads() are DEVICE memory, laid out like
// LabMlp::params() (element i = flat offset i), ready to hand to an NcclCommunicator.
// Up to `slots` microbatches of up to max_batch samples are held at a time (activations are
// preallocated: no allocation inside a step). A pipeline stage runs its layers on a
// whole-network buffer (set_microbatch_at).
// Not thread-safe: one DeviceMlp per rank.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/compute/cuda/cublas.h"
#include "runtime/model/param_layout.h"

namespace parlab::compute::cuda {

// What a DeviceMlp keeps of its own (DeviceMlp's constructor).
struct DeviceMlpStorage {
  bool params = true;
  bool grads = true;
};

class DeviceMlp {
 public:
  // Parameters copied from `host_params` (ParamLayout(shape).numel() floats, e.g.
  // LabMlp::params() of a whole network; empty: zeros, for a ZeRO-3 rank whose layers are all
  // bound to gathered buffers before they compute); gradients zero. Throws ConfigError on a bad shape,
  // parameter count or max_batch < 1, CudaError when the device cannot hold it.
  // `slots` microbatches can be in flight at once (each its own activations; see select_slot).
  //
  // What it keeps of its own follows model::ModelStorage: whole-network parameters unless ZeRO-3
  // binds gathered layers (storage.params false: host_params must be empty), gradients unless
  // ZeRO-2/3 binds buckets (storage.grads false). params() / grads() are then empty, and a layer
  // computing on an unbound tensor throws.
  using Storage = DeviceMlpStorage;
  DeviceMlp(const model::MlpShape& shape, std::span<const float> host_params, int64_t max_batch, int device,
            int slots = 1, Storage storage = {});
  // Initialised like model::LabMlp(shape, seed): the same values bit for bit.
  static DeviceMlp from_seed(const model::MlpShape& shape, uint64_t seed, int64_t max_batch, int device);
  ~DeviceMlp();
  DeviceMlp(DeviceMlp&&) noexcept;
  DeviceMlp& operator=(DeviceMlp&&) noexcept;

  const model::MlpShape& shape() const;
  const model::ParamLayout& layout() const;
  int device() const { return device_; }
  int64_t max_batch() const;
  cudaStream_t stream() const;
  const CublasHandle& blas() const;

  // Device bytes it allocated, by what they are for (the memory ledger's categories): its own
  // parameters and gradients, every slot's activations, the backward scratch.
  struct Footprint {
    int64_t params = 0, grads = 0, activations = 0, scratch = 0;
  };
  Footprint footprint() const;

  // DEVICE memory: the flat parameter / gradient buffers (layout().numel() floats each, or none:
  // Storage above).
  std::span<float> params();
  std::span<float> grads();
  void upload_params(std::span<const float> host);
  void download_params(std::span<float> host) const;  // returns once the copy is on the host
  void download_grads(std::span<float> host) const;
  void zero_grads();
  // ZeRO-2/3 (as model::LabMlp::bind_*): the tensors of flat `range` (whole tensors) read their
  // parameters from / write their gradients into `storage`, DEVICE memory of range.numel()
  // floats; an empty span leaves them unbound, and a layer that needs an unbound tensor throws
  // RuntimeError naming it. params() / grads() stay the model's own buffers.
  void bind_params(model::FlatRange range, std::span<float> storage);
  void bind_grads(model::FlatRange range, std::span<float> storage);

  // Uploads one microbatch: x (B, h) and labels (B), B = labels.size() <= max_batch, out of a
  // global batch of `global_batch` samples (loss scale 1/global_batch, rounded once in double as
  // MicrobatchState does). Labels are checked here, on the host: ConfigError names the first
  // one outside [0, C). Invalidates what the previous microbatch saved.
  void set_microbatch(std::span<const float> x, std::span<const int32_t> labels, int64_t global_batch);
  // The same with x as activation(layer): the first microbatch input of a pipeline stage whose
  // layers start at `layer` (the head still reads `labels`). set_microbatch is layer 0.
  void set_microbatch_at(int layer, std::span<const float> x, std::span<const int32_t> labels, int64_t global_batch);
  // Starts the selected slot's microbatch without an input: its labels (checked as above), batch
  // size and loss scale. A pipeline stage after the first gets its input through boundary(),
  // received device to device. set_microbatch_at is this plus the upload of x.
  void begin_microbatch(std::span<const int32_t> labels, int64_t global_batch);
  // Uploads a boundary tensor of the selected microbatch (batch() * hidden floats) from the host.
  void set_activation(int l, std::span<const float> x);
  // The selected microbatch's boundary tensor l (gradient: dactivation(l)) in DEVICE memory,
  // batch() * hidden floats, marked as set: a pipeline recv or a TP collective writes it in place
  // (on another stream, which the caller orders before the next layer), a send reads it.
  std::span<float> boundary(int l, bool gradient);
  int64_t batch() const;
  float loss_scale() const;

  // Tensor parallelism (model::LabMlp's contract, lab_mlp.h): when on, a block's forward leaves
  // only fc2's partial sum in activation(l+1) (no bias, no residual) and its backward only the
  // partial dpre @ W1 in dactivation(l) (no residual branch); tp_finish_forward then adds
  // fc2.bias and the residual to rows [row_begin, row_end) once the sum is reduced.
  void set_tp_partial(bool on);
  void tp_finish_forward(int layer, int64_t row_begin, int64_t row_end);
  // The residual branch after the reduction: dactivation(layer) += dactivation(layer + 1) on rows
  // [row_begin, row_end) (one fp32 add per element, as LabMlp::tp_finish_backward).
  void tp_finish_backward(int layer, int64_t row_begin, int64_t row_end);

  // Microbatch slots: set_microbatch, the per-layer steps and the host copies below act on the
  // selected slot (0 at first), so a schedule that runs several forwards before their backwards
  // (GPipe accumulation) keeps each microbatch's activations. Parameters and gradients are shared.
  int slots() const;
  int slot() const;
  void select_slot(int slot);  // throws RuntimeError outside [0, slots())

  // Per-layer steps (see above). Throw RuntimeError when called out of order (no input, backward
  // before forward, missing upstream gradient), like LabMlp.
  void forward_layer(int layer);
  void backward_layer(int layer);
  void forward();   // every layer
  void backward();  // every layer, in reverse

  // Host copies (they synchronise the stream). Valid after the head's forward.
  std::vector<float> losses() const;  // (B)
  std::vector<float> logits() const;  // (B, C)
  double loss_sum() const;            // sum of losses() in double, in order (as MicrobatchState)
  // Boundary tensors (B, h), l in [0, L]: for tests and pipeline hand-offs.
  std::vector<float> activation(int l) const;
  std::vector<float> dactivation(int l) const;

  void synchronize() const;

  // Same count as LabMlp::step_matmul_flops: 3 x [2 B (h f + f h) L + 2 B h C].
  static double step_matmul_flops(const model::MlpShape& shape, int64_t batch);

 private:
  struct State;
  // RuntimeError unless `layer` is a block and [row_begin, row_end) rows of the microbatch.
  void check_tp_rows(const char* what, int layer, int64_t row_begin, int64_t row_end) const;
  int device_ = 0;
  std::unique_ptr<State> state_;
};

}  // namespace parlab::compute::cuda
