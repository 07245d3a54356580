#pragma once
// The optimizer update where the compute buffers live (model.h), its state resident there.
//
// Without one, a device model's step copies the reduced gradients to the host and the updated
// parameters back (pull_grads / push_params around train::Optimizer::step): for the lab-mlp on a
// GPU two ~268 MB copies a step, which hold the step's MFU near 10%. With one, the executor
// counts the step on the host Optimizer (count_external_step) and hands the shard's COMPUTE
// buffers to step(); the host Optimizer stays the owner of the hyper-parameters (lr schedules
// set them there) and of the checkpoint format, while its state buffers and the model's host
// parameters lag until the trainer copies the device's back (Trainer::sync_host: before a
// checkpoint, an export, a fingerprint or a dump reads them). After a checkpoint load the trainer
// uploads both (Trainer::host_state_changed), so checkpoints stay device-independent.
//
// Same math and element order as the host Optimizer's update (for AdamW: the same fp32
// operations per element, AdamWStepScalars), so a device run follows the host run.
#include <functional>
#include <memory>
#include <span>

#include "runtime/model/model.h"
#include "runtime/train/optimizer.h"

namespace parlab::train {

class DeviceOptimizer {
 public:
  virtual ~DeviceOptimizer() = default;
  DeviceOptimizer(const DeviceOptimizer&) = delete;
  DeviceOptimizer& operator=(const DeviceOptimizer&) = delete;

  // Applies `host`'s current step (host.steps() already counts it; hyper-parameters read from
  // it) to params and grads: the compute buffers of host.range(), range().numel() elements each.
  virtual void step(const Optimizer& host, std::span<float> params, std::span<const float> grads) = 0;
  // Device state -> host.mutable_buffer(...) (returns once the host holds it).
  virtual void download_state(Optimizer& host) const = 0;
  // host's state buffers -> device (after a checkpoint load wrote them).
  virtual void upload_state(const Optimizer& host) = 0;

 protected:
  DeviceOptimizer() = default;
};

// Builds the device twin of `host` for `model` (the device model the executor runs), with zero
// state (the host's is uploaded on a resume). Null when that optimizer has no device version:
// the executor then updates on the host through pull_grads / push_params.
using DeviceOptimizerFactory =
    std::function<std::unique_ptr<DeviceOptimizer>(const Optimizer& host, model::Model& model)>;

}  // namespace parlab::train
