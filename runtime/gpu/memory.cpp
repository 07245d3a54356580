#include "runtime/gpu/memory.h"

#include <string>

namespace parlab::compute::cuda {

DeviceAllocation::DeviceAllocation(std::size_t bytes) : bytes_(bytes) {
  if (bytes > 0) PARLAB_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
}

DeviceAllocation::~DeviceAllocation() {
  if (ptr_ != nullptr) cudaFree(ptr_);
}

void copy_to_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  PARLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

void copy_to_host_sync(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  PARLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream));
  PARLAB_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void copy_on_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  PARLAB_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

void zero_on_device(void* dst, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  PARLAB_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, stream));
}

void throw_count_mismatch(std::size_t buffer, std::size_t host) {
  throw ConfigError("host elements", std::to_string(host),
                    "must equal the device buffer's " + std::to_string(buffer) + " elements");
}

Stream::Stream() { PARLAB_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { PARLAB_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event() { PARLAB_CUDA_CHECK(cudaEventCreate(&event_)); }

Event::~Event() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) { PARLAB_CUDA_CHECK(cudaEventRecord(event_, stream)); }

bool Event::ready() const {
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    return false;
  }
  PARLAB_CUDA_CHECK(status);
  return true;
}

void Event::synchronize() const { PARLAB_CUDA_CHECK(cudaEventSynchronize(event_)); }

double Event::seconds_since(const Event& start) const {
  float ms = 0.0f;
  PARLAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return 1e-3 * static_cast<double>(ms);
}

MappedFlag::MappedFlag() {
  void* host = nullptr;
  PARLAB_CUDA_CHECK(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped));
  host_ = static_cast<volatile int*>(host);
  *host_ = 0;
  void* device = nullptr;
  const cudaError_t status = cudaHostGetDevicePointer(&device, host, 0);
  if (status != cudaSuccess) {
    cudaFreeHost(host);
    PARLAB_CUDA_CHECK(status);
  }
  device_ = static_cast<int*>(device);
}

MappedFlag::~MappedFlag() { cudaFreeHost(const_cast<int*>(host_)); }

void MappedFlag::set(int value) { *host_ = value; }

}  // namespace parlab::compute::cuda
