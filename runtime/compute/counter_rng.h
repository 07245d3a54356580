#pragma once
// Counter-based random numbers: value = f(seed, stream, counter), no hidden state.
//
// Generator: SplitMix64 (Steele, Lea & Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014) read at an arbitrary position. SplitMix64's n-th output (n = 0, 1, ...) is
//     mix64(key + (n + 1) * gamma),   gamma = 0x9e3779b97f4a7c15,
// so output n is computed directly from n: a rank can draw sample i's numbers, or weight j's
// initial value, without generating anything before it. That is what makes parameter init
// independent of world size and lets any rank produce any sample.
// The key of a (seed, stream, substream) triple is mix64 chained over the three words, so
// different seeds / streams give unrelated sequences (sequences of length n overlap only if two
// 64-bit keys land within n*gamma of each other: probability ~ n / 2^64).
#include <cstdint>

namespace parlab::compute {

// Stafford's "Mix13" finaliser used by SplitMix64 (and java.util.SplittableRandom).
constexpr uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

inline constexpr uint64_t kSplitMixGamma = 0x9e3779b97f4a7c15ull;

// Streams used inside parlab; one per kind of random quantity, so that e.g. changing how many
// data samples exist never changes the initial weights.
enum class RngStream : uint64_t {
  kParamInit = 1,     // counter = flat parameter offset
  kDataInput = 2,     // counter = sample * width + feature
  kDataTeacher = 3,   // counter = class * width + feature
  kEpochShuffle = 4,  // substream = epoch, counter = Fisher-Yates position
};

class CounterRng {
 public:
  CounterRng(uint64_t seed, RngStream stream, uint64_t substream = 0);

  // 64 random bits for this counter.
  uint64_t bits(uint64_t counter) const { return mix64(key_ + (counter + 1) * kSplitMixGamma); }
  // Uniform on [0, 1) with 53 random bits.
  double uniform(uint64_t counter) const;
  // Uniform on (0, 1]: safe inside log().
  double uniform_open_low(uint64_t counter) const;
  // Standard normal by Box-Muller, z = sqrt(-2 ln u1) cos(2 pi u2), with u1 from counter 2c and
  // u2 from counter 2c + 1 (the sine partner is not used, so normal(c) depends on c alone).
  double normal(uint64_t counter) const;
  // Integer in [0, n) by Lemire's multiply-high: floor(bits * n / 2^64). The bias is below
  // n / 2^64, irrelevant for shuffles of any realistic size. n must be > 0.
  uint64_t below(uint64_t counter, uint64_t n) const;

 private:
  uint64_t key_;
};

}  // namespace parlab::compute
