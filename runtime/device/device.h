#pragma once
// Where a rank computes: `parlab train --device cpu|cuda` (and `device = ...` in experiment
// files). The CPU path is the host LabMlp over Gloo; the CUDA path binds LOCAL_RANK's GPU, runs
// the step program on a CudaModel (runtime/model/cuda/cuda_model.h) and its collectives on
// NCCL communicators, while Gloo keeps the host-side work (checkpoint agreement, exports,
// barriers).
//
// The GPU backend is optional at configure time (cmake/cuda.cmake) and, when built, a plugin
// (backend.h: libparlab_cuda.so) that this interface loads the first time cuda is asked for, so
// a CPU run never maps CUDA, cuBLAS or NCCL. The interface is the same either way: nothing
// outside tests a macro.
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/train/trainer.h"
#include "strategy/plan.h"

namespace parlab::device {

enum class Kind { kCpu, kCuda };

// "cpu" | "cuda"; anything else throws ConfigError naming `field` and the allowed values.
Kind parse_kind(std::string_view text, const std::string& field = "--device");
std::string_view to_string(Kind kind);

// Whether this build made the GPU backend (CUDA and NCCL found at configure time). Loads nothing.
bool cuda_built();

// Empty when `kind` can run here; otherwise one line that says why not: the binary was built
// without CUDA, the backend plugin is missing or cannot be loaded (backend.h), or this machine
// has no usable CUDA device (and the driver's reason). For cuda it loads the plugin.
std::string unavailable_reason(Kind kind);
// Throws ConfigError("--device", "cuda", <that line>) at once, so `parlab train --device cuda`
// exits 2 before any worker starts instead of hanging in a rendezvous.
void require_available(Kind kind);

// What the device runs of a plan the CPU runtime takes: all of it. On cuda, data parallelism
// (DDP) and ZeRO-1/2/3 (NCCL reduce-scatters and all-gathers the uneven shards, the layers bind
// buckets and gathered layers in GPU memory, AdamW updates the shard there), tensor parallelism
// (sp on or off; the TP group's NCCL reduces the boundary tensors in GPU memory) and GPipe, 1F1B
// and interleaved pipelines (boundary tensors sent GPU to GPU over NCCL pairs), and their
// combinations the trainer allows. Refused: ZeRO-2/3 with SGD, SGD having no device update. A
// refusal is a ConfigError naming the plan key and value, before any process starts.
void check_plan(Kind kind, const strategy::Plan& plan);

struct CudaRankOptions {
  std::chrono::milliseconds timeout = comm::kDefaultTimeout;  // NCCL rendezvous and init
  int attempt = 0;
  std::filesystem::path dump_dir;  // flight-recorder dumps of failed or timed-out NCCL ops
};

// One rank's GPU side.
struct CudaRank {
  int device = 0;                             // the CUDA ordinal bound (LOCAL_RANK's)
  std::unique_ptr<comm::Communicator> world;  // NCCL over every rank of the job
  train::DeviceModelFactory make_model;       // CudaModel on `device`, its stream fed to `world`
  // AdamW on the device, state resident (cuda_optimizer.h): a step copies nothing to the host.
  train::DeviceOptimizerFactory make_optimizer;
};

// Binds GPU `local_rank` and connects an NCCL world of `size` ranks through `store` (the unique
// id travels through it; collective over all ranks). Throws ConfigError (no such device, or
// built without CUDA), RendezvousError or NcclError.
CudaRank open_cuda_rank(std::shared_ptr<comm::Store> store, int rank, int size, int local_rank,
                        const CudaRankOptions& options);

}  // namespace parlab::device
