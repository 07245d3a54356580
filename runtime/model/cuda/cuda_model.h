#pragma once
// CudaModel: model::Model (runtime/model/model.h) on one GPU, around a DeviceMlp. Its host
// buffers are those of a host LabMlp (borrowed), so the optimizer, checkpoints and exports work on
// host copies in the same global names; its compute buffers are the DeviceMlp's (device memory,
// for an NcclCommunicator).
//
// Microbatches: the executor hands in host MicrobatchStates; a device slot is taken for a state the
// first time the model sees it (its first forward, or a recv into its boundary before that), which
// uploads its labels; the first layer of the network uploads the inputs, the head's forward copies
// logits and losses back into the host state, and release_microbatch frees the slot. zero_grads
// (the start of a step) forgets every slot.
//
// Boundary tensors live on the device (compute_boundary): a pipeline stage receives its input and
// sends its output device to device, a tensor-parallel group reduces fc2's partial sum (and fc1's
// partial input gradient) in place on the GPU, and tp_finish_forward/backward add bias and
// residual there. Nothing crosses to the host between layers.
//
// Pipeline stages and tensor-parallel slices: the host model's slice and layer span (the same
// LabMlp constructors as on the CPU, so the counter-RNG values at global positions are the CPU's)
// decide what the GPU holds: the DeviceMlp has the slice's local shape, and a stage's layers sit
// at their global flat offsets (compute_params() is the owned range of that buffer). An
// interleaved stage holds several chunks whose flat coordinates are packed one after the other
// (lab_mlp.h): its parameters and gradients are then two packed device buffers of the owned size,
// each chunk's tensors bound into them at the host's positions. ZeRO-2/3: the host model then
// holds no gradients (no parameters), and the executor binds the layers to buckets and gathered
// layers in device memory (make_compute_buffer). The DeviceMlp keeps what the host model keeps
// (model::ModelStorage): no parameters of its own under ZeRO-3, no gradients under ZeRO-2/3, so
// a rank's device holds its shards and what is gathered or bucketed in flight, as the ledger says.
//
// Device memory is counted and pooled (runtime/model/compute_memory.h): the DeviceMlp's own
// buffers, every compute buffer and the device optimizer's state are charged to device_account()
// by category (what a run reports beside the ledger), and the compute buffers the
// executor makes and drops within a step come back from the pool, so a step after the first
// calls no cudaMalloc/cudaFree (device_memory().raw_allocations() stays put).
#include <map>
#include <memory>

#include "runtime/model/cuda/device_mlp.h"
#include "runtime/model/compute_memory.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/model/model.h"

namespace parlab::compute::cuda {

class CudaModel final : public model::Model, public model::DeviceMemoryOwner {
 public:
  // `host`: the whole network, borrowed; its parameters (when it holds them: not under ZeRO-3)
  // are copied to `device`. `max_batch`: the largest microbatch; `slots`: how many microbatches may be
  // live at once (the plan's microbatches is always enough). Throws ConfigError / CudaError.
  CudaModel(model::LabMlp& host, int64_t max_batch, int slots, int device);

  std::string_view device_name() const override { return "cuda"; }
  const model::ParamLayout& layout() const override { return host_.layout(); }
  int first_layer() const override { return host_.first_layer(); }
  int end_layer() const override { return host_.end_layer(); }
  model::FlatRange owned_range() const override { return host_.owned_range(); }
  bool holds_params() const override { return host_.holds_params(); }
  bool holds_grads() const override { return host_.holds_grads(); }
  std::span<float> params() override { return host_.params(); }
  std::span<const float> params() const override { return host_.params(); }
  std::span<float> grads() override { return host_.grads(); }
  std::span<const float> grads() const override { return host_.grads(); }
  std::span<float> compute_params() override;
  std::span<float> compute_grads() override;
  void pull_grads(model::FlatRange range) override;
  void push_params(model::FlatRange range) override;
  void pull_params(model::FlatRange range) override;
  void zero_grads() override;
  bool compute_is_host() const override { return false; }
  // Device memory from the pool, charged to device_account() (not to `account`, the host's).
  // Always zeroed (the pool's buffers are), whatever `init` says.
  std::unique_ptr<model::ComputeBuffer> make_compute_buffer(int64_t elements, model::MemoryAccount* account,
                                                            model::MemoryCategory category,
                                                            model::BufferInit init) override;
  const model::MemoryAccount& device_account() const override { return memory_->account(); }
  model::MemoryAccount& device_account() { return memory_->account(); }
  const model::ComputeMemory& device_memory() const { return *memory_; }
  void compute_accumulate(std::span<float> dst, std::span<const float> src) override;
  void compute_to_host(std::span<float> host, std::span<const float> compute) override;
  void compute_from_host(std::span<float> compute, std::span<const float> host) override;
  void compute_zero(std::span<float> compute) override;
  void compute_copy(std::span<float> dst, std::span<const float> src) override;
  std::span<float> compute_boundary(int l, bool gradient, model::MicrobatchState& mb) override;
  void release_microbatch(model::MicrobatchState& mb) override;
  void bind_params(model::FlatRange range, std::span<float> storage) override;
  void bind_grads(model::FlatRange range, std::span<float> storage) override;
  void forward_layer(int layer, model::MicrobatchState& mb) const override;
  void backward_layer(int layer, model::MicrobatchState& mb) override;
  void synchronize() const override { device_->synchronize(); }
  bool owns_layer(int layer) const override { return host_.owns_layer(layer); }
  model::TpSlice tp_slice() const override { return host_.tp_slice(); }
  void tp_finish_forward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) const override;
  void tp_finish_backward(int layer, model::MicrobatchState& mb, int64_t row_begin, int64_t row_end) override;
  // Whether the stage's chunks are packed into buffers of their own (an interleaved stage).
  bool packed() const { return packed_params_ != nullptr; }

  DeviceMlp& device_mlp() { return *device_; }
  cudaStream_t stream() const { return device_->stream(); }

 private:
  // Selects the slot of `mb`, taking a free one (and uploading its labels) when `assign`.
  int select(const model::MicrobatchState& mb, bool assign) const;
  void check_range(model::FlatRange range, const char* what) const;

  // Element `range.begin` of the host buffers (they start at owned_range().begin).
  int64_t host_index(model::FlatRange range) const { return range.begin - host_.owned_range().begin; }
  // Where flat offset `range.begin` lives on the device: the whole-network buffers at their
  // global offsets, or the packed buffers of an interleaved stage.
  float* device_param(model::FlatRange range);
  float* device_grad(model::FlatRange range);

  model::LabMlp& host_;
  std::unique_ptr<DeviceMlp> device_;  // mutable through the pointer: forward_layer is const
  // After device_ (its stream zeroes new buffers); buffers the executor still holds keep the pool.
  std::unique_ptr<model::ComputeMemory> memory_;
  // The DeviceMlp's own buffers on device_account().
  model::AccountCharge params_charge_, grads_charge_, activations_charge_, scratch_charge_;
  // An interleaved stage's packed parameters and gradients (null otherwise), owned_range() sized.
  std::unique_ptr<model::ComputeBuffer> packed_params_, packed_grads_;
  mutable std::map<const model::MicrobatchState*, int> slot_of_;
  mutable std::vector<char> slot_used_;
};

}  // namespace parlab::compute::cuda
