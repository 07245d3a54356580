// Finding and loading the GPU backend (backend.h): the linked-in entry point when the program has
// one, else libparlab_cuda.so through dlopen, once per process.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

#include "runtime/device/backend.h"

// Weak: defined only in programs that link the backend (the GPU tests); null elsewhere.
#pragma weak parlab_cuda_backend_v1

namespace parlab::device {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  const CudaBackend* backend = nullptr;
  std::string why;  // when backend is null
};

#ifdef PARLAB_CUDA_PLUGIN_BUILT
// Where to look, in order (backend.h).
std::vector<fs::path> candidates() {
  if (const char* explicit_path = std::getenv("PARLAB_CUDA_PLUGIN"); explicit_path && *explicit_path)
    return {fs::path(explicit_path)};
  std::vector<fs::path> out;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back(exe.parent_path() / kCudaPluginName);
    out.push_back(exe.parent_path().parent_path() / "lib" / "parlab" / kCudaPluginName);
  }
#ifdef PARLAB_CUDA_PLUGIN_BUILD_PATH
  out.emplace_back(PARLAB_CUDA_PLUGIN_BUILD_PATH);  // tests and benches run from the build tree
#endif
  return out;
}

// dlerror() as one line (it may name several reasons).
std::string one_line(const char* text) {
  std::string s = text ? text : "unknown error";
  for (char& c : s)
    if (c == '\n') c = ' ';
  return s;
}
#endif

Loaded load() {
  const std::string id = backend_build_id();
  if (&parlab_cuda_backend_v1 != nullptr) {
    if (const CudaBackend* linked = parlab_cuda_backend_v1(id.c_str())) return {linked, ""};
    return {nullptr, "the GPU backend linked into this program is from another build (" + id + ")"};
  }
#ifndef PARLAB_CUDA_PLUGIN_BUILT
  return {nullptr,
          "this parlab was built without the GPU backend (CUDA/NCCL not found at configure time, or "
          "PARLAB_CUDA=OFF); use --device cpu"};
#else
  std::string tried;
  for (const fs::path& path : candidates()) {
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      tried += (tried.empty() ? "" : ", ") + path.string();
      continue;
    }
    // RTLD_LOCAL: CUDA's symbols stay the plugin's; RTLD_NOW: a missing symbol fails here, not mid-run.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr)
      return {nullptr, "the GPU backend " + path.string() + " could not be loaded (" + one_line(::dlerror()) +
                           "); use --device cpu"};
    auto entry = reinterpret_cast<const CudaBackend* (*)(const char*)>(::dlsym(handle, "parlab_cuda_backend_v1"));
    if (entry == nullptr)
      return {nullptr,
              "the GPU backend " + path.string() + " has no entry point (not a parlab plugin); use --device cpu"};
    const CudaBackend* backend = entry(id.c_str());
    if (backend == nullptr)
      return {nullptr, "the GPU backend " + path.string() + " is from another build than this parlab (" + id +
                           "); reinstall both; use --device cpu"};
    return {backend, ""};  // never unloaded: its objects live as long as the process
  }
  return {nullptr, std::string("the GPU backend ") + kCudaPluginName + " was not found (looked at " + tried +
                       "; PARLAB_CUDA_PLUGIN names it); use --device cpu"};
#endif
}

}  // namespace

// The one place that knows whether CMake built the plugin (runtime/device/CMakeLists.txt).
bool cuda_built() {
#ifdef PARLAB_CUDA_PLUGIN_BUILT
  return true;
#else
  return false;
#endif
}

const CudaBackend* cuda_backend(std::string* why) {
  static std::once_flag once;
  static Loaded loaded;
  std::call_once(once, [] { loaded = load(); });
  if (why != nullptr) *why = loaded.why;
  return loaded.backend;
}

}  // namespace parlab::device
