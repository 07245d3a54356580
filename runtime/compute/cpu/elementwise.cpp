// GCC 12 warns inside its own AVX-512 headers when their intrinsics are inlined here (its bug
// 105593: the _mm512_undefined_* pass-through operands); the header's lines are where it points.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstdint>
#include <string>

#include "base/errors.h"
#include "runtime/compute/cpu/bf16.h"
#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"

namespace parlab::compute::cpu {

void residual_forward(float* out, const float* inp1, const float* inp2, int64_t N) {
  for (int64_t i = 0; i < N; ++i) out[i] = inp1[i] + inp2[i];
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void from_bf16(float* out, const uint16_t* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float_from_bf16(in[i]);
}

namespace {

// Integer arithmetic on the bits, so the loop vectorises (AVX2 clone; and AVX-512 below).
__attribute__((target_clones("avx2", "default"))) void to_bf16_loop(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_from_float(in[i]);
}

// Rows [r0, r1) x columns [c0, c1) of the transposing conversion, element by element in tiles of
// 32 x 32 (the rows read and the columns written stay in L1).
void transpose_block(uint16_t* out, const float* in, int64_t rows, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                     int64_t c1) {
  constexpr int64_t kTile = 32;
  for (int64_t rt = r0; rt < r1; rt += kTile)
    for (int64_t ct = c0; ct < c1; ct += kTile)
      for (int64_t c = ct; c < std::min(c1, ct + kTile); ++c)
        for (int64_t r = rt; r < std::min(r1, rt + kTile); ++r) out[c * rows + r] = bf16_from_float(in[r * cols + c]);
}

// The vector kernels below need AVX-512 F, BW, DQ and VL (every AVX-512 CPU since Skylake-SP;
// has_avx512() checks them), and compile for AVX512-BF16 too: their kNative instances, run only
// where the CPU has it (has_avx512_bf16()), round with its instruction.
#define PARLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))

// bf16_from_float on 16 lanes: the same integer steps, so the same bits; each lane's bf16 in its
// low 16 bits (the high ones zero).
PARLAB_AVX512 inline __m512i bf16_bits32(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
  const __m512i magnitude = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epu32_mask(magnitude, _mm512_set1_epi32(0x7f800000));
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  return _mm512_mask_blend_epi32(nan, rounded, quiet);
}

// The same 16 bf16 packed. kNative: by AVX512-BF16's vcvtneps2bf16, which rounds to nearest even
// as bf16_from_float does in one instruction where the integer steps take ten, but reads a
// denormal as zero and quiets NaNs its own way: a vector with such a lane (vfpclassps finds them)
// takes the integer steps, so the bits are the same either way.
template <bool kNative>
PARLAB_AVX512 inline __m256i bf16_from_float16(__m512 x) {
  if constexpr (kNative) {
    constexpr int kNanOrDenormal = 0x01 | 0x20 | 0x80;  // QNaN, denormal, SNaN
    if (__builtin_expect(_mm512_fpclass_ps_mask(x, kNanOrDenormal) == 0, 1))
      return reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(x));
  }
  return _mm512_cvtepi32_epi16(bf16_bits32(x));
}

// bf16_bits32's lanes from bf16_from_float16<kNative>.
template <bool kNative>
PARLAB_AVX512 inline __m512i bf16_bits32_as(__m512 x) {
  if constexpr (kNative) return _mm512_cvtepu16_epi32(bf16_from_float16<true>(x));
  return bf16_bits32(x);
}

// Transposes 16 rows of 16 floats in registers: r[j] becomes column j (the textbook network:
// pairs, quads, then 128-bit lanes twice).
PARLAB_AVX512 inline void transpose16(__m512* r) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int j = 0; j < 4; ++j) {
    t[j] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0x88);
    t[j + 4] = _mm512_shuffle_f32x4(r[j], r[4 + j], 0xdd);
    t[j + 8] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0x88);
    t[j + 12] = _mm512_shuffle_f32x4(r[8 + j], r[12 + j], 0xdd);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0x88);
    r[j + 8] = _mm512_shuffle_f32x4(t[j], t[j + 8], 0xdd);
    r[j + 4] = _mm512_shuffle_f32x4(t[j + 4], t[j + 12], 0x88);
    r[j + 12] = _mm512_shuffle_f32x4(t[j + 4], t[j + 12], 0xdd);
  }
}

// Rows [r0, r1) (bands of 32) x columns [0, c1) (blocks of 16): each block's 16 output rows get
// one whole 64-byte line each, written with a streaming store. An ordinary store would first read
// the line it lands on, and the transposed lines lie a whole output row apart: that read made the
// conversion 3x slower than to_bf16 on the lab's weights. Needs out + c * rows + r0 64-byte
// aligned for every c (the caller picks r0 and rows so).
template <bool kNative>
PARLAB_AVX512 void transpose_bands_avx512(uint16_t* out, const float* in, int64_t rows, int64_t cols, int64_t r0,
                                          int64_t r1, int64_t c1) {
  for (int64_t r = r0; r < r1; r += 32)
    for (int64_t c = 0; c < c1; c += 16) {
      __m512 top[16], bottom[16];
      for (int i = 0; i < 16; ++i) {
        top[i] = _mm512_loadu_ps(in + (r + i) * cols + c);
        bottom[i] = _mm512_loadu_ps(in + (r + 16 + i) * cols + c);
      }
      transpose16(top);
      transpose16(bottom);
      for (int j = 0; j < 16; ++j) {
        const __m512i line = _mm512_inserti64x4(_mm512_castsi256_si512(bf16_from_float16<kNative>(top[j])),
                                                bf16_from_float16<kNative>(bottom[j]), 1);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + (c + j) * rows + r), line);
      }
    }
  _mm_sfence();  // the streaming stores are weakly ordered: done before anyone reads the copy
}

bool has_avx512() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return yes;
}

bool has_avx512_bf16() {
  static const bool yes = has_avx512() && __builtin_cpu_supports("avx512bf16");
  return yes;
}

// 16 elements a step with 512-bit registers: GCC vectorises to_bf16_loop's mix of 32- and 16-bit
// lanes in 256-bit registers only (its "avx512f" clone was 1.6x slower than this on data in L2).
template <bool kNative>
PARLAB_AVX512 void to_bf16_avx512(uint16_t* out, const float* in, int64_t n) {
  for (int64_t i = 0; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), bf16_from_float16<kNative>(_mm512_loadu_ps(in + i)));
}

// The blocked layout of to_bf16_k32n64_blocked: op(B)'s element (k, n) at this offset.
constexpr int64_t kBlockK = 32, kBlockN = 64;
inline int64_t blocked_offset(int64_t k, int64_t n, int64_t K) {
  return (n / kBlockN * (K / kBlockK) + k / kBlockK) * (kBlockK * kBlockN) + (k % kBlockK) / 2 * (2 * kBlockN) +
         n % kBlockN * 2 + k % 2;
}

void blocked_loop(uint16_t* out, const float* B, int64_t K, int64_t N, bool b_transposed) {
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n)
      out[blocked_offset(k, n, K)] = bf16_from_float(b_transposed ? B[n * K + k] : B[k * N + n]);
}

// One 64-byte line of a blocked copy: with a streaming store where the copy is 64-byte aligned
// (every line of it then is). An ordinary store first reads the line it lands on.
PARLAB_AVX512 inline void store_line(uint16_t* at, __m512i line, bool stream) {
  if (stream)
    _mm512_stream_si512(reinterpret_cast<__m512i*>(at), line);
  else
    _mm512_storeu_si512(at, line);
}

bool line_aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 64 == 0; }

// op(B) = B (K, N) row-major, rows [k0, k1) (k0, k1 even): each 32-bit word of a block is the
// pair (k, k + 1) at one n, so two rows' 16 lanes make 16 words, written in order.
template <bool kNative>
PARLAB_AVX512 void blocked_rows_avx512(uint16_t* out, const float* B, int64_t K, int64_t N, int64_t k0, int64_t k1,
                                       bool stream) {
  for (int64_t nb = 0; nb < N; nb += kBlockN)
    for (int64_t k = k0; k < k1; k += 2) {
      uint16_t* line = out + blocked_offset(k, nb, K);
      const float* row = B + k * N + nb;
      for (int64_t n = 0; n < kBlockN; n += 16) {
        const __m512i low = bf16_bits32_as<kNative>(_mm512_loadu_ps(row + n));
        const __m512i high = bf16_bits32_as<kNative>(_mm512_loadu_ps(row + N + n));
        store_line(line + 2 * n, _mm512_or_si512(low, _mm512_slli_epi32(high, 16)), stream);
      }
    }
}

// op(B) = B^T, B stored (N, K), its rows [n0, n1) (multiples of 16): a row n of B holds the
// block's 16 pairs at that n consecutively (32 k); 16 such rows, each 16 words, transposed in
// registers give 16 lines of 16 n per pair.
template <bool kNative>
PARLAB_AVX512 void blocked_transposed_avx512(uint16_t* out, const float* B, int64_t K, int64_t n0, int64_t n1,
                                             bool stream) {
  for (int64_t n = n0; n < n1; n += 16)
    for (int64_t kb = 0; kb < K; kb += kBlockK) {
      __m512 words[16];
      for (int i = 0; i < 16; ++i) {
        const float* row = B + (n + i) * K + kb;
        const __m256i first = bf16_from_float16<kNative>(_mm512_loadu_ps(row));
        const __m256i second = bf16_from_float16<kNative>(_mm512_loadu_ps(row + 16));
        words[i] = _mm512_castsi512_ps(_mm512_inserti64x4(_mm512_castsi256_si512(first), second, 1));
      }
      transpose16(words);
      for (int pair = 0; pair < 16; ++pair)
        store_line(out + blocked_offset(kb + 2 * pair, n, K), _mm512_castps_si512(words[pair]), stream);
    }
}

}  // namespace

void to_bf16_k32n64_blocked(uint16_t* out, const float* B, int64_t K, int64_t N, bool b_transposed) {
  if (K % kBlockK != 0 || N % kBlockN != 0)
    throw RuntimeError("to_bf16_k32n64_blocked: " + std::to_string(K) + " x " + std::to_string(N) +
                       " is not whole blocks of 32 x 64");
  if (!has_avx512()) return blocked_loop(out, B, K, N, b_transposed);
  const bool stream = line_aligned(out), native = has_avx512_bf16();
  if (b_transposed)
    (native ? blocked_transposed_avx512<true> : blocked_transposed_avx512<false>)(out, B, K, 0, N, stream);
  else
    (native ? blocked_rows_avx512<true> : blocked_rows_avx512<false>)(out, B, K, N, 0, K, stream);
  if (stream) _mm_sfence();  // the streaming stores are weakly ordered: done before anyone reads the copy
}

void to_bf16_k32n64_blocked_pair(uint16_t* forward, uint16_t* input_grad, const float* W, int64_t OC, int64_t C) {
  if (OC % kBlockN != 0 || C % kBlockN != 0)
    throw RuntimeError("to_bf16_k32n64_blocked_pair: " + std::to_string(OC) + " x " + std::to_string(C) +
                       " is not whole blocks of 64 x 64");
  if (!has_avx512()) {
    blocked_loop(forward, W, C, OC, true);
    blocked_loop(input_grad, W, OC, C, false);
    return;
  }
  // Bands of 16 rows of W (16 x C floats, in L2 for C up to 16K): the forward's copy reads them
  // from memory, the input gradient's again from the cache.
  constexpr int64_t kBand = 16;
  const bool stream_forward = line_aligned(forward), stream_input_grad = line_aligned(input_grad);
  const bool native = has_avx512_bf16();
  const auto transposed = native ? blocked_transposed_avx512<true> : blocked_transposed_avx512<false>;
  const auto rows = native ? blocked_rows_avx512<true> : blocked_rows_avx512<false>;
  for (int64_t r = 0; r < OC; r += kBand) {
    transposed(forward, W, C, r, r + kBand, stream_forward);
    rows(input_grad, W, OC, C, r, r + kBand, stream_input_grad);
  }
  if (stream_forward || stream_input_grad) _mm_sfence();
}

void to_bf16(uint16_t* out, const float* in, int64_t n) {
  int64_t done = 0;
  if (has_avx512()) {
    done = n / 16 * 16;
    (has_avx512_bf16() ? to_bf16_avx512<true> : to_bf16_avx512<false>)(out, in, done);
  }
  to_bf16_loop(out + done, in + done, n - done);
}

void to_bf16_transposed(uint16_t* out, const float* in, int64_t rows, int64_t cols) {
  // The vector kernel covers the bands whose output lines are 64-byte aligned: from the first row
  // where out is, in every output row when rows is a multiple of 32. The rest goes element-wise.
  int64_t r0 = 0, r1 = 0, c1 = 0;
  if (has_avx512() && rows > 0 && cols > 0 && rows % 32 == 0) {
    r0 = static_cast<int64_t>((64 - reinterpret_cast<uintptr_t>(out) % 64) % 64) / 2;
    r1 = r0 + (rows - r0) / 32 * 32;
    c1 = cols / 16 * 16;
    if (r1 > r0 && c1 > 0)
      (has_avx512_bf16() ? transpose_bands_avx512<true> : transpose_bands_avx512<false>)(out, in, rows, cols, r0, r1,
                                                                                         c1);
  }
  transpose_block(out, in, rows, cols, 0, r0, 0, cols);
  transpose_block(out, in, rows, cols, r1, rows, 0, cols);
  transpose_block(out, in, rows, cols, r0, r1, c1, cols);
}

}  // namespace parlab::compute::cpu
