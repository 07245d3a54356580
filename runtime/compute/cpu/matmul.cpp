#include "runtime/compute/cpu/matmul.h"

#include <cblas.h>
#include <cpuid.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/errors.h"

#if PARLAB_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace parlab::compute::cpu {

namespace {

// A microbatch-sized dimension (the lab trains at microbatches of 32 and 64).
constexpr int64_t kSmallDim = 128;
// Rows of B per panel of the panel route (see run_panels): 128 rows of a lab weight are 0.5-2 MB,
// what one core's L2 keeps while oneDNN packs and reads the panel.
constexpr int64_t kPanelRows = 128;

// A forward product: M the microbatch, N a layer's width (8x or more), the weight op(B) = B^T.
bool small_m_wide_n(const GemmShape& s) { return !s.trans_a && s.trans_b && s.M <= kSmallDim && s.N >= 8 * s.M; }

// C[m, n] (=|+=) T[n, m] (+ bias[n]): T is C^T, (N, M) row-major. 16 x 16 tiles keep the rows
// read and the columns written in L1. The bias is added before C, one rounding each, always in
// this order (deterministic).
[[maybe_unused]] void transpose_into(float* C, const float* T, int64_t M, int64_t N, const float* bias,
                                     bool accumulate) {
  constexpr int64_t kTile = 16;
  for (int64_t m0 = 0; m0 < M; m0 += kTile) {
    const int64_t m1 = std::min(M, m0 + kTile);
    for (int64_t n0 = 0; n0 < N; n0 += kTile) {
      const int64_t n1 = std::min(N, n0 + kTile);
      for (int64_t m = m0; m < m1; ++m) {
        float* row = C + m * N;
        for (int64_t n = n0; n < n1; ++n) {
          float v = T[n * M + m];
          if (bias != nullptr) v += bias[n];
          row[n] = accumulate ? row[n] + v : v;
        }
      }
    }
  }
}

}  // namespace

void openblas_gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  if (s.M == 0 || s.N == 0) return;
  float beta = s.accumulate ? 1.0f : 0.0f;
  if (bias != nullptr) {
    // Start from the broadcast bias (added to C when accumulating) so sgemm adds the product.
    for (int64_t m = 0; m < s.M; ++m) {
      float* row = C + m * s.N;
      if (s.accumulate) {
        for (int64_t n = 0; n < s.N; ++n) row[n] += bias[n];
      } else {
        std::copy(bias, bias + s.N, row);
      }
    }
    beta = 1.0f;
  }
  if (s.K == 0) {
    if (beta == 0.0f) std::fill(C, C + s.M * s.N, 0.0f);
    return;
  }
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.M, s.N,
              s.K, 1.0f, A, s.trans_a ? s.M : s.K, B, s.trans_b ? s.K : s.N, beta, C, s.N);
}

#if PARLAB_HAVE_DNNL
namespace {

// C = op(A) op(B) + bias + C when the shape accumulates: oneDNN's sum post-op, one pass over C.
dnnl::primitive_attr accumulate_attr(const GemmShape& s) {
  dnnl::primitive_attr attr;
  if (s.accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  return attr;
}

// One engine and stream per thread (a rank), and the primitives it has built, by shape. Building
// a matmul primitive takes ~0.1 ms (it JIT-compiles its kernel); a step runs the same dozen
// shapes thousands of times.
struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // M, N, K, trans_a, trans_b, accumulate, bf16, bias, lda, op(B) in packed_desc(K, N)'s layout
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, bool, int64_t, bool>;
  // A built primitive and memory objects for its arguments, re-pointed at each call's buffers.
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory a, b, c, bias;
  };
  std::map<Key, Entry> primitives;
  // True when w is to_bf16_k32n64_blocked's layout of a (K, N) op(B), unpadded.
  static bool is_k32n64_blocked(const dnnl::memory::desc& w, int64_t K, int64_t N) {
    if (K % 32 != 0 || N % 64 != 0 || w.get_size() != static_cast<size_t>(K * N) * sizeof(uint16_t)) return false;
    const auto& b = w.data.format_desc.blocking;
    return w.data.format_kind == dnnl_blocked && b.inner_nblks == 3 && b.inner_blks[0] == 16 && b.inner_idxs[0] == 0 &&
           b.inner_blks[1] == 64 && b.inner_idxs[1] == 1 && b.inner_blks[2] == 2 && b.inner_idxs[2] == 0 &&
           b.strides[0] == 32 * 64 && b.strides[1] == K * 64;
  }

  // By (K, N): the blocked layout oneDNN's bf16 matmul chooses for op(B) at microbatch 64 (its
  // weights in format_tag::any) where it is to_bf16_k32n64_blocked's, else an empty desc.
  std::map<std::pair<int64_t, int64_t>, dnnl::memory::desc> packed;

  const dnnl::memory::desc& packed_desc(int64_t K, int64_t N) {
    auto it = packed.find({K, N});
    if (it != packed.end()) return it->second;
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    constexpr int64_t kM = 64;
    dnnl::memory::desc chosen;
    try {
      const dnnl::memory::desc a({kM, K}, dt::bf16, dims{K, 1});
      const dnnl::memory::desc any_b({K, N}, dt::bf16, dnnl::memory::format_tag::any);
      const dnnl::memory::desc c({kM, N}, dt::f32, dims{N, 1});
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, any_b, c), engine);
      if (is_k32n64_blocked(pd.weights_desc(), K, N)) chosen = pd.weights_desc();
    } catch (const dnnl::error&) {
      // no bf16 matmul for the shape: the transposed route's layout
    }
    return packed.emplace(std::make_pair(K, N), chosen).first->second;
  }

  OneDnn() {
    // This Debian build threads with OpenMP: one thread per rank, set for the calling thread.
    omp_set_num_threads(1);
  }

  // lda: the row stride of a non-transposed A (0: its width K, the packed layout).
  // packed_b: op(B) is bf16 in packed_desc(K, N)'s layout. The entry's primitive is empty where
  // oneDNN refuses that layout at this shape (run_packed then reads a plain copy).
  Entry& get(const GemmShape& s, bool bf16, bool bias, int64_t lda = 0, bool packed_b = false) {
    if (lda == 0 || s.trans_a) lda = s.trans_a ? s.M : s.K;
    const Key key{s.M, s.N, s.K, s.trans_a, s.trans_b && !packed_b, s.accumulate, bf16, bias, lda, packed_b};
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    const dt in = bf16 ? dt::bf16 : dt::f32;
    // Row-major storage of op(A) (M, K) and op(B) (K, N) as strides: a transposed operand is
    // the same buffer read with swapped strides.
    const dnnl::memory::desc a({s.M, s.K}, in, s.trans_a ? dims{1, s.M} : dims{lda, 1});
    const dnnl::memory::desc b =
        packed_b ? packed_desc(s.K, s.N) : dnnl::memory::desc({s.K, s.N}, in, s.trans_b ? dims{1, s.K} : dims{s.N, 1});
    const dnnl::memory::desc c({s.M, s.N}, dt::f32, dims{s.N, 1});
    const dnnl::memory::desc bias_md =
        bias ? dnnl::memory::desc({1, s.N}, dt::f32, dims{s.N, 1}) : dnnl::memory::desc();
    Entry e;
    try {
      const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias_md, c), accumulate_attr(s), engine);
      e = {dnnl::matmul(pd), dnnl::memory(a, engine, DNNL_MEMORY_NONE), dnnl::memory(b, engine, DNNL_MEMORY_NONE),
           dnnl::memory(c, engine, DNNL_MEMORY_NONE),
           bias ? dnnl::memory(bias_md, engine, DNNL_MEMORY_NONE) : dnnl::memory()};
    } catch (const dnnl::error&) {
      if (!packed_b) throw;
    }
    return primitives.emplace(key, std::move(e)).first->second;
  }

  void run(const GemmShape& s, bool bf16, const void* A, const void* B, float* C, const float* bias, int64_t lda = 0) {
    if (s.M == 0 || s.N == 0) return;
    if (s.K == 0) {  // oneDNN rejects empty reductions: C = bias (+ C)
      openblas_gemm_f32(s, nullptr, nullptr, C, bias);
      return;
    }
    execute(get(s, bf16, bias != nullptr, lda), A, B, C, bias);
  }

  // The bf16 product on op(B) in packed_desc(s.K, s.N)'s layout; where oneDNN refuses that layout
  // at this M, on a plain copy of it (a reorder per call: correct, slow, and not a lab shape).
  void run_packed(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias) {
    if (s.M == 0 || s.N == 0) return;
    Entry& e = get(s, true, bias != nullptr, 0, true);
    if (e.primitive) return execute(e, A, B, C, bias);
    thread_local std::vector<uint16_t> plain;
    plain.resize(static_cast<size_t>(s.K * s.N));
    dnnl::memory from(packed_desc(s.K, s.N), engine, const_cast<uint16_t*>(B));
    dnnl::memory to({{s.K, s.N}, dnnl::memory::data_type::bf16, dnnl::memory::format_tag::ab}, engine, plain.data());
    dnnl::reorder(from, to).execute(stream, from, to);
    stream.wait();
    GemmShape untransposed = s;
    untransposed.trans_b = false;
    run(untransposed, true, A, plain.data(), C, bias);
  }

  void execute(Entry& e, const void* A, const void* B, float* C, const float* bias) {
    // The memory objects wrap the caller's buffers; nothing is copied.
    e.a.set_data_handle(const_cast<void*>(A));
    e.b.set_data_handle(const_cast<void*>(B));
    e.c.set_data_handle(C);
    std::unordered_map<int, dnnl::memory> args{{DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.c}};
    if (bias != nullptr) {
      e.bias.set_data_handle(const_cast<float*>(bias));
      args.emplace(DNNL_ARG_BIAS, e.bias);
    }
    e.primitive.execute(stream, args);
    stream.wait();
  }
};

OneDnn& onednn() {
  thread_local OneDnn instance;
  return instance;
}

bool cpu_has_avx512_bf16() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16");
}

// AMX-BF16: CPUID leaf 7, subleaf 0, EDX bit 22.
bool cpu_has_amx_bf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx >> 22) & 1u;
}

bool packed_layout_fits(int64_t K, int64_t N) { return !onednn().packed_desc(K, N).is_zero(); }

void require_bf16() {
  if (!bf16_supported()) throw RuntimeError(std::string("bf16 matmul: ") + std::string(bf16_unsupported_reason()));
}

// C (=|+=) C^T's transpose: oneDNN computes C^T (N, M) = op(B)^T op(A)^T into a per-thread
// workspace (M x N floats: 1 MiB at the lab's shapes; kernel scratch, like oneDNN's own packing
// buffers, not a tensor of the model), then transpose_into writes C with the bias.
void run_transposed(const GemmShape& s, bool bf16, const void* A, const void* B, float* C, const float* bias) {
  if (s.M == 0 || s.N == 0 || s.K == 0) return onednn().run(s, bf16, A, B, C, bias);
  const GemmShape t{.M = s.N, .N = s.M, .K = s.K, .trans_a = !s.trans_b, .trans_b = !s.trans_a, .accumulate = false};
  thread_local std::vector<float> workspace;
  workspace.resize(static_cast<size_t>(s.M * s.N));
  onednn().run(t, bf16, B, A, workspace.data(), nullptr);
  transpose_into(C, workspace.data(), s.M, s.N, bias, s.accumulate);
}

// C (=|+=) A B (+ bias) as a sum over panels of kPanelRows rows of B: C = A[:, k0:k1] B[k0:k1, :]
// + ... in order of k0, the first panel writing C (or adding to it when accumulating, with the
// bias), each later one adding to C (oneDNN's sum post-op). A row-major B's panel is one
// contiguous block, so oneDNN's per-call packing of B reads and writes it in L2; given the whole
// weight (16 MB at the lab's shapes) it packed it through memory on every call, and that copy
// was a quarter of the input-gradient product. Deterministic: fixed panels, fixed order.
void run_panels(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  if (s.M == 0 || s.N == 0 || s.K == 0) return onednn().run(s, false, A, B, C, bias);
  for (int64_t k0 = 0; k0 < s.K; k0 += kPanelRows) {
    const GemmShape panel{
        .M = s.M, .N = s.N, .K = std::min(kPanelRows, s.K - k0), .accumulate = s.accumulate || k0 > 0};
    onednn().run(panel, false, A + k0, B + k0 * s.N, C, k0 == 0 ? bias : nullptr, s.K);
  }
}

}  // namespace

void onednn_gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  onednn().run(s, false, A, B, C, bias);
}

// The primitive with its weights in format_tag::any, and the packed weights it chose (owned).
struct OneDnnPackedB::Impl {
  dnnl::matmul primitive;
  dnnl::memory a, b, c;
};

OneDnnPackedB::OneDnnPackedB(const GemmShape& s, bool bf16, const void* B) : impl_(std::make_unique<Impl>()) {
  if (bf16) require_bf16();
  using dt = dnnl::memory::data_type;
  using dims = dnnl::memory::dims;
  OneDnn& d = onednn();
  const dt in = bf16 ? dt::bf16 : dt::f32;
  const dnnl::memory::desc a({s.M, s.K}, in, s.trans_a ? dims{1, s.M} : dims{s.K, 1});
  const dnnl::memory::desc plain_b({s.K, s.N}, in, s.trans_b ? dims{1, s.K} : dims{s.N, 1});
  const dnnl::memory::desc any_b({s.K, s.N}, in, dnnl::memory::format_tag::any);
  const dnnl::memory::desc c({s.M, s.N}, dt::f32, dims{s.N, 1});
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, any_b, c), accumulate_attr(s), d.engine);
  impl_->primitive = dnnl::matmul(pd);
  impl_->a = dnnl::memory(a, d.engine, DNNL_MEMORY_NONE);
  impl_->b = dnnl::memory(pd.weights_desc(), d.engine);  // allocated by oneDNN, held here
  impl_->c = dnnl::memory(c, d.engine, DNNL_MEMORY_NONE);
  dnnl::memory source(plain_b, d.engine, const_cast<void*>(B));
  dnnl::reorder(source, impl_->b).execute(d.stream, source, impl_->b);
  d.stream.wait();
}

OneDnnPackedB::~OneDnnPackedB() = default;

void OneDnnPackedB::gemm(const void* A, float* C) const {
  impl_->a.set_data_handle(const_cast<void*>(A));
  impl_->c.set_data_handle(C);
  OneDnn& d = onednn();
  impl_->primitive.execute(d.stream,
                           {{DNNL_ARG_SRC, impl_->a}, {DNNL_ARG_WEIGHTS, impl_->b}, {DNNL_ARG_DST, impl_->c}});
  d.stream.wait();
}

void onednn_gemm_f32_panels(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  if (s.trans_a || s.trans_b) throw RuntimeError("onednn_gemm_f32_panels: the panel route takes untransposed operands");
  run_panels(s, A, B, C, bias);
}

void onednn_gemm_bf16(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias) {
  require_bf16();
  onednn().run(s, true, A, B, C, bias);
}

void onednn_gemm_f32_transposed(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  run_transposed(s, false, A, B, C, bias);
}

namespace {
void onednn_gemm_bf16_packed(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias) {
  onednn().run_packed(s, A, B, C, bias);
}
}  // namespace

void onednn_gemm_bf16_transposed(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C,
                                 const float* bias) {
  require_bf16();
  run_transposed(s, true, A, B, C, bias);
}

void gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  switch (f32_route(s)) {
    case GemmRoute::kOpenBlas:
      return openblas_gemm_f32(s, A, B, C, bias);
    case GemmRoute::kTransposed:
      return onednn_gemm_f32_transposed(s, A, B, C, bias);
    case GemmRoute::kPanels:
      return onednn_gemm_f32_panels(s, A, B, C, bias);
    case GemmRoute::kDirect:
      return onednn_gemm_f32(s, A, B, C, bias);
  }
}

std::string_view matmul_backend_name() {
  static const std::string name =
      openblas_runs_avx512() ? "oneDNN 2.6 matmul (fp32 weight gradients: OpenBLAS sgemm)" : "oneDNN 2.6 matmul";
  return name;
}

bool bf16_supported() {
  static const bool supported = cpu_has_avx512_bf16();
  return supported;
}

std::string_view bf16_unsupported_reason() {
  return bf16_supported() ? "" : "this CPU lacks AVX512-BF16 (bf16 products would be emulated, slower than fp32)";
}

#else  // built without oneDNN

namespace {
[[noreturn]] void no_onednn() {
  throw RuntimeError("oneDNN: parlab was built without it (install libdnnl-dev: scripts/install-deps.sh)");
}
bool cpu_has_amx_bf16() { return false; }
bool packed_layout_fits(int64_t, int64_t) { return false; }
void require_bf16() { no_onednn(); }
void onednn_gemm_bf16_packed(const GemmShape&, const uint16_t*, const uint16_t*, float*, const float*) { no_onednn(); }
}  // namespace

void onednn_gemm_f32(const GemmShape&, const float*, const float*, float*, const float*) { no_onednn(); }
struct OneDnnPackedB::Impl {};
OneDnnPackedB::OneDnnPackedB(const GemmShape&, bool, const void*) { no_onednn(); }
OneDnnPackedB::~OneDnnPackedB() = default;
void OneDnnPackedB::gemm(const void*, float*) const { no_onednn(); }
void onednn_gemm_bf16(const GemmShape&, const uint16_t*, const uint16_t*, float*, const float*) { no_onednn(); }
void onednn_gemm_f32_transposed(const GemmShape&, const float*, const float*, float*, const float*) { no_onednn(); }
void onednn_gemm_f32_panels(const GemmShape&, const float*, const float*, float*, const float*) { no_onednn(); }
void onednn_gemm_bf16_transposed(const GemmShape&, const uint16_t*, const uint16_t*, float*, const float*) {
  no_onednn();
}

void gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  openblas_gemm_f32(s, A, B, C, bias);
}

std::string_view matmul_backend_name() { return "OpenBLAS sgemm"; }
bool bf16_supported() { return false; }
std::string_view bf16_unsupported_reason() {
  return "parlab was built without oneDNN (install libdnnl-dev: scripts/install-deps.sh)";
}

#endif

void gemm_bf16(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias) {
  if (bf16_route(s) == GemmRoute::kTransposed) return onednn_gemm_bf16_transposed(s, A, B, C, bias);
  onednn_gemm_bf16(s, A, B, C, bias);
}

namespace {
// op(B)'s (K, N) of the product that reads W (OC, C) for `use`.
std::pair<int64_t, int64_t> op_b_dims(int64_t OC, int64_t C, WeightUse use) {
  return use == WeightUse::kForward ? std::pair{C, OC} : std::pair{OC, C};
}
}  // namespace

PreparedLayout prepared_layout_bf16(int64_t OC, int64_t C, WeightUse use) {
  static const bool packed_wins = bf16_supported() && !cpu_has_amx_bf16();
  if (!packed_wins) return PreparedLayout::kTransposedRoute;
  const auto [K, N] = op_b_dims(OC, C, use);
  return packed_layout_fits(K, N) ? PreparedLayout::kOneDnnPacked : PreparedLayout::kTransposedRoute;
}

PreparedWeightBf16 prepare_weight_bf16(uint16_t* out, const float* W, int64_t OC, int64_t C, WeightUse use) {
  return prepare_weight_bf16(out, W, OC, C, use, prepared_layout_bf16(OC, C, use));
}

void prepare_weight_bf16_pair(uint16_t* forward, uint16_t* input_grad, const float* W, int64_t OC, int64_t C) {
  if (prepared_layout_bf16(OC, C, WeightUse::kForward) == PreparedLayout::kOneDnnPacked &&
      prepared_layout_bf16(OC, C, WeightUse::kInputGrad) == PreparedLayout::kOneDnnPacked && OC % 64 == 0 &&
      C % 64 == 0)
    return to_bf16_k32n64_blocked_pair(forward, input_grad, W, OC, C);
  prepare_weight_bf16(forward, W, OC, C, WeightUse::kForward);
  prepare_weight_bf16(input_grad, W, OC, C, WeightUse::kInputGrad);
}

PreparedWeightBf16 prepared_view_bf16(const uint16_t* data, int64_t OC, int64_t C, WeightUse use) {
  return {.data = data, .OC = OC, .C = C, .use = use, .layout = prepared_layout_bf16(OC, C, use)};
}

PreparedWeightBf16 prepare_weight_bf16(uint16_t* out, const float* W, int64_t OC, int64_t C, WeightUse use,
                                       PreparedLayout layout) {
  if (layout == PreparedLayout::kOneDnnPacked) {
    require_bf16();
    const auto [K, N] = op_b_dims(OC, C, use);
    if (!packed_layout_fits(K, N))
      throw RuntimeError("prepare_weight_bf16: oneDNN's packed layout of a " + std::to_string(OC) + " x " +
                         std::to_string(C) + " weight is padded or missing here");
    to_bf16_k32n64_blocked(out, W, K, N, use == WeightUse::kForward);
  } else if (use == WeightUse::kForward) {
    to_bf16(out, W, OC * C);
  } else {
    to_bf16_transposed(out, W, OC, C);
  }
  return {.data = out, .OC = OC, .C = C, .use = use, .layout = layout};
}

// A packed copy runs on oneDNN's primitive for its layout. The transposed route's two layouts
// store op(B) transposed: W (OC, C) is the forward's op(B) = W^T read
// transposed, W^T (C, OC) the input gradient's op(B) = W read transposed. So the product is the
// plain one on that storage, routed by its shape like any other.
void gemm_bf16(const GemmShape& s, const uint16_t* A, const PreparedWeightBf16& w, float* C, const float* bias) {
  const bool forward = w.use == WeightUse::kForward;
  const bool matches =
      !s.trans_a && (forward ? s.trans_b && s.K == w.C && s.N == w.OC : !s.trans_b && s.K == w.OC && s.N == w.C);
  if (!matches)
    throw RuntimeError(std::string("gemm_bf16: the shape is not the ") + (forward ? "forward" : "input-gradient") +
                       " product of the prepared " + std::to_string(w.OC) + " x " + std::to_string(w.C) + " weight");
  if (w.layout == PreparedLayout::kOneDnnPacked) return onednn_gemm_bf16_packed(s, A, w.data, C, bias);
  GemmShape stored = s;
  stored.trans_b = true;
  gemm_bf16(stored, A, w.data, C, bias);
}

// Measured on the lab's shapes (bench_gemm and bench_model, one Sapphire Rapids core, oneDNN 2.6,
// OpenBLAS 0.3.21): the forward product (M the microbatch, N a layer's width, the weight read
// transposed) runs 15-40% faster computed as C^T, where oneDNN streams the weight as the wide
// left operand; the fp32 input-gradient product (M the microbatch, the weight B untransposed,
// K a layer's width) runs 25-35% faster in panels of 128 weight rows (run_panels; computed as
// C^T or whole it runs at 47-52 GFLOP/s, in panels at 62-70, as fast as on a weight oneDNN has
// packed ahead; issue 35), while its bf16 twin is fastest whole (AMX packs a whole bf16 weight at
// 93-102 GFLOP/s, panels of 128 rows at 62-74); the fp32 weight-gradient product (its
// reduction is the microbatch) runs ~25% faster in OpenBLAS than in oneDNN. bf16 weight
// gradients stay on oneDNN: Debian's OpenBLAS 0.3.21 has no bf16 GEMM.
//
// Prepared bf16 weights (issue 35; a 2-core Sapphire Rapids VM with AMX, shared, load 0.6-1.7,
// oneDNN's brg:avx512_core_amx_bf16; the lab's 16 block weights in turn, so each comes from
// memory as in a step; microbatch 64, thread CPU time, median of 9 rounds, two runs): the input
// gradient on a plain bf16 W runs at 103-108 GFLOP/s (oneDNN repacks 8 MB per call), on oneDNN's
// own layout packed ahead at 133-138, on W^T as C^T (the prepared layout) at 148-156; the
// forward as C^T on W at 140-161, on oneDNN's packed layout at 135-140. Preparing W^T is one
// streaming pass, 3 ms a weight like to_bf16's, where to_bf16 and oneDNN's reorder take 3x that.
// With one shape's weight reused (bench_gemm's second table) oneDNN's packed layout can come out
// ahead (fc1's input gradient 135 against 109), not in a step: there bench_model's mixed
// input-gradient products went from 0.67 to 0.50 s. So both prepared products take the
// transposed route by their stored shape (a trans_b product, M = 64, N >= 8 M). A head-sized
// input gradient (K = 16) would crawl on it (10-15 GFLOP/s): the head stays fp32, never prepared.
// On a Zen 5 core without AMX (2-core VM, avx512_core_bf16 brgemm; bench_gemm, 16 weights in
// turn, 2026-12-04) the order turns: the forward on oneDNN's packed layout at 397-401 GFLOP/s
// against 308-346 as C^T on W, the input gradient at 383-402 against 310-351 on W^T. So where the
// CPU has AVX512-BF16 but no AMX, prepared_layout_bf16 takes the packed layout (BA16a64b2a, which
// to_bf16_k32n64_blocked writes in one pass: oneDNN's own reorder into it took 2.5 ms a weight,
// 3x to_bf16); bench_model's mixed products went from 0.213 + 0.216 to 0.174 + 0.172 s a step.
// A shape that is not whole 32 x 64 blocks keeps the transposed route (its packed copy would be
// padded, larger than the ledger's 2 B a parameter).
//
// fp32's input gradient on an fp32 W^T runs at 80-81 against 51-55 in panels and 75-76 packed,
// but that is a second fp32 copy of every block weight, which the fp32 ledger (4 B a parameter,
// PyTorch's) does not have: left as the panels.
//
// The fp32 weight gradient goes to OpenBLAS only where OpenBLAS runs an AVX-512 kernel. On a Zen 5
// core (2-core VM, issue 35) Debian's OpenBLAS 0.3.21 runs its Haswell (AVX2) kernels: the lab's
// weight gradients at 84-90 GFLOP/s there, in oneDNN at 187-192 (bench_gemm), and bench_model's
// fp32 step spent 0.70-0.87 s of 1.63-1.99 in them. The choice is the machine's, not a
// measurement's, so every run on one machine takes the same route (the same bits).
bool openblas_runs_avx512() {
  static const bool avx512 = [] {
    std::string core = openblas_get_corename();
    std::transform(core.begin(), core.end(), core.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    for (const char* k : {"skylakex", "cooperlake", "sapphirerapids"})
      if (core.find(k) != std::string::npos) return true;
    return false;
  }();
  return avx512;
}

GemmRoute f32_route(const GemmShape& s) {
  if (matmul_backend_name() == "OpenBLAS sgemm") return GemmRoute::kOpenBlas;
  if (s.trans_a && s.K <= kSmallDim) return openblas_runs_avx512() ? GemmRoute::kOpenBlas : GemmRoute::kDirect;
  if (!s.trans_a && !s.trans_b && s.M <= kSmallDim && s.K >= 2 * kPanelRows) return GemmRoute::kPanels;
  return small_m_wide_n(s) ? GemmRoute::kTransposed : GemmRoute::kDirect;
}

GemmRoute bf16_route(const GemmShape& s) { return small_m_wide_n(s) ? GemmRoute::kTransposed : GemmRoute::kDirect; }

}  // namespace parlab::compute::cpu
