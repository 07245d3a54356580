#pragma once
// The GPU backend as the CPU side sees it. CUDA, cuBLAS and NCCL are large (cuBLAS alone is
// ~540 MB) and the dynamic loader maps and relocates them before main(), so a binary linked
// against them pays ~0.4 s at every start. They live instead in a plugin, libparlab_cuda.so
// (runtime/device/cuda_backend.cpp with runtime/gpu, runtime/compute/cuda, runtime/model/cuda and runtime/comm/nccl),
// which the CPU side loads only when something asks for --device cuda: a CPU run never maps them.
//
// The plugin is built from the same tree as the binary and hands C++ objects across (a
// Communicator, std::function factories), so it must come from the same build: its entry point
// takes the caller's build id and refuses any other. The plugin resolves the host's symbols
// (model, comm, train) from the program that loads it (linked with exported symbols).
//
// A program that links the backend itself (the GPU tests: cmake/cuda.cmake's
// parlab_link_cuda_backend) defines the entry point, and the loader uses it without dlopen.
#include <memory>
#include <string>

#include "parlab/version.h"
#include "runtime/device/device.h"

namespace parlab::device {

class CudaBackend {
 public:
  virtual ~CudaBackend() = default;
  // Empty when a CUDA device can be used; otherwise why not, in one line.
  virtual std::string unavailable_reason() const = 0;
  // open_cuda_rank (device.h) on this backend.
  virtual CudaRank open_rank(std::shared_ptr<comm::Store> store, int rank, int size, int local_rank,
                             const CudaRankOptions& options) const = 0;
};

// The id both sides compile in (version, compiler, interface revision): the plugin returns its
// backend only to a caller with the same id. Raise the revision when this interface changes.
inline std::string backend_build_id() { return std::string("parlab ") + kVersion + ", " + __VERSION__ + ", backend 1"; }

// The plugin's file name, looked for beside the program (/proc/self/exe), then in ../lib/parlab
// (an installed tree), then where this build tree put it; PARLAB_CUDA_PLUGIN (a path) replaces
// the search.
inline constexpr const char* kCudaPluginName = "libparlab_cuda.so";

// This process's backend, loaded on first use (thread-safe, once). Null when the build has no
// GPU backend or the plugin could not be loaded; `why` then says which, in one line.
const CudaBackend* cuda_backend(std::string* why);

}  // namespace parlab::device

// The plugin's one exported symbol: its backend when `build_id` is its own, else null.
extern "C" const parlab::device::CudaBackend* parlab_cuda_backend_v1(const char* build_id);
