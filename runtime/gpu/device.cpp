#include "runtime/gpu/device.h"

#include <cuda_runtime_api.h>

#include <cstdio>

#include "runtime/gpu/cuda_check.h"

namespace parlab::compute::cuda {

int DeviceInfo::fp32_lanes_per_sm() const {
  // CUDA C Programming Guide, "Arithmetic Instructions" throughput table (32-bit floating-point
  // add, multiply, multiply-add per clock per SM).
  const int cc = cc_major * 10 + cc_minor;
  switch (cc) {
    case 70:
    case 72:
    case 75:
    case 80:
      return 64;
    case 86:
    case 87:
    case 89:
    case 90:
    case 100:
    case 101:
    case 103:
    case 110:
    case 120:
    case 121:
      return 128;
    default:
      return 0;
  }
}

double DeviceInfo::fp32_peak_flops_per_s() const {
  return static_cast<double>(sm_count) * fp32_lanes_per_sm() * 2.0 * clock_hz;
}

double DeviceInfo::memory_peak_bytes_per_s() const { return memory_clock_hz * 2.0 * memory_bus_bits / 8.0; }

std::string DeviceInfo::describe() const {
  char text[256];
  std::snprintf(text, sizeof text, "%s (sm_%d%d, %d SMs, %.1f GiB)", name.c_str(), cc_major, cc_minor, sm_count,
                static_cast<double>(memory_bytes) / (1024.0 * 1024 * 1024));
  return text;
}

namespace {

// Attributes some drivers leave unset (clock rates on some virtualised GPUs): 0, not a failure.
int attribute_or_zero(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, attr, device) != cudaSuccess) {
    cudaGetLastError();  // do not leave the error for the next caller to find
    return 0;
  }
  return value;
}

DeviceInfo query(int device) {
  cudaDeviceProp prop{};
  PARLAB_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.index = device;
  info.name = prop.name;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  info.sm_count = prop.multiProcessorCount;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  // CUDA 13 dropped the clock fields from cudaDeviceProp; the attributes remain (kHz).
  info.clock_hz = 1e3 * attribute_or_zero(cudaDevAttrClockRate, device);
  info.memory_clock_hz = 1e3 * attribute_or_zero(cudaDevAttrMemoryClockRate, device);
  info.memory_bus_bits = attribute_or_zero(cudaDevAttrGlobalMemoryBusWidth, device);
  return info;
}

}  // namespace

DeviceList cuda_devices() {
  DeviceList list;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    list.reason = "cudaGetDeviceCount: " + describe(status);
    return list;
  }
  if (count == 0) {
    list.reason = "cudaGetDeviceCount found 0 devices";
    return list;
  }
  try {
    for (int d = 0; d < count; ++d) list.devices.push_back(query(d));
  } catch (const CudaError& e) {
    list.devices.clear();
    list.reason = e.what();
  }
  return list;
}

DeviceGuard::DeviceGuard(int device) {
  PARLAB_CUDA_CHECK(cudaGetDevice(&previous_));
  PARLAB_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);  // cannot fail for an ordinal that worked before
}

}  // namespace parlab::compute::cuda
