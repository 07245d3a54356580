// The GPU backend (backend.h), built into libparlab_cuda.so: LOCAL_RANK's GPU, NCCL, the
// CudaModel. Only this plugin (and programs that link it, the GPU tests) map CUDA.
#include <algorithm>

#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/model/cuda/cuda_model.h"
#include "runtime/gpu/device.h"
#include "runtime/device/backend.h"
#include "runtime/device/cuda_optimizer.h"
#include "base/errors.h"

namespace parlab::device {

namespace {

std::string no_device_reason() {
  const compute::cuda::DeviceList list = compute::cuda::cuda_devices();
  if (list.devices.empty()) return "no CUDA device on this machine (" + list.reason + "); use --device cpu";
  return "";
}

// The largest microbatch a rank of `plan` computes: its share of the global batch cut into
// `microbatches` pieces that differ by at most one (trainer.h).
int64_t max_microbatch(const strategy::Plan& plan) {
  const int64_t m = std::max<int64_t>(plan.microbatches, 1);
  const int64_t per_rank = (plan.global_batch + plan.dp - 1) / plan.dp;
  return std::max<int64_t>((per_rank + m - 1) / m, 1);
}

CudaRank open_rank_on_gpu(std::shared_ptr<comm::Store> store, int rank, int size, int local_rank,
                          const CudaRankOptions& options) {
  const compute::cuda::DeviceList list = compute::cuda::cuda_devices();
  if (list.devices.empty()) throw ConfigError("--device", "cuda", no_device_reason());
  if (local_rank < 0 || local_rank >= static_cast<int>(list.devices.size()))
    throw ConfigError("LOCAL_RANK", std::to_string(local_rank),
                      "names no GPU of this machine: one GPU per rank, " + std::to_string(list.devices.size()) +
                          " visible (CUDA_VISIBLE_DEVICES selects them)");
  CudaRank r;
  r.device = local_rank;
  comm::NcclOptions no;
  no.timeout = options.timeout;
  no.attempt = options.attempt;
  no.dump_dir = options.dump_dir;
  no.group_name = "nccl.world";  // beside the Gloo "world": flight-recorder dumps must not share a file name
  std::unique_ptr<comm::NcclCommunicator> nccl =
      comm::make_nccl_communicator(std::move(store), rank, size, r.device, no);
  comm::NcclCommunicator* raw = nccl.get();
  r.world = std::move(nccl);
  const int device = r.device;
  // The trainer builds the model before it splits groups off the world: every communicator then
  // waits for the model's stream, so a bucket is reduced only after its backward wrote it.
  r.make_model = [raw, device](model::LabMlp& host, const strategy::Plan& plan) -> std::unique_ptr<model::Model> {
    auto m = std::make_unique<compute::cuda::CudaModel>(
        host, max_microbatch(plan), static_cast<int>(std::max<int64_t>(plan.microbatches, 1)), device);
    raw->set_compute_stream(m->stream());
    return m;
  };
  r.make_optimizer = [device](const train::Optimizer& host,
                              model::Model& m) -> std::unique_ptr<train::DeviceOptimizer> {
    auto* cuda_model = dynamic_cast<compute::cuda::CudaModel*>(&m);
    if (cuda_model == nullptr)
      throw RuntimeError("the CUDA optimizer needs the CUDA model, got a " + std::string(m.device_name()) + " model");
    return make_cuda_optimizer(host, device, cuda_model->stream(), &cuda_model->device_account());
  };
  return r;
}

class Backend final : public CudaBackend {
 public:
  std::string unavailable_reason() const override { return no_device_reason(); }
  CudaRank open_rank(std::shared_ptr<comm::Store> store, int rank, int size, int local_rank,
                     const CudaRankOptions& options) const override {
    return open_rank_on_gpu(std::move(store), rank, size, local_rank, options);
  }
};

}  // namespace
}  // namespace parlab::device

extern "C" __attribute__((visibility("default"))) const parlab::device::CudaBackend* parlab_cuda_backend_v1(
    const char* build_id) {
  static const parlab::device::Backend backend{};
  if (build_id == nullptr || parlab::device::backend_build_id() != build_id) return nullptr;
  return &backend;
}
