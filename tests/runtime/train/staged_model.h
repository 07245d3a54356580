#pragma once
// A host stand-in for a device model (runtime/model/model.h), for tests on machines without a
// GPU: it computes on its OWN copy of the network (the "device" buffers) and exposes the host
// LabMlp's buffers as its host side, exactly as the CUDA model does. Anything that reads or writes
// host buffers without the executor's pull_grads/push_params (or the trainer's
// host_state_changed after a checkpoint load) then sees stale numbers, and the test catches it.
// Its microbatches live in its own memory too, as the CUDA model's slots do: a "device" state per
// host state, made on first use (labels copied in), the data copied in by layer 0's forward, the
// head's outputs copied back; boundary tensors (compute_boundary) are the device state's, so an
// executor that sent, received or reduced the host state's tensors would compute garbage, and one
// that wrote them is counted (host_boundaries).
#include <algorithm>
#include <cstring>
#include <map>

#include "runtime/model/compute_memory.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/model/model.h"
#include "runtime/train/device_optimizer.h"
#include "base/errors.h"

namespace parlab::train::testing {

class StagedModel final : public model::Model, public model::DeviceMemoryOwner {
 public:
  // `host`: the whole network (borrowed); under ZeRO-2/3 it holds no gradients (no parameters),
  // and the executor binds the "device" layers to buffers in this model's compute memory.
  // A pipeline stage or a tensor-parallel slice computes on the same stage or slice of its own.
  //
  // Its "device" memory is the CUDA model's: the twin keeps what the host keeps (no parameters
  // under ZeRO-3, no gradients under ZeRO-2/3), and it and every compute buffer are charged to the
  // model's own account (device_account) through the same pool (runtime/model/compute_memory.h)
  // over heap memory, so tests see the device's bytes by category and its allocator calls.
  explicit StagedModel(model::LabMlp& host)
      : host_(host),
        memory_(std::make_unique<HeapMemory>()),
        device_(host.global_shape(), /*seed=*/0, host.chunks(),
                model::ModelStorage{.params = host.holds_params(),
                                    .grads = host.holds_grads(),
                                    .account = &memory_.account(),
                                    .weight_grad_group = host.weight_grad_group()},
                host.tp_slice()) {
    // The device starts from garbage (another seed) until the host's weights are pushed.
    if (host_.holds_params()) push_params(host_.owned_range());
  }

  std::string_view device_name() const override { return "staged"; }
  const model::ParamLayout& layout() const override { return host_.layout(); }
  int first_layer() const override { return host_.first_layer(); }
  int end_layer() const override { return host_.end_layer(); }
  model::FlatRange owned_range() const override { return host_.owned_range(); }
  bool holds_params() const override { return host_.holds_params(); }
  bool holds_grads() const override { return host_.holds_grads(); }
  // Its compute memory is not the host's: the shards and buckets are made apart (the default
  // host vectors stand for device memory).
  bool compute_is_host() const override { return false; }
  std::span<float> params() override { return host_.params(); }
  std::span<const float> params() const override { return host_.params(); }
  std::span<float> grads() override { return host_.grads(); }
  std::span<const float> grads() const override { return host_.grads(); }
  std::span<float> compute_params() override { return device_.params(); }
  std::span<float> compute_grads() override { return device_.grads(); }
  // Both buffers start at owned_range().begin.
  void pull_grads(model::FlatRange r) override {
    std::copy_n(device_.grads().begin() + at(r), r.numel(), host_.grads().begin() + at(r));
    ++pulls;
  }
  void push_params(model::FlatRange r) override {
    std::copy_n(host_.params().begin() + at(r), r.numel(), device_.params().begin() + at(r));
    ++pushes;
  }
  void pull_params(model::FlatRange r) override {
    std::copy_n(device_.params().begin() + at(r), r.numel(), host_.params().begin() + at(r));
    ++param_pulls;
  }
  std::unique_ptr<model::ComputeBuffer> make_compute_buffer(int64_t elements, model::MemoryAccount* account,
                                                            model::MemoryCategory category,
                                                            model::BufferInit) override {
    ++compute_buffers;
    return memory_.buffer(elements, category);
  }
  const model::MemoryAccount& device_account() const override { return memory_.account(); }
  model::MemoryAccount& device_account() { return memory_.account(); }
  const model::ComputeMemory& device_memory() const { return memory_; }
  bool owns_layer(int layer) const override { return host_.owns_layer(layer); }
  model::TpSlice tp_slice() const override { return host_.tp_slice(); }
  void zero_grads() override {
    device_.zero_grads();
    slots_.clear();
  }
  void bind_params(model::FlatRange r, std::span<float> s) override { device_.bind_params(r, s); }
  void bind_grads(model::FlatRange r, std::span<float> s) override { device_.bind_grads(r, s); }
  void forward_layer(int layer, model::MicrobatchState& mb) const override {
    model::MicrobatchState& d = slot(mb, true);
    if (layer == 0) std::copy(mb.activation(0).begin(), mb.activation(0).end(), d.activation(0).begin());
    device_.forward_layer(layer, d);
    if (layer == device_.shape().blocks) mb.set_head_outputs(d.logits(), d.losses());
  }
  void set_weight_grads_deferrable(bool deferrable) override { device_.set_weight_grads_deferrable(deferrable); }
  bool weight_grads_pending(model::FlatRange within) const override { return device_.weight_grads_pending(within); }
  using model::Model::weight_grads_pending;
  void backward_layer(int layer, model::MicrobatchState& mb) override {
    device_.backward_layer(layer, slot(mb, false));
  }
  void tp_finish_forward(int layer, model::MicrobatchState& mb, int64_t b, int64_t e) const override {
    device_.tp_finish_forward(layer, slot(mb, false), b, e);
  }
  void tp_finish_backward(int layer, model::MicrobatchState& mb, int64_t b, int64_t e) override {
    device_.tp_finish_backward(layer, slot(mb, false), b, e);
  }
  std::span<float> compute_boundary(int l, bool gradient, model::MicrobatchState& mb) override {
    ++boundaries;
    model::MicrobatchState& d = slot(mb, true);
    return gradient ? d.dactivation(l) : d.activation(l);
  }
  void compute_copy(std::span<float> dst, std::span<const float> src) override {
    ++copies;
    Model::compute_copy(dst, src);
  }
  void release_microbatch(model::MicrobatchState& mb) override {
    for (int l = 0; l <= device_.global_shape().blocks; ++l)
      if ((l > 0 && mb.has_activation(l)) || mb.has_dactivation(l)) ++host_boundaries;
    slots_.erase(&mb);
    mb.release_activations();
  }

  int pulls = 0, pushes = 0, param_pulls = 0;
  int compute_buffers = 0;  // made in this model's compute memory (buckets, gathers, send copies)
  int boundaries = 0;       // compute_boundary calls (sends, recvs, TP collectives)
  int copies = 0;           // compute_copy calls (send copies)
  int host_boundaries = 0;  // boundary tensors found in a host state at its release (should be none)

 private:
  model::MicrobatchState& slot(const model::MicrobatchState& mb, bool make) const {
    auto it = slots_.find(&mb);
    if (it == slots_.end()) {
      if (!make) throw RuntimeError("StagedModel: a microbatch reached a backward before any forward");
      // As the trainer's states (charged as activations), on the device's account.
      it = slots_
               .emplace(&mb, model::MicrobatchState(device_.shape(), mb.batch(), mb.global_batch(), &memory_.account()))
               .first;
      std::copy(mb.labels().begin(), mb.labels().end(), it->second.labels().begin());
    }
    return it->second;
  }
  int64_t at(model::FlatRange r) const { return r.begin - host_.owned_range().begin; }
  // The stand-in's "device" allocator: the heap (cudaMalloc on a GPU).
  struct HeapMemory final : model::RawMemory {
    void* allocate(std::size_t bytes) override { return ::operator new(bytes); }
    void free(void* p, std::size_t) noexcept override { ::operator delete(p); }
    void zero(void* p, std::size_t bytes) override { std::memset(p, 0, bytes); }
  };
  model::LabMlp& host_;
  mutable model::ComputeMemory memory_;  // before device_: the twin charges its account (slot() is const)
  mutable model::LabMlp device_;
  mutable std::map<const model::MicrobatchState*, model::MicrobatchState> slots_;
};

// A host stand-in for a device optimizer (train/device_optimizer.h): its own twin of the host
// optimizer with its OWN state buffers (the "device" state), updating the compute buffers it is
// handed. A checkpoint that reads the host state without Trainer::sync_host, or a resume that
// does not upload the loaded state, then sees or leaves stale numbers.
class StagedOptimizer final : public train::DeviceOptimizer {
 public:
  // `account`: where the twin's state is charged (the staged model's device account; null: nowhere).
  explicit StagedOptimizer(const train::Optimizer& host, model::MemoryAccount* account = nullptr)
      : twin_(train::make_optimizer(host.config(), host.range(), account)) {}

  void step(const train::Optimizer& host, std::span<float> params, std::span<const float> grads) override {
    twin_->set_lr(host.lr());
    twin_->set_steps(host.steps() - 1);  // step() counts this one
    twin_->step(params, grads);
    ++steps;
  }
  void download_state(train::Optimizer& host) const override {
    for (const std::string& b : twin_->buffer_names()) {
      const std::span<const float> from = twin_->buffer(b);
      std::copy(from.begin(), from.end(), host.mutable_buffer(b).begin());
    }
    ++downloads;
  }
  void upload_state(const train::Optimizer& host) override {
    for (const std::string& b : host.buffer_names()) {
      const std::span<const float> from = host.buffer(b);
      std::copy(from.begin(), from.end(), twin_->mutable_buffer(b).begin());
    }
    ++uploads;
  }

  int steps = 0, uploads = 0;
  mutable int downloads = 0;

 private:
  std::unique_ptr<train::Optimizer> twin_;
};

}  // namespace parlab::train::testing
