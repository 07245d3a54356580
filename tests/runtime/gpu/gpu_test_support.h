#pragma once
// Shared by the GPU tests: the device list (queried once), the skip macro, random inputs and the
// difference measure every comparison prints.
//
// These tests are compiled whenever CUDA and NCCL were found at configure time. On a machine
// without a usable GPU (no device, no driver) each test that needs one calls GTEST_SKIP() with
// the reason cuda_devices() gave, so the suite reports SKIPPED instead of failing.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/gpu/device.h"

namespace parlab::gpu_test {

// This process's devices (cuda_devices(), called once).
const compute::cuda::DeviceList& devices();

// Skips the current test unless at least `n` CUDA devices exist, saying why.
#define PARLAB_REQUIRE_CUDA_DEVICES(n)                                                           \
  do {                                                                                           \
    const auto& parlab_list_ = ::parlab::gpu_test::devices();                                    \
    if (parlab_list_.devices.empty()) GTEST_SKIP() << "no CUDA device: " << parlab_list_.reason; \
    if (parlab_list_.devices.size() < static_cast<std::size_t>(n)) {                             \
      GTEST_SKIP() << "needs " << (n) << " CUDA devices, found " << parlab_list_.devices.size(); \
    }                                                                                            \
  } while (0)

// n standard normal floats from CounterRng(seed, kDataInput), times `scale`.
std::vector<float> random_normal(int64_t n, uint64_t seed, float scale = 1.0f);
// n labels in [0, classes).
std::vector<int32_t> random_labels(int64_t n, int64_t classes, uint64_t seed);

// max_i |got_i - want_i| / max_j |want_j|: the largest difference relative to the tensor's scale
// (normwise). Element-wise relative differences are meaningless for sums that cancel to ~0,
// where two correct fp32 summation orders differ in every digit. 0 for equal vectors; +inf when
// the sizes differ or a value is NaN.
double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want);
// True when the two vectors hold the same bits.
bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b);
// Prints "  <what>: max diff / max|ref| <d> (tolerance <tol>)".
void report(const std::string& what, double diff, double tolerance);

}  // namespace parlab::gpu_test
