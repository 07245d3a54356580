#include "runtime/compute/counter_rng.h"

#include <cmath>
#include <numbers>

namespace parlab::compute {

CounterRng::CounterRng(uint64_t seed, RngStream stream, uint64_t substream) {
  // Each word goes through mix64 after an additive constant so that zeros do not stay zeros
  // (mix64(0) == 0).
  uint64_t k = mix64(seed + kSplitMixGamma);
  k = mix64(k ^ (static_cast<uint64_t>(stream) + kSplitMixGamma));
  k = mix64(k ^ (substream + 2 * kSplitMixGamma));
  key_ = k;
}

double CounterRng::uniform(uint64_t counter) const { return static_cast<double>(bits(counter) >> 11) * 0x1.0p-53; }

double CounterRng::uniform_open_low(uint64_t counter) const {
  return static_cast<double>((bits(counter) >> 11) + 1) * 0x1.0p-53;
}

double CounterRng::normal(uint64_t counter) const {
  const double u1 = uniform_open_low(2 * counter);
  const double u2 = uniform(2 * counter + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

uint64_t CounterRng::below(uint64_t counter, uint64_t n) const {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(bits(counter)) * n) >> 64);
}

}  // namespace parlab::compute
