// The CUDA boundary: checked-call messages, the device query, RAII buffers. The first tests need
// no GPU (they run everywhere CUDA was found at build time); the rest skip without a device.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/gpu/cuda_check.h"
#include "runtime/gpu/device.h"
#include "runtime/gpu/memory.h"
#include "tests/runtime/gpu/gpu_test_support.h"
#include "parlab/source_dir.h"

namespace parlab::compute::cuda {
namespace {

using ::testing::HasSubstr;

TEST(CudaCheck, RuntimeErrorNamesCallLocationAndCudaText) {
  try {
    PARLAB_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const CudaError& e) {
    const std::string what = e.what();
    std::printf("  %s\n", what.c_str());
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
    EXPECT_THAT(what, HasSubstr("cudaErrorInvalidValue"));                    // the enum name
    EXPECT_THAT(what, HasSubstr("tests/runtime/gpu/cuda_basics_test.cpp:"));  // file:line
    EXPECT_THAT(what, ::testing::Not(HasSubstr(PARLAB_SOURCE_DIR)));          // no build paths
  }
  // A typed error: callers can catch parlab::RuntimeError.
  EXPECT_THROW(PARLAB_CUDA_CHECK(cudaErrorMemoryAllocation), RuntimeError);
  EXPECT_NO_THROW(PARLAB_CUDA_CHECK(cudaSuccess));
}

TEST(CudaCheck, CublasErrorNamesTheStatus) {
  try {
    PARLAB_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
    FAIL() << "no exception";
  } catch (const CublasError& e) {
    const std::string what = e.what();
    std::printf("  %s\n", what.c_str());
    EXPECT_EQ(e.status(), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_THAT(what, HasSubstr("CUBLAS_STATUS_NOT_INITIALIZED"));
    EXPECT_THAT(what, HasSubstr("cuda_basics_test.cpp:"));
  }
}

TEST(DeviceInfo, PeakFiguresFromTheDatasheetFormula) {
  // H200 SXM: 132 SMs of 128 fp32 lanes at 1.98 GHz boost, FMA = 2 FLOPs:
  //   132 * 128 * 2 * 1.98e9 = 66.908e12 FLOP/s (NVIDIA quotes 67 TFLOPS fp32).
  DeviceInfo h200;
  h200.sm_count = 132;
  h200.cc_major = 9;
  h200.cc_minor = 0;
  h200.clock_hz = 1.98e9;
  EXPECT_NEAR(h200.fp32_peak_flops_per_s(), 66.908e12, 0.001e12);
  // HBM: 2619 MHz x 2 (DDR) x 5120 bits / 8 = 3.352e12 B/s (H100 SXM's 3.35 TB/s).
  h200.memory_clock_hz = 2.619e9;
  h200.memory_bus_bits = 5120;
  EXPECT_NEAR(h200.memory_peak_bytes_per_s(), 3.352e12, 0.001e12);
  DeviceInfo unknown;
  unknown.cc_major = 1;
  unknown.sm_count = 10;
  unknown.clock_hz = 1e9;
  EXPECT_EQ(unknown.fp32_peak_flops_per_s(), 0.0);  // unknown architecture: no made-up peak
}

TEST(DeviceQuery, EitherDevicesOrAReasonNeverAnException) {
  DeviceList list;
  ASSERT_NO_THROW(list = cuda_devices());
  if (list.devices.empty()) {
    std::printf("  no device, reason: %s\n", list.reason.c_str());
    EXPECT_FALSE(list.reason.empty());
    return;
  }
  EXPECT_TRUE(list.reason.empty());
  for (size_t i = 0; i < list.devices.size(); ++i) {
    const DeviceInfo& d = list.devices[i];
    std::printf("  %s: peak %.1f TFLOP/s fp32, %.0f GB/s\n", d.describe().c_str(), d.fp32_peak_flops_per_s() / 1e12,
                d.memory_peak_bytes_per_s() / 1e9);
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GT(d.memory_bytes, 0);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GE(d.cc_major, 3);
  }
}

TEST(DeviceBuffer, WithoutADeviceAllocationFailsWithATypedError) {
  if (!gpu_test::devices().devices.empty()) GTEST_SKIP() << "a CUDA device exists";
  EXPECT_THROW(DeviceBuffer<float>(16), CudaError);
  EXPECT_THROW(Stream(), CudaError);
}

TEST(DeviceBuffer, RoundTripAndZero) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  DeviceGuard guard(0);
  Stream stream;
  const std::vector<float> host = gpu_test::random_normal(1000, 1);
  DeviceBuffer<float> buf(host.size());
  EXPECT_EQ(buf.bytes(), 4000u);
  buf.upload(host, stream.get());
  std::vector<float> back(host.size(), -1.0f);
  buf.download(back, stream.get());
  EXPECT_TRUE(gpu_test::bitwise_equal(back, host));
  buf.zero(stream.get());
  buf.download(back, stream.get());
  EXPECT_EQ(back, std::vector<float>(host.size(), 0.0f));
  std::vector<float> wrong(999);
  EXPECT_THROW(buf.download(wrong, stream.get()), ConfigError);
}

TEST(Events, TimeDeviceWork) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  DeviceGuard guard(0);
  Stream stream;
  DeviceBuffer<float> a(1 << 24), b(1 << 24);
  Event start, end;
  start.record(stream.get());
  copy_on_device(b.data(), a.data(), a.bytes(), stream.get());
  end.record(stream.get());
  end.synchronize();
  EXPECT_TRUE(end.ready());
  EXPECT_GT(end.seconds_since(start), 0.0);  // 64 MiB cannot be copied in zero time
}

}  // namespace
}  // namespace parlab::compute::cuda
