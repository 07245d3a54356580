#pragma once
// Which CUDA devices this process can use, and what they can do.
//
// cuda_devices() never throws for a machine without a GPU: no device, no driver, a driver older
// than the runtime, or CUDA_VISIBLE_DEVICES="" all give an empty list with the reason, so callers
// (tests, benches, `parlab train --device cuda`) can say "no CUDA device: <reason>" and move on.
#include <cstdint>
#include <string>
#include <vector>

namespace parlab::compute::cuda {

struct DeviceInfo {
  int index = 0;             // CUDA device ordinal (after CUDA_VISIBLE_DEVICES)
  std::string name;          // "NVIDIA H200"
  int64_t memory_bytes = 0;  // total global memory
  int sm_count = 0;
  int cc_major = 0, cc_minor = 0;  // compute capability, 9.0 for Hopper
  double clock_hz = 0;             // peak SM clock as reported by the driver (boost), 0 when unknown
  double memory_clock_hz = 0;      // 0 when unknown
  int memory_bus_bits = 0;         // 0 when unknown

  // fp32 FMA units per SM for this compute capability (128 on sm_86 .. sm_120, 64 on sm_70/80),
  // 0 for an architecture we do not know.
  int fp32_lanes_per_sm() const;
  // Peak non-tensor fp32 rate: SMs x lanes x 2 (an FMA is 2 FLOPs) x clock.
  // H200 SXM: 132 x 128 x 2 x 1.98 GHz = 66.9 TFLOP/s. 0 when unknown.
  double fp32_peak_flops_per_s() const;
  // Peak DRAM bandwidth: memory clock x 2 (double data rate) x bus width / 8. The driver's
  // memory clock for HBM already makes this the datasheet figure (H200: ~4.8 TB/s). 0 when
  // unknown.
  double memory_peak_bytes_per_s() const;
  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
  std::string describe() const;
};

struct DeviceList {
  std::vector<DeviceInfo> devices;
  // Why `devices` is empty ("cudaErrorNoDevice (no CUDA-capable device is detected)"); empty
  // when at least one device was found.
  std::string reason;
};

// Enumerates the devices. Never throws for a missing GPU or driver (see above); a device that
// cannot be queried after it was counted is reported through `reason` too.
DeviceList cuda_devices();

// Makes `device` current on this thread for the lifetime of the guard, then restores the
// previous one (CUDA's current device is per host thread). Throws CudaError on a bad ordinal.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

}  // namespace parlab::compute::cuda
