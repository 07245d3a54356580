// Deterministic test inputs for the CPU kernel tests: n standard-normal floats from the counter RNG.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/compute/counter_rng.h"

namespace parlab::compute::cpu::testing {

inline std::vector<float> random_vector(int64_t n, uint64_t seed) {
  const CounterRng rng(seed, RngStream::kDataInput);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(rng.normal(i));
  return v;
}

}  // namespace parlab::compute::cpu::testing
