#pragma once
// The matrix products of the CPU kernels, behind one interface so the library is a build choice
// made by measurement (bench/gemm_bench.cpp prints the table): oneDNN's matmul primitive when
// CMake found it (the library PyTorch's CPU linear layers use; fastest on the lab shapes), else
// OpenBLAS sgemm. Both run on the calling thread only (one thread per rank) and give the same
// bits run to run for the same shapes: the kill-and-resume proof relies on it.
//
// bf16 products (precision=mixed) take bf16 inputs and accumulate in fp32 into an fp32 output;
// they need oneDNN and a CPU with AVX512-BF16 (bf16_supported()), and throw RuntimeError elsewhere.
#include <cstdint>
#include <memory>
#include <string_view>

namespace parlab::compute::cpu {

// Row-major C (M, N) = op(A) (M, K) @ op(B) (K, N) [+ C when accumulate] [+ bias (N) per row].
// op(A) = A^T when trans_a (A stored (K, M)), op(B) = B^T when trans_b (B stored (N, K)).
struct GemmShape {
  int64_t M = 0, N = 0, K = 0;
  bool trans_a = false, trans_b = false;
  bool accumulate = false;
};

// fp32 through the build's backend. bias may be null.
void gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias = nullptr);
// bf16 inputs (raw bf16 bits), fp32 accumulation and output. bias (fp32) may be null.
void gemm_bf16(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias = nullptr);

// What gemm_f32 runs: "oneDNN 2.6 matmul", "oneDNN 2.6 matmul (fp32 weight gradients: OpenBLAS
// sgemm)" where OpenBLAS runs an AVX-512 kernel, or "OpenBLAS sgemm" (built without oneDNN).
std::string_view matmul_backend_name();
// True when gemm_bf16 runs here: built with oneDNN and the CPU has AVX512-BF16.
bool bf16_supported();
// One line saying why bf16 is not available (empty when it is).
std::string_view bf16_unsupported_reason();

// fp32 -> bf16 with round-to-nearest-even (what the hardware's vcvtneps2bf16 does), and back
// (exact). n may be 0.
void to_bf16(uint16_t* out, const float* in, int64_t n);
void from_bf16(float* out, const uint16_t* in, int64_t n);
// The same rounding into the transpose: out (cols, rows), out[c * rows + r] = bf16(in[r * cols + c]),
// each element the bits to_bf16 gives it. Written with streaming stores where the CPU has AVX-512
// (one pass over memory, as fast as to_bf16 on the lab's weights); any shape.
void to_bf16_transposed(uint16_t* out, const float* in, int64_t rows, int64_t cols);

// bf16 of op(B) (K, N) in the layout oneDNN's bf16 matmul reads its weights in on AVX512-BF16
// without AMX (BA16a64b2a: blocks of 32 k x 64 n, n-blocks outer; in a block 16 pairs of k, each
// 64 n of the pair (k, k + 1)), each element the bits to_bf16 gives it. op(B) is B (K, N)
// row-major, or B^T with B stored (N, K) when b_transposed. Throws RuntimeError unless K % 32 == 0
// and N % 64 == 0. One pass over memory, like to_bf16 (oneDNN's own reorder takes ~3x as long).
void to_bf16_k32n64_blocked(uint16_t* out, const float* B, int64_t K, int64_t N, bool b_transposed);
// Both blocked copies of a linear layer's W (OC, C) in one pass over it: `forward` that of op(B)
// = W^T (K = C, N = OC), `input_grad` that of op(B) = W (K = OC, N = C), each the bits
// to_bf16_k32n64_blocked gives it, the second made from rows of W the first just brought into the
// cache (lab-mlp's 16 weights: 26 ms where two calls take 37). Throws RuntimeError unless OC and
// C are multiples of 64.
void to_bf16_k32n64_blocked_pair(uint16_t* forward, uint16_t* input_grad, const float* W, int64_t OC, int64_t C);

// ---- A weight prepared once for the products that read it every microbatch -----------------
// A linear layer's weight W (OC, C) enters two products per microbatch (linear.cpp):
//   forward  out (B, OC)      = inp (B, C) @ W^T (+ bias)
//   dinp     dinp (B, C)  (=|+=) dout (B, OC) @ W
// Mixed precision rounds W to bf16 once per step anyway; prepare_weight_bf16 writes that copy in
// the layout the product's route reads without repacking it (matmul.cpp says which, measured):
// for the forward W (OC, C) as stored, for the input gradient W^T (C, OC), each the wide left
// operand of the transposed route. A product on a plain bf16 weight repacks it on every call.
enum class WeightUse { kForward, kInputGrad };
// How a prepared copy is laid out (matmul.cpp says which wins where, measured):
//   kTransposedRoute  W (forward) or W^T (input gradient) plain, read by the transposed route;
//   kOneDnnPacked     op(B) in the blocked layout oneDNN's bf16 matmul chooses for it (format_tag
//                     any at microbatch 64), read without repacking. Only where that layout is
//                     exactly OC x C elements (no padding), so a copy's size is the same either way.
enum class PreparedLayout { kTransposedRoute, kOneDnnPacked };
struct PreparedWeightBf16 {
  const uint16_t* data = nullptr;  // OC x C bf16 elements in the layout of `use` (no padding)
  int64_t OC = 0, C = 0;
  WeightUse use = WeightUse::kForward;
  PreparedLayout layout = PreparedLayout::kTransposedRoute;
};
// The layout prepare_weight_bf16 gives W (OC, C) for `use` on this machine: oneDNN's packed one
// on a CPU with AVX512-BF16 but no AMX where it needs no padding, else the transposed route's.
// The same answer for the same shape on one machine (so the same bits run to run).
PreparedLayout prepared_layout_bf16(int64_t OC, int64_t C, WeightUse use);
// Fills out (OC x C elements) from the fp32 W (OC, C) for `use` in `layout` (by default
// prepared_layout_bf16's), each element rounded as to_bf16 rounds it, and returns the view of it.
// Throws RuntimeError for kOneDnnPacked where it is not available for the shape.
PreparedWeightBf16 prepare_weight_bf16(uint16_t* out, const float* W, int64_t OC, int64_t C, WeightUse use);
PreparedWeightBf16 prepare_weight_bf16(uint16_t* out, const float* W, int64_t OC, int64_t C, WeightUse use,
                                       PreparedLayout layout);
// Both copies of W in the machine's layouts, as two prepare_weight_bf16 calls make them (the same
// bits), in one pass over W where both are oneDNN's packed layout (to_bf16_k32n64_blocked_pair).
void prepare_weight_bf16_pair(uint16_t* forward, uint16_t* input_grad, const float* W, int64_t OC, int64_t C);
// The view of a copy the default prepare_weight_bf16 filled earlier (its layout is the
// machine's, prepared_layout_bf16's): what a holder of the copy passes to gemm_bf16.
PreparedWeightBf16 prepared_view_bf16(const uint16_t* data, int64_t OC, int64_t C, WeightUse use);
// The product of s with op(B) the prepared weight: s as linear.cpp states the product (forward:
// M = B, N = OC, K = C, trans_b; input gradient: M = B, N = C, K = OC, untransposed), checked
// against w (RuntimeError on a shape or use that does not match). bf16 A, fp32 accumulation and
// C; the same bits run to run, and gemm_bf16's result on the plain copy up to fp32 rounding.
void gemm_bf16(const GemmShape& s, const uint16_t* A, const PreparedWeightBf16& w, float* C,
               const float* bias = nullptr);

// How gemm_f32 / gemm_bf16 run a product, chosen per shape by measurement (matmul.cpp says which
// and why): oneDNN as stated, oneDNN computing C^T = op(B)^T op(A)^T and transposing it into C
// (the bias and accumulation applied there), oneDNN over panels of B's rows summed into C in
// order (untransposed operands only), or OpenBLAS. Each route is deterministic, so a shape gives
// the same bits run to run.
enum class GemmRoute { kDirect, kTransposed, kPanels, kOpenBlas };
GemmRoute f32_route(const GemmShape& s);
// True when OpenBLAS runs one of its AVX-512 kernels here (openblas_get_corename): only then is it
// the fp32 weight gradients' route.
bool openblas_runs_avx512();
GemmRoute bf16_route(const GemmShape& s);

// The individual backends, for bench_gemm and the backend tests (the runtime calls gemm_f32).
void openblas_gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias = nullptr);
// Throw RuntimeError when parlab was built without oneDNN.
void onednn_gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias = nullptr);
void onednn_gemm_bf16(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias = nullptr);
// The transposed route: the same result as the above up to rounding.
void onednn_gemm_f32_transposed(const GemmShape& s, const float* A, const float* B, float* C,
                                const float* bias = nullptr);
void onednn_gemm_bf16_transposed(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C,
                                 const float* bias = nullptr);
// The panel route: C (=|+=) sum over k0 of A[:, k0:k0+128] B[k0:k0+128, :] (+ bias), in order of
// k0; the same result as onednn_gemm_f32 up to rounding. Throws RuntimeError on a transposed
// operand.
void onednn_gemm_f32_panels(const GemmShape& s, const float* A, const float* B, float* C, const float* bias = nullptr);
// oneDNN packing op(B) ahead in the layout its primitive prefers (the weights memory in
// format_tag::any, reordered from B once), then products on it: what the prepared weights above
// were measured against (bench_gemm). No bias. Throws RuntimeError without oneDNN (and without
// bf16 matmuls for bf16).
class OneDnnPackedB {
 public:
  // B: fp32, or raw bf16 bits when bf16, stored as s says.
  OneDnnPackedB(const GemmShape& s, bool bf16, const void* B);
  ~OneDnnPackedB();
  OneDnnPackedB(const OneDnnPackedB&) = delete;
  OneDnnPackedB& operator=(const OneDnnPackedB&) = delete;
  // C (=|+=) op(A) @ op(B), A as s stores it (fp32, or bf16 bits when bf16).
  void gemm(const void* A, float* C) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace parlab::compute::cpu
