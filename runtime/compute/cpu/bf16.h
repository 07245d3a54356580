#pragma once
// One bf16 element to and from fp32, inline so element-wise loops vectorise around them.
// Round to nearest even, as vcvtneps2bf16 does: add 0x7fff plus the lowest kept bit, then
// truncate; a NaN stays a quiet NaN (the carry could otherwise turn one into infinity).
#include <cstdint>
#include <cstring>

namespace parlab::compute::cpu {

inline uint16_t bf16_from_float(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const bool nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>(nan ? ((u >> 16) | 0x40u) : rounded);
}

inline float float_from_bf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace parlab::compute::cpu
