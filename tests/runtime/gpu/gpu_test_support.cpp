#include "tests/runtime/gpu/gpu_test_support.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "runtime/compute/counter_rng.h"

namespace parlab::gpu_test {

const compute::cuda::DeviceList& devices() {
  static const compute::cuda::DeviceList list = [] {
    compute::cuda::DeviceList l = compute::cuda::cuda_devices();
    for (const auto& d : l.devices) {
      std::printf("[gpu] device %d: %s\n", d.index, d.describe().c_str());
    }
    if (l.devices.empty()) std::printf("[gpu] no CUDA device: %s\n", l.reason.c_str());
    return l;
  }();
  return list;
}

std::vector<float> random_normal(int64_t n, uint64_t seed, float scale) {
  const compute::CounterRng rng(seed, compute::RngStream::kDataInput);
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(rng.normal(i));
  return v;
}

std::vector<int32_t> random_labels(int64_t n, int64_t classes, uint64_t seed) {
  const compute::CounterRng rng(seed, compute::RngStream::kDataTeacher);
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(rng.below(i, classes));
  return v;
}

double max_rel_diff(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double scale = 0.0;
  for (float w : want) scale = std::max(scale, std::abs(static_cast<double>(w)));
  double worst = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(g) || std::isnan(w)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, std::abs(g - w));
  }
  if (worst == 0.0) return 0.0;
  return worst / std::max(scale, 1e-30);
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void report(const std::string& what, double diff, double tolerance) {
  std::printf("  %-34s max diff / max|ref| %.3g (tolerance %.0e)\n", what.c_str(), diff, tolerance);
}

}  // namespace parlab::gpu_test
