#pragma once
// RAII for device resources: buffers, streams, events. Every owner is move-only and releases in
// its destructor (never throwing: a failed release during unwinding is ignored, the context is
// going away anyway). Copies between host and device always name a stream: our streams are
// non-blocking, so the legacy default stream would NOT order a copy after their kernels.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

#include "runtime/gpu/cuda_check.h"

namespace parlab::compute::cuda {

// Untyped device allocation; DeviceBuffer<T> is the typed face. Allocated on the CURRENT device
// (see DeviceGuard). cudaMalloc memory is aligned to at least 256 bytes.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  explicit DeviceAllocation(std::size_t bytes);  // throws CudaError (out of memory, no device)
  ~DeviceAllocation();
  DeviceAllocation(DeviceAllocation&& other) noexcept { swap(other); }
  DeviceAllocation& operator=(DeviceAllocation&& other) noexcept {
    DeviceAllocation(std::move(other)).swap(*this);
    return *this;
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* get() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  void swap(DeviceAllocation& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(bytes_, other.bytes_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// Stream-ordered copies (cudaMemcpyAsync), then, for the *_sync forms, cudaStreamSynchronize so
// the host buffer may be reused at once.
void copy_to_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
void copy_to_host_sync(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
void copy_on_device(void* dst, const void* src, std::size_t bytes, cudaStream_t stream);
void zero_on_device(void* dst, std::size_t bytes, cudaStream_t stream);

// `count` elements of T on the device. data() and span() are DEVICE pointers: never dereference
// them on the host.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) : alloc_(count * sizeof(T)), count_(count) {}

  T* data() const { return static_cast<T*>(alloc_.get()); }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }
  std::span<T> span() const { return {data(), count_}; }

  // Host -> device, stream-ordered. `host` must stay alive until the stream reaches the copy
  // (pageable memory is staged by the driver before the call returns, so in practice it may be
  // reused at once; pinned memory may not).
  void upload(std::span<const T> host, cudaStream_t stream) {
    check_count(host.size());
    copy_to_device(data(), host.data(), host.size_bytes(), stream);
  }
  // Device -> host; returns once the data is on the host.
  void download(std::span<T> host, cudaStream_t stream) const {
    check_count(host.size());
    copy_to_host_sync(host.data(), data(), host.size_bytes(), stream);
  }
  void zero(cudaStream_t stream) { zero_on_device(data(), bytes(), stream); }

 private:
  void check_count(std::size_t n) const;
  DeviceAllocation alloc_;
  std::size_t count_ = 0;
};

// Throws ConfigError naming the two element counts.
void throw_count_mismatch(std::size_t buffer, std::size_t host);

template <typename T>
void DeviceBuffer<T>::check_count(std::size_t n) const {
  if (n != count_) throw_count_mismatch(count_, n);
}

// A non-blocking stream on the current device (cudaStreamNonBlocking: no implicit
// synchronisation with the legacy default stream).
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(Stream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  Stream& operator=(Stream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const;  // throws CudaError (also for a sticky fault of an earlier kernel)

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event with timing enabled (elapsed time between two events is how GPU work is timed).
class Event {
 public:
  Event();
  ~Event();
  Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  Event& operator=(Event&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream);
  // cudaEventQuery: true when everything before the record completed; throws CudaError when the
  // query reports a fault (never for "not ready").
  bool ready() const;
  void synchronize() const;
  // Seconds from `start` to this event; both must have completed.
  double seconds_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// A flag in pinned host memory that kernels read through its device alias: the host writes it,
// a spinning kernel sees the write (fault injection: StreamStall in kernels.h).
class MappedFlag {
 public:
  MappedFlag();
  ~MappedFlag();
  MappedFlag(const MappedFlag&) = delete;
  MappedFlag& operator=(const MappedFlag&) = delete;

  void set(int value);
  int* device_pointer() const { return device_; }

 private:
  volatile int* host_ = nullptr;
  int* device_ = nullptr;
};

}  // namespace parlab::compute::cuda
