#include "runtime/compute/cpu/matmul.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <tuple>
#include <unordered_map>

#include "strategy/errors.h"

#if PARLAB_HAVE_DNNL
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace parlab::compute::cpu {

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
  cblas_sgemm(CblasRowMajor, s.trans_a ? CblasTrans : CblasNoTrans, s.trans_b ? CblasTrans : CblasNoTrans, s.M,
              s.N, s.K, 1.0f, A, s.trans_a ? s.M : s.K, B, s.trans_b ? s.K : s.N, beta, C, s.N);
}

#if PARLAB_HAVE_DNNL
namespace {

// One engine and stream per thread (a rank), and the primitives it has built, by shape. Building
// a matmul primitive takes ~0.1 ms (it JIT-compiles its kernel); a step runs the same dozen
// shapes thousands of times.
struct OneDnn {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  using Key = std::tuple<int64_t, int64_t, int64_t, bool, bool, bool, bool, bool>;
  // A built primitive and memory objects for its arguments, re-pointed at each call's buffers.
  struct Entry {
    dnnl::matmul primitive;
    dnnl::memory a, b, c, bias;
  };
  std::map<Key, Entry> primitives;

  OneDnn() {
    // This Debian build threads with OpenMP: one thread per rank, set for the calling thread.
    omp_set_num_threads(1);
  }

  Entry& get(const GemmShape& s, bool bf16, bool bias) {
    const Key key{s.M, s.N, s.K, s.trans_a, s.trans_b, s.accumulate, bf16, bias};
    auto it = primitives.find(key);
    if (it != primitives.end()) return it->second;
    using dt = dnnl::memory::data_type;
    using dims = dnnl::memory::dims;
    const dt in = bf16 ? dt::bf16 : dt::f32;
    // Row-major storage of op(A) (M, K) and op(B) (K, N) as strides: a transposed operand is
    // the same buffer read with swapped strides.
    const dnnl::memory::desc a({s.M, s.K}, in, s.trans_a ? dims{1, s.M} : dims{s.K, 1});
    const dnnl::memory::desc b({s.K, s.N}, in, s.trans_b ? dims{1, s.K} : dims{s.N, 1});
    const dnnl::memory::desc c({s.M, s.N}, dt::f32, dims{s.N, 1});
    const dnnl::memory::desc bias_md = bias ? dnnl::memory::desc({1, s.N}, dt::f32, dims{s.N, 1}) : dnnl::memory::desc();
    dnnl::primitive_attr attr;
    if (s.accumulate) {
      dnnl::post_ops ops;
      ops.append_sum(1.0f);  // C = op(A) op(B) + bias + C, one pass over C
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, bias_md, c), attr, engine);
    Entry e{dnnl::matmul(pd), dnnl::memory(a, engine, DNNL_MEMORY_NONE), dnnl::memory(b, engine, DNNL_MEMORY_NONE),
            dnnl::memory(c, engine, DNNL_MEMORY_NONE),
            bias ? dnnl::memory(bias_md, engine, DNNL_MEMORY_NONE) : dnnl::memory()};
    return primitives.emplace(key, std::move(e)).first->second;
  }

  void run(const GemmShape& s, bool bf16, const void* A, const void* B, float* C, const float* bias) {
    if (s.M == 0 || s.N == 0) return;
    if (s.K == 0) {  // oneDNN rejects empty reductions: C = bias (+ C)
      openblas_gemm_f32(s, nullptr, nullptr, C, bias);
      return;
    }
    Entry& e = get(s, bf16, bias != nullptr);
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

}  // namespace

void onednn_gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  onednn().run(s, false, A, B, C, bias);
}

void onednn_gemm_bf16(const GemmShape& s, const uint16_t* A, const uint16_t* B, float* C, const float* bias) {
  if (!bf16_supported()) throw RuntimeError(std::string("bf16 matmul: ") + std::string(bf16_unsupported_reason()));
  onednn().run(s, true, A, B, C, bias);
}

void gemm_f32(const GemmShape& s, const float* A, const float* B, float* C, const float* bias) {
  onednn_gemm_f32(s, A, B, C, bias);
}

std::string_view matmul_backend_name() { return "oneDNN 2.6 matmul"; }

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
}  // namespace

void onednn_gemm_f32(const GemmShape&, const float*, const float*, float*, const float*) { no_onednn(); }
void onednn_gemm_bf16(const GemmShape&, const uint16_t*, const uint16_t*, float*, const float*) { no_onednn(); }

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
  onednn_gemm_bf16(s, A, B, C, bias);
}

}  // namespace parlab::compute::cpu
