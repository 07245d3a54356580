// The matmul backends (oneDNN, OpenBLAS), bf16 conversion and products, and the fused bias+GELU
// kernels, each against an independent computation: naive double loops, hand-worked bf16 bit
// patterns, or the unfused kernels they replace (bit for bit).
#include "runtime/compute/cpu/matmul.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "base/errors.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/bf16.h"
#include "runtime/compute/counter_rng.h"
#include "tests/runtime/compute/random_vector.h"
#include "runtime/compute/cpu/kernels.h"

namespace parlab::compute::cpu {
namespace {

using testing::random_vector;

// C (+)= op(A) op(B) + bias in double, row-major, as matmul.h defines it.
std::vector<double> naive(const GemmShape& s, const std::vector<float>& A, const std::vector<float>& B,
                          const std::vector<float>& C0, const float* bias) {
  std::vector<double> C(s.M * s.N);
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t n = 0; n < s.N; ++n) {
      double acc = s.accumulate ? C0[m * s.N + n] : 0.0;
      if (bias != nullptr) acc += bias[n];
      for (int64_t k = 0; k < s.K; ++k) {
        const double a = s.trans_a ? A[k * s.M + m] : A[m * s.K + k];
        const double b = s.trans_b ? B[n * s.K + k] : B[k * s.N + n];
        acc += a * b;
      }
      C[m * s.N + n] = acc;
    }
  return C;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<double>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), 1.0));
  return worst;
}

// x rounded to bf16: the bits the bf16 products take, and their exact fp32 values (what a
// reference on the rounded inputs multiplies).
struct Bf16Rounded {
  std::vector<uint16_t> bits;
  std::vector<float> values;
};
Bf16Rounded bf16_rounded(const std::vector<float>& x) {
  Bf16Rounded r{std::vector<uint16_t>(x.size()), std::vector<float>(x.size())};
  to_bf16(r.bits.data(), x.data(), static_cast<int64_t>(x.size()));
  from_bf16(r.values.data(), r.bits.data(), static_cast<int64_t>(x.size()));
  return r;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<GemmShape> shapes() {
  std::vector<GemmShape> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true})
        out.push_back({.M = 7, .N = 33, .K = 19, .trans_a = ta, .trans_b = tb, .accumulate = acc});
  return out;
}

class MatmulTest : public ::testing::Test {
 protected:
  void SetUp() override { pin_blas_to_one_thread(); }
};

TEST_F(MatmulTest, EveryFp32BackendMatchesNaiveDoubleForEveryTransposeAndMode) {
  using Fn = void (*)(const GemmShape&, const float*, const float*, float*, const float*);
  std::vector<std::pair<const char*, Fn>> backends{{"openblas", openblas_gemm_f32}, {"gemm_f32", gemm_f32}};
  if (matmul_backend_name() != "OpenBLAS sgemm") backends.push_back({"onednn", onednn_gemm_f32});
  for (const auto& [name, fn] : backends)
    for (const GemmShape& s : shapes())
      for (bool with_bias : {false, true}) {
        const auto A = random_vector(s.M * s.K, 1), B = random_vector(s.K * s.N, 2), bias = random_vector(s.N, 3);
        const auto C0 = random_vector(s.M * s.N, 4);
        std::vector<float> C = C0;
        fn(s, A.data(), B.data(), C.data(), with_bias ? bias.data() : nullptr);
        const auto want = naive(s, A, B, C0, with_bias ? bias.data() : nullptr);
        EXPECT_LT(max_rel_diff(C, want), 1e-5)
            << name << " ta=" << s.trans_a << " tb=" << s.trans_b << " acc=" << s.accumulate << " bias=" << with_bias;
      }
}

// Shapes with M small and N >= 8 M (the transposed route's, for trans_b products), every transpose.
std::vector<GemmShape> wide_shapes() {
  std::vector<GemmShape> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool acc : {false, true})
        out.push_back({.M = 5, .N = 70, .K = 23, .trans_a = ta, .trans_b = tb, .accumulate = acc});
  return out;
}

TEST_F(MatmulTest, TransposedRouteMatchesNaiveDoubleForEveryTransposeAndMode) {
  if (matmul_backend_name() == "OpenBLAS sgemm") GTEST_SKIP() << "built without oneDNN";
  for (const GemmShape& s : wide_shapes())
    for (bool with_bias : {false, true}) {
      const auto A = random_vector(s.M * s.K, 21), B = random_vector(s.K * s.N, 22), bias = random_vector(s.N, 23);
      const auto C0 = random_vector(s.M * s.N, 24);
      std::vector<float> C = C0;
      onednn_gemm_f32_transposed(s, A.data(), B.data(), C.data(), with_bias ? bias.data() : nullptr);
      EXPECT_LT(max_rel_diff(C, naive(s, A, B, C0, with_bias ? bias.data() : nullptr)), 1e-5)
          << "ta=" << s.trans_a << " tb=" << s.trans_b << " acc=" << s.accumulate << " bias=" << with_bias;
      if (!bf16_supported()) continue;
      const auto [Ab, Ar] = bf16_rounded(A);
      const auto [Bb, Br] = bf16_rounded(B);
      std::vector<float> Cb = C0;
      onednn_gemm_bf16_transposed(s, Ab.data(), Bb.data(), Cb.data(), with_bias ? bias.data() : nullptr);
      EXPECT_LT(max_rel_diff(Cb, naive(s, Ar, Br, C0, with_bias ? bias.data() : nullptr)), 1e-5)
          << "bf16 ta=" << s.trans_a << " tb=" << s.trans_b << " acc=" << s.accumulate << " bias=" << with_bias;
    }
}

// The panel route cuts K into panels of 128 rows of B: K = 300 gives two whole panels and a
// ragged one, so the first panel's write (or accumulate, with the bias) and the later panels'
// sums are all exercised, against the naive double product and against one whole oneDNN call.
TEST_F(MatmulTest, PanelRouteMatchesNaiveDoubleAndTheWholeProductInBothModes) {
  if (matmul_backend_name() == "OpenBLAS sgemm") GTEST_SKIP() << "built without oneDNN";
  for (bool acc : {false, true})
    for (bool with_bias : {false, true}) {
      const GemmShape s{.M = 9, .N = 70, .K = 300, .accumulate = acc};
      const auto A = random_vector(s.M * s.K, 31), B = random_vector(s.K * s.N, 32), bias = random_vector(s.N, 33);
      const auto C0 = random_vector(s.M * s.N, 34);
      std::vector<float> panels = C0, whole = C0;
      onednn_gemm_f32_panels(s, A.data(), B.data(), panels.data(), with_bias ? bias.data() : nullptr);
      onednn_gemm_f32(s, A.data(), B.data(), whole.data(), with_bias ? bias.data() : nullptr);
      const auto want = naive(s, A, B, C0, with_bias ? bias.data() : nullptr);
      // K = 300 terms of size ~1 each: fp32 sums in any order are within ~K * 2^-24 relative.
      EXPECT_LT(max_rel_diff(panels, want), 1e-5) << "acc=" << acc << " bias=" << with_bias;
      EXPECT_LT(max_rel_diff(whole, want), 1e-5) << "acc=" << acc << " bias=" << with_bias;
    }
  const GemmShape transposed{.M = 4, .N = 8, .K = 300, .trans_b = true};
  std::vector<float> A(4 * 300), B(300 * 8), C(4 * 8);
  EXPECT_THROW(onednn_gemm_f32_panels(transposed, A.data(), B.data(), C.data()), RuntimeError);
}

TEST_F(MatmulTest, LabShapesTakeTheMeasuredRoutes) {
  if (matmul_backend_name() == "OpenBLAS sgemm") GTEST_SKIP() << "built without oneDNN";
  const GemmShape forward{.M = 64, .N = 4096, .K = 1024, .trans_a = false, .trans_b = true};
  const GemmShape dinp{.M = 64, .N = 1024, .K = 4096, .trans_a = false, .trans_b = false, .accumulate = true};
  const GemmShape dweight{.M = 4096, .N = 1024, .K = 64, .trans_a = true, .trans_b = false, .accumulate = true};
  const GemmShape head{.M = 64, .N = 16, .K = 1024, .trans_a = false, .trans_b = true};
  EXPECT_EQ(f32_route(forward), GemmRoute::kTransposed);
  EXPECT_EQ(f32_route(dinp), GemmRoute::kPanels);
  EXPECT_EQ(f32_route(dweight), openblas_runs_avx512() ? GemmRoute::kOpenBlas : GemmRoute::kDirect);
  EXPECT_EQ(f32_route(head), GemmRoute::kDirect);
  EXPECT_EQ(bf16_route(forward), GemmRoute::kTransposed);
  EXPECT_EQ(bf16_route(dinp), GemmRoute::kDirect);
  // The input gradient on its prepared weight reads W^T (C, OC) transposed: the transposed route.
  EXPECT_EQ(bf16_route({.M = 64, .N = 1024, .K = 4096, .trans_b = true, .accumulate = true}), GemmRoute::kTransposed);
  EXPECT_EQ(bf16_route(dweight), GemmRoute::kDirect);
  // and gemm_f32 gives exactly what its route gives
  for (const GemmShape& s : {forward, dinp, dweight}) {
    const int64_t a = s.M * s.K, b = s.K * s.N;
    const auto A = random_vector(a, 25), B = random_vector(b, 26), C0 = random_vector(s.M * s.N, 27);
    std::vector<float> got = C0, want = C0;
    gemm_f32(s, A.data(), B.data(), got.data());
    if (f32_route(s) == GemmRoute::kOpenBlas)
      openblas_gemm_f32(s, A.data(), B.data(), want.data());
    else if (f32_route(s) == GemmRoute::kPanels)
      onednn_gemm_f32_panels(s, A.data(), B.data(), want.data());
    else if (f32_route(s) == GemmRoute::kDirect)
      onednn_gemm_f32(s, A.data(), B.data(), want.data());
    else
      onednn_gemm_f32_transposed(s, A.data(), B.data(), want.data());
    EXPECT_TRUE(bitwise_equal(got, want)) << "M=" << s.M;
  }
}

TEST_F(MatmulTest, Fp32BackendGivesTheSameBitsRunToRunOnALabShape) {
  // The kill-and-resume proof needs identical bits for identical inputs, wherever the buffers
  // happen to live: run the same product on fresh copies and compare.
  const GemmShape s{.M = 64, .N = 1024, .K = 256, .trans_a = false, .trans_b = true, .accumulate = true};
  const auto A = random_vector(s.M * s.K, 5), B = random_vector(s.N * s.K, 6), C0 = random_vector(s.M * s.N, 7);
  std::vector<float> first = C0;
  gemm_f32(s, A.data(), B.data(), first.data());
  for (int run = 0; run < 3; ++run) {
    const std::vector<float> a2 = A, b2 = B;
    std::vector<float> c2 = C0;
    gemm_f32(s, a2.data(), b2.data(), c2.data());
    EXPECT_TRUE(bitwise_equal(first, c2)) << "run " << run;
  }
}

TEST_F(MatmulTest, Bf16RoundsToNearestEvenLikeTheHardware) {
  // 1 = 0x3f800000. bf16 keeps 7 mantissa bits; the next value up is 1 + 2^-7 (0x3f81).
  //   1 + 2^-8   is halfway: ties to even  -> 0x3f80
  //   1 + 3*2^-8 is halfway between 0x3f81 and 0x3f82: ties to even -> 0x3f82
  //   1 + 2^-8 + 2^-20 is above halfway    -> 0x3f81
  const std::vector<float> in{1.0f,
                              1.0f + 0x1p-8f,
                              1.0f + 3 * 0x1p-8f,
                              1.0f + 0x1p-8f + 0x1p-20f,
                              -2.0f,
                              std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::max()};
  std::vector<uint16_t> out(in.size());
  to_bf16(out.data(), in.data(), static_cast<int64_t>(in.size()));
  EXPECT_EQ(out[0], 0x3f80);
  EXPECT_EQ(out[1], 0x3f80);
  EXPECT_EQ(out[2], 0x3f82);
  EXPECT_EQ(out[3], 0x3f81);
  EXPECT_EQ(out[4], 0xc000);
  EXPECT_EQ(out[5], 0x7f80);
  EXPECT_EQ(out[6] & 0x7fc0, 0x7fc0);  // still a NaN, not infinity
  EXPECT_EQ(out[7], 0x7f80);           // FLT_MAX rounds up to infinity, as the hardware does
  std::vector<float> back(in.size());
  from_bf16(back.data(), out.data(), static_cast<int64_t>(out.size()));
  EXPECT_EQ(back[2], 1.0f + 0x1p-6f);
  // The same values, denormals too, on every lane of to_bf16's vector path and in its tail: the
  // bits of the scalar rounding (bf16.h).
  auto many = random_vector(16 * 8 + 5, 47);
  for (size_t i = 0; i < many.size(); ++i)
    if (i % 3 == 0) many[i] = i % 2 ? 0x1p-140f * float(i) : in[i / 3 % in.size()];
  std::vector<uint16_t> lanes(many.size());
  to_bf16(lanes.data(), many.data(), static_cast<int64_t>(many.size()));
  for (size_t i = 0; i < many.size(); ++i) EXPECT_EQ(lanes[i], bf16_from_float(many[i])) << "element " << i;
}

// The transposing conversion against to_bf16 then a plain transpose, bit for bit: shapes the
// AVX-512 kernel covers (rows a multiple of 32, whole and ragged column blocks), at every output
// alignment (its streaming stores start at the first 64-byte boundary; the rows before it, and
// the ragged columns, go element-wise), and shapes only the element-wise path takes; values
// include ties, NaN, infinities and denormals.
TEST_F(MatmulTest, TransposedBf16ConversionGivesToBf16sBitsTransposed) {
  const float specials[] = {
      1.0f + 0x1p-8f, std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(), 0x1p-130f,
      -0.0f,          std::numeric_limits<float>::max()};
  struct Case {
    int64_t rows, cols;
  };
  for (const Case c : {Case{96, 40}, Case{64, 48}, Case{32, 16}, Case{7, 33}, Case{40, 17}, Case{0, 5}, Case{5, 0}}) {
    auto in = random_vector(c.rows * c.cols, 41);
    for (size_t i = 0; i < std::size(specials) && i < in.size(); ++i) in[i * 7 % in.size()] = specials[i];
    std::vector<uint16_t> plain(in.size());
    to_bf16(plain.data(), in.data(), static_cast<int64_t>(in.size()));
    for (int64_t shift = 0; shift < 32; ++shift) {
      std::vector<uint16_t> buffer(in.size() + 32, 0xdead);
      uint16_t* out = buffer.data() + shift;
      to_bf16_transposed(out, in.data(), c.rows, c.cols);
      int64_t wrong = 0;
      for (int64_t r = 0; r < c.rows; ++r)
        for (int64_t k = 0; k < c.cols; ++k) wrong += out[k * c.rows + r] != plain[r * c.cols + k];
      for (int64_t i = 0; i < shift; ++i) wrong += buffer[i] != 0xdead;  // nothing written outside
      for (size_t i = shift + in.size(); i < buffer.size(); ++i) wrong += buffer[i] != 0xdead;
      EXPECT_EQ(wrong, 0) << c.rows << " x " << c.cols << " at +" << shift << " elements";
    }
  }
}

// The blocked layout, element by element from its definition (matmul.h): blocks of 32 k x 64 n,
// n-blocks outer; in a block 16 pairs of k, each 64 n of the pair (k, k + 1). Both operand
// orders, special values included (the same bits as to_bf16), and shapes that are not whole
// blocks refused.
TEST_F(MatmulTest, BlockedBf16ConversionPutsEveryElementWhereItsLayoutSays) {
  const float specials[] = {
      1.0f + 0x1p-8f, std::numeric_limits<float>::quiet_NaN(),    -std::numeric_limits<float>::infinity(), 0x1p-130f,
      -0.0f,          std::numeric_limits<float>::signaling_NaN()};
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{32, 64}, {96, 128}, {64, 192}}) {
    for (const bool transposed : {false, true}) {
      auto in = random_vector(K * N, 47);
      for (size_t i = 0; i < std::size(specials); ++i) in[i * 13 % in.size()] = specials[i];
      std::vector<uint16_t> plain(in.size()), out(in.size(), 0xdead);
      for (size_t i = 0; i < in.size(); ++i) plain[i] = bf16_from_float(in[i]);  // the scalar rounding (bf16.h)
      to_bf16_k32n64_blocked(out.data(), in.data(), K, N, transposed);
      int64_t wrong = 0;
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = 0; n < N; ++n) {
          const int64_t at = (n / 64 * (K / 32) + k / 32) * 2048 + k % 32 / 2 * 128 + n % 64 * 2 + k % 2;
          wrong += out[at] != plain[transposed ? n * K + k : k * N + n];
        }
      EXPECT_EQ(wrong, 0) << K << " x " << N << (transposed ? " from B^T" : "");
    }
  }
  std::vector<uint16_t> out(48 * 64);
  const auto in = random_vector(48 * 64, 48);
  EXPECT_THROW(to_bf16_k32n64_blocked(out.data(), in.data(), 48, 64, false), RuntimeError);  // K % 32
  EXPECT_THROW(to_bf16_k32n64_blocked(out.data(), in.data(), 64, 48, true), RuntimeError);   // N % 64
}

// Both copies of a weight W (OC, C) in one pass: the forward's (op(B) = W^T) and the input
// gradient's (op(B) = W), each the bits of its own to_bf16_k32n64_blocked call, at any 16-byte
// alignment (64-byte aligned copies take streaming stores); special values included.
TEST_F(MatmulTest, BlockedBf16PairIsBothCopiesAtOnce) {
  for (const auto& [OC, C] : {std::pair<int64_t, int64_t>{64, 64}, {192, 128}, {64, 256}}) {
    auto W = random_vector(OC * C, 49);
    W[3] = std::numeric_limits<float>::quiet_NaN();
    W[OC * C / 2] = 0x1p-133f;
    std::vector<uint16_t> forward(OC * C), input_grad(OC * C);
    to_bf16_k32n64_blocked(forward.data(), W.data(), C, OC, true);
    to_bf16_k32n64_blocked(input_grad.data(), W.data(), OC, C, false);
    for (const size_t shift : {0, 8, 32}) {
      std::vector<uint16_t> buffer(2 * OC * C + 128, 0xdead);
      uint16_t* base = buffer.data() + (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64 / 2 + shift;
      uint16_t *f = base, *g = base + OC * C;
      to_bf16_k32n64_blocked_pair(f, g, W.data(), OC, C);
      EXPECT_TRUE(std::equal(forward.begin(), forward.end(), f)) << OC << " x " << C << " at +" << shift;
      EXPECT_TRUE(std::equal(input_grad.begin(), input_grad.end(), g)) << OC << " x " << C << " at +" << shift;
    }
  }
  std::vector<uint16_t> a(64 * 96), b(64 * 96);
  const auto W = random_vector(64 * 96, 50);
  EXPECT_THROW(to_bf16_k32n64_blocked_pair(a.data(), b.data(), W.data(), 64, 96), RuntimeError);  // C % 64
}

// The forward and input-gradient products on w and wt against naive double, bit-for-bit repeats,
// and each refused on the other's weight.
void check_prepared_products(int64_t B, int64_t C, int64_t OC, const std::vector<float>& W,
                             const std::vector<float>& inp, const std::vector<float>& dout,
                             const std::vector<float>& bias, const std::vector<float>& dinp0,
                             const PreparedWeightBf16& w, const PreparedWeightBf16& wt) {
  {
    std::vector<uint16_t> inp16(inp.size()), dout16(dout.size());
    to_bf16(inp16.data(), inp.data(), B * C);
    to_bf16(dout16.data(), dout.data(), B * OC);
    std::vector<float> inpr(inp.size()), doutr(dout.size());
    const std::vector<float> Wr = bf16_rounded(W).values;
    from_bf16(inpr.data(), inp16.data(), B * C);
    from_bf16(doutr.data(), dout16.data(), B * OC);
    const GemmShape forward{.M = B, .N = OC, .K = C, .trans_b = true};
    const GemmShape dinp{.M = B, .N = C, .K = OC, .accumulate = true};
    std::vector<float> out(B * OC), out2(B * OC), g = dinp0, g2 = dinp0;
    gemm_bf16(forward, inp16.data(), w, out.data(), bias.data());
    gemm_bf16(dinp, dout16.data(), wt, g.data());
    EXPECT_LT(max_rel_diff(out, naive(forward, inpr, Wr, out, bias.data())), 1e-5) << B << "," << C << "," << OC;
    EXPECT_LT(max_rel_diff(g, naive(dinp, doutr, Wr, dinp0, nullptr)), 1e-5) << B << "," << C << "," << OC;
    gemm_bf16(forward, inp16.data(), w, out2.data(), bias.data());
    gemm_bf16(dinp, dout16.data(), wt, g2.data());
    EXPECT_TRUE(bitwise_equal(out, out2));
    EXPECT_TRUE(bitwise_equal(g, g2));
    EXPECT_THROW(gemm_bf16(dinp, dout16.data(), w, g2.data()), RuntimeError);       // the forward's layout
    EXPECT_THROW(gemm_bf16(forward, inp16.data(), wt, out2.data()), RuntimeError);  // the input gradient's
  }
}

// A linear layer's two products on its prepared weight (forward on W, the input gradient on W^T)
// in each layout, against the naive double product of the rounded inputs, the same bits run to
// run, and a shape that is not the prepared weight's refused. oneDNN's packed layout is taken
// where this machine's oneDNN chooses it for the shape (whole blocks, no AMX); elsewhere its
// preparation is refused.
TEST_F(MatmulTest, ProductsOnAPreparedWeightMatchNaiveDoubleAndRepeatBitForBit) {
  if (!bf16_supported()) GTEST_SKIP() << bf16_unsupported_reason();
  int packed_cases = 0;
  for (const auto& [B, C, OC] :
       {std::tuple<int64_t, int64_t, int64_t>{5, 40, 96}, {6, 96, 40}, {3, 17, 9}, {5, 128, 64}, {64, 64, 192}})
    for (const PreparedLayout layout : {PreparedLayout::kTransposedRoute, PreparedLayout::kOneDnnPacked}) {
      const auto W = random_vector(OC * C, 42), inp = random_vector(B * C, 43), dout = random_vector(B * OC, 44);
      const auto bias = random_vector(OC, 45), dinp0 = random_vector(B * C, 46);
      std::vector<uint16_t> fwd_copy(W.size()), dinp_copy(W.size()), inp16(inp.size()), dout16(dout.size());
      const bool packed = layout == PreparedLayout::kOneDnnPacked;
      const bool available = prepared_layout_bf16(OC, C, WeightUse::kForward) == layout &&
                             prepared_layout_bf16(OC, C, WeightUse::kInputGrad) == layout;
      if (packed && !available) {
        EXPECT_THROW(prepare_weight_bf16(fwd_copy.data(), W.data(), OC, C, WeightUse::kForward, layout), RuntimeError);
        continue;
      }
      packed_cases += packed;
      const auto w = prepare_weight_bf16(fwd_copy.data(), W.data(), OC, C, WeightUse::kForward, layout);
      const auto wt = prepare_weight_bf16(dinp_copy.data(), W.data(), OC, C, WeightUse::kInputGrad, layout);
      EXPECT_EQ(w.layout, layout);
      EXPECT_EQ(wt.layout, layout);
      // A holder's view of its copy names the layout the default preparation wrote.
      EXPECT_EQ(prepared_view_bf16(fwd_copy.data(), OC, C, WeightUse::kForward).layout,
                prepared_layout_bf16(OC, C, WeightUse::kForward));
      check_prepared_products(B, C, OC, W, inp, dout, bias, dinp0, w, wt);
    }
  std::printf("products on oneDNN's packed layout checked for %d of 5 shapes on this machine\n", packed_cases);
}

// oneDNN's own packed layout (bench_gemm's comparison) computes the same product.
TEST_F(MatmulTest, OneDnnPackedWeightGivesTheProduct) {
  if (matmul_backend_name() == "OpenBLAS sgemm") GTEST_SKIP() << "built without oneDNN";
  for (const GemmShape& s : {GemmShape{.M = 5, .N = 70, .K = 23, .trans_b = true},
                             GemmShape{.M = 6, .N = 40, .K = 96, .accumulate = true}}) {
    const auto A = random_vector(s.M * s.K, 48), B = random_vector(s.K * s.N, 49), C0 = random_vector(s.M * s.N, 50);
    std::vector<float> C = C0;
    OneDnnPackedB(s, false, B.data()).gemm(A.data(), C.data());
    EXPECT_LT(max_rel_diff(C, naive(s, A, B, C0, nullptr)), 1e-5) << "fp32 tb=" << s.trans_b;
    if (!bf16_supported()) continue;
    const auto [Ab, Ar] = bf16_rounded(A);
    const auto [Bb, Br] = bf16_rounded(B);
    std::vector<float> Cb = C0;
    OneDnnPackedB(s, true, Bb.data()).gemm(Ab.data(), Cb.data());
    EXPECT_LT(max_rel_diff(Cb, naive(s, Ar, Br, C0, nullptr)), 1e-5) << "bf16 tb=" << s.trans_b;
  }
}

TEST_F(MatmulTest, Bf16ProductAccumulatesInFp32OnRoundedInputs) {
  if (!bf16_supported()) GTEST_SKIP() << bf16_unsupported_reason();
  for (const GemmShape& s : shapes()) {
    const auto A = random_vector(s.M * s.K, 8), B = random_vector(s.K * s.N, 9), bias = random_vector(s.N, 10);
    const auto C0 = random_vector(s.M * s.N, 11);
    // Reference: the exact products of the rounded inputs, summed in double. With fp32
    // accumulation the result is within fp32 rounding of it (a bf16 accumulator would be ~1e-2 off).
    const auto [Ab, Ar] = bf16_rounded(A);
    const auto [Bb, Br] = bf16_rounded(B);
    std::vector<float> C = C0;
    gemm_bf16(s, Ab.data(), Bb.data(), C.data(), bias.data());
    EXPECT_LT(max_rel_diff(C, naive(s, Ar, Br, C0, bias.data())), 1e-5)
        << "ta=" << s.trans_a << " tb=" << s.trans_b << " acc=" << s.accumulate;
  }
}

TEST_F(MatmulTest, FusedGeluBiasBackwardGivesTheBitsOfTheUnfusedPair) {
  const int64_t B = 5, N = 67;
  auto pre = random_vector(B * N, 12);
  for (float& v : pre) v *= 3.0f;
  const auto dpost = random_vector(B * N, 13), db0 = random_vector(N, 14), dpre0 = random_vector(B * N, 15);
  for (GradWrite w : {GradWrite::kOverwrite, GradWrite::kAccumulate}) {
    std::vector<float> want = dpre0, want_db = db0, got = dpre0, got_db = db0;
    std::vector<float> product(B * N);
    gelu_backward(product.data(), GradWrite::kOverwrite, pre.data(), dpost.data(), B * N);
    for (int64_t i = 0; i < B * N; ++i) want[i] = w == GradWrite::kAccumulate ? want[i] + product[i] : product[i];
    bias_backward(want_db.data(), product.data(), B, N);
    gelu_bias_backward(got.data(), w, got_db.data(), pre.data(), dpost.data(), B, N);
    EXPECT_TRUE(bitwise_equal(got, want)) << (w == GradWrite::kAccumulate ? "accumulate" : "overwrite");
    EXPECT_TRUE(bitwise_equal(got_db, want_db));
  }
}

// The bf16 GELU kernels are the fp32 ones with conversions around them, bit for bit: a row
// shorter than the kernels' blocks of 512, and rows that span blocks with a ragged last one.
TEST_F(MatmulTest, Bf16GeluKernelsAreTheFp32OnesRounded) {
  for (const auto& [B, N] : {std::pair<int64_t, int64_t>{3, 41}, {2, 1100}}) {
    auto pre32 = random_vector(B * N, 16);
    for (float& v : pre32) v *= 3.0f;
    const auto dpost = random_vector(B * N, 17);
    std::vector<uint16_t> pre(B * N), post(B * N);
    gelu_forward_bf16(pre.data(), post.data(), pre32.data(), B * N);
    std::vector<float> post32(B * N);
    gelu_forward(post32.data(), pre32.data(), B * N);
    std::vector<uint16_t> want_pre(B * N), want_post(B * N);
    to_bf16(want_pre.data(), pre32.data(), B * N);
    to_bf16(want_post.data(), post32.data(), B * N);
    EXPECT_EQ(pre, want_pre);
    EXPECT_EQ(post, want_post);
    // Backward from the saved bf16 input: the fp32 fused kernel on the widened input, rounded.
    std::vector<float> pre_wide(B * N), dpre32(B * N), db32(N, 0.5f), db(N, 0.5f);
    from_bf16(pre_wide.data(), pre.data(), B * N);
    gelu_bias_backward(dpre32.data(), GradWrite::kOverwrite, db32.data(), pre_wide.data(), dpost.data(), B, N);
    std::vector<uint16_t> dpre(B * N), want_dpre(B * N);
    gelu_bias_backward_bf16(dpre.data(), db.data(), pre.data(), dpost.data(), B, N);
    to_bf16(want_dpre.data(), dpre32.data(), B * N);
    EXPECT_EQ(dpre, want_dpre);
    EXPECT_TRUE(bitwise_equal(db, db32));
  }
}

TEST_F(MatmulTest, LinearBackwardOverwriteIgnoresWhatTheBufferHeld) {
  const int64_t B = 4, C = 6, OC = 5;
  const auto inp = random_vector(B * C, 18), w = random_vector(OC * C, 19), dout = random_vector(B * OC, 20);
  std::vector<float> a(B * C, 1e6f), b(B * C, -3.0f), dw(OC * C, 0.0f), db(OC, 0.0f);
  linear_backward(a.data(), GradWrite::kOverwrite, dw.data(), db.data(), dout.data(), inp.data(), w.data(), B, C, OC);
  linear_backward(b.data(), GradWrite::kOverwrite, dw.data(), db.data(), dout.data(), inp.data(), w.data(), B, C, OC);
  EXPECT_TRUE(bitwise_equal(a, b));
  // and accumulate adds onto it
  std::vector<float> c(B * C, 2.0f);
  linear_backward(c.data(), GradWrite::kAccumulate, dw.data(), nullptr, dout.data(), inp.data(), w.data(), B, C, OC);
  for (int64_t i = 0; i < B * C; ++i) EXPECT_NEAR(c[i], a[i] + 2.0f, 1e-5f);
}

}  // namespace
}  // namespace parlab::compute::cpu
