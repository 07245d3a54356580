// bench_gemm: the lab network's matrix products on one thread, per library, so the kernel
// backend is chosen by measurement. For every layer of lab-mlp and lab-mlp-small (fc1, fc2,
// head) and every microbatch the experiments use, the three GEMMs of a linear layer:
//   fwd    out (B, OC)  = inp (B, C) @ W^T        M = B,  N = OC, K = C
//   dinp   dinp (B, C) += dout (B, OC) @ W        M = B,  N = C,  K = OC
//   dW     dW (OC, C)  += dout^T @ inp            M = OC, N = C,  K = B
// run by OpenBLAS (cblas_sgemm), BLIS (bli_sgemm), oneDNN (its matmul primitive, the code path
// of PyTorch's CPU linear) in fp32, and oneDNN's matmul with bf16 inputs and fp32 accumulation
// (what precision=mixed uses), and oneDNN computing the transposed product C^T = op(B)^T op(A)^T
// then transposing it into C, in fp32 and bf16 (the route gemm_f32 / gemm_bf16 take for forward
// products, matmul.cpp). Each cell is the median GFLOP/s over --repeats timed runs, with
// the spread (min..max) beside it, libraries interleaved so load on a shared machine hits all.
// `det` says whether two runs of the same product gave the same bits.
//
// A second table takes the products that read a weight every microbatch (fwd, dinp) with the
// weight laid out ahead of them, as a step can do once for all its microbatches: oneDNN's own
// packed layout (its weights memory in format_tag::any, reordered once: OneDnnPackedB), and the
// prepared bf16 copies the mixed model computes on (matmul.h's prepare_weight_bf16: W for fwd,
// W^T for dinp, each the wide left operand of the C^T route), beside fp32's dinp on a W^T copy
// the same way; "as stored" is what gemm_f32 / gemm_bf16 run on the plain weight. prepare: the
// milliseconds prepare_weight_bf16 takes for the weight, to_bf16 beside it. Each call reads the
// next of --cold-weights copies, so the weight comes from memory as in a step (one weight reused
// call after call sits in the last-level cache, and there oneDNN's packed layout runs fastest).
//
// Goal (printed, never asserted): the backend the runtime uses is the fastest deterministic
// fp32 one on the shapes that dominate a step (lab-mlp fc1/fc2 at its microbatch).
#include <blis.h>
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/matmul.h"

namespace {

using namespace parlab;
namespace cpu = compute::cpu;

struct Shape {
  std::string name;
  int64_t M, N, K;
  bool ta, tb;  // row-major op(A) (M, K), op(B) (K, N)
};

std::vector<Shape> lab_shapes(const std::vector<int64_t>& batches) {
  struct Layer {
    const char* name;
    int64_t C, OC;
  };
  const Layer layers[] = {{"mlp fc1", 1024, 4096},  {"mlp fc2", 4096, 1024},  {"mlp head", 1024, 16},
                          {"small fc1", 256, 1024}, {"small fc2", 1024, 256}, {"small head", 256, 16}};
  std::vector<Shape> out;
  for (const Layer& l : layers) {
    const bool small = std::string(l.name).starts_with("small");
    for (int64_t B : batches) {
      if (small != (B <= 32)) continue;  // lab-mlp trains at microbatch 64, lab-mlp-small at 32
      const std::string tag = std::string(l.name) + " B=" + std::to_string(B);
      out.push_back({tag + " fwd", B, l.OC, l.C, false, true});
      out.push_back({tag + " dinp", B, l.C, l.OC, false, false});
      out.push_back({tag + " dW", l.OC, l.C, B, true, false});
      // The same product with dout^T stored (OC, B): the layout a transposing bf16 conversion gives.
      out.push_back({tag + " dW (A^T stored)", l.OC, l.C, B, false, false});
    }
  }
  return out;
}

struct Cell {
  std::vector<double> gflops;
  bool deterministic = true;
  std::vector<float> first;
};

// Runs each of `libs` (writing C) twice for determinism, then `repeats` timed rounds, libraries
// interleaved, `between` (when given) before each timed call; prints "| median [min..max] det"
// per library, "n/a" where `skip` says so.
void measure_row(const std::vector<std::function<void()>>& libs, const std::vector<bool>& skip, std::vector<float>& C,
                 double flops, int repeats, double min_seconds, const std::function<void()>& between = {}) {
  std::vector<Cell> cells(libs.size());
  for (size_t l = 0; l < libs.size(); ++l) {  // warm-up (primitive creation) + determinism
    if (skip[l]) continue;
    for (int k = 0; k < 2; ++k) {
      std::fill(C.begin(), C.end(), 0.0f);
      libs[l]();
      if (k == 0)
        cells[l].first = C;
      else
        cells[l].deterministic = std::memcmp(C.data(), cells[l].first.data(), C.size() * 4) == 0;
    }
  }
  for (int r = 0; r < repeats; ++r)
    for (size_t l = 0; l < libs.size(); ++l)
      if (!skip[l]) {
        const std::function<void()> call = [&] {
          if (between) between();
          libs[l]();
        };
        cells[l].gflops.push_back(flops * parlab::bench::calls_per_second(call, min_seconds) / 1e9);
      }
  for (size_t l = 0; l < libs.size(); ++l) {
    if (skip[l]) {
      std::printf(" | %-22s", "n/a");
      continue;
    }
    const parlab::bench::Range g = parlab::bench::range_of(cells[l].gflops);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%6.1f [%5.1f..%5.1f] %s", g.median, g.lo, g.hi,
                  cells[l].deterministic ? "det" : "NDET");
    std::printf(" | %-22s", buf);
  }
}

// One weight (OC, C) in every layout the second table compares.
struct LaidOut {
  std::vector<float> W, Wt;            // fp32 W (OC, C) and W^T (C, OC)
  std::vector<uint16_t> Wb, prepared;  // bf16 W as stored, and prepared for the product
  std::unique_ptr<cpu::OneDnnPackedB> packed32, packed16;
  cpu::PreparedWeightBf16 view;
};

LaidOut lay_out(const std::vector<float>& W, int64_t OC, int64_t C, const cpu::GemmShape& g, cpu::WeightUse use,
                bool bf16) {
  LaidOut w{W,
            std::vector<float>(W.size()),
            std::vector<uint16_t>(W.size()),
            std::vector<uint16_t>(W.size()),
            nullptr,
            nullptr,
            {}};
  for (int64_t o = 0; o < OC; ++o)
    for (int64_t c = 0; c < C; ++c) w.Wt[c * OC + o] = W[o * C + c];
  cpu::to_bf16(w.Wb.data(), W.data(), OC * C);
  w.packed32 = std::make_unique<cpu::OneDnnPackedB>(g, false, W.data());
  if (bf16) {
    w.packed16 = std::make_unique<cpu::OneDnnPackedB>(g, true, w.Wb.data());
    w.view = cpu::prepare_weight_bf16(w.prepared.data(), W.data(), OC, C, use);
  }
  return w;
}

// The second table: fwd and dinp with the weight laid out ahead (see the header), each timed call
// on the next of `copies` weights, so the weight comes from memory as in a step.
void prepared_table(const std::vector<Shape>& shapes, bool bf16, int repeats, double min_seconds, int copies) {
  std::printf("\nweights laid out ahead, %d weights in turn (GFLOP/s as above; prepare: ms per weight, median of %d)\n",
              copies, repeats);
  std::printf("%-30s | %-22s | %-22s | %-22s | %-22s | %-22s | %-22s | %s\n", "shape", "fp32 as stored",
              "fp32 oneDNN packed", "fp32 on W^T as C^T", "bf16 as stored", "bf16 oneDNN packed", "bf16 prepared",
              "prepare / to_bf16");
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : shapes) {
    const bool fwd = s.tb, dinp = !s.ta && !s.tb && !s.name.ends_with("stored)");
    if (!fwd && !dinp) continue;
    // The layer's weight W (OC, C): fwd reads it as op(B) = W^T (K = C, N = OC), dinp as B = W (K = OC, N = C).
    const int64_t OC = fwd ? s.N : s.K, C = fwd ? s.K : s.N;
    std::vector<float> A(s.M * s.K), W(OC * C), Cm(s.M * s.N);
    for (float& x : A) x = dist(gen);
    for (float& x : W) x = dist(gen);
    std::vector<uint16_t> Ab(A.size());
    cpu::to_bf16(Ab.data(), A.data(), static_cast<int64_t>(A.size()));
    const cpu::WeightUse use = fwd ? cpu::WeightUse::kForward : cpu::WeightUse::kInputGrad;
    const cpu::GemmShape g{.M = s.M, .N = s.N, .K = s.K, .trans_a = false, .trans_b = s.tb, .accumulate = dinp};
    const cpu::GemmShape on_wt{.M = s.M, .N = s.N, .K = s.K, .trans_b = true, .accumulate = true};
    std::vector<LaidOut> w;
    for (int i = 0; i < copies; ++i) w.push_back(lay_out(W, OC, C, g, use, bf16));
    size_t k = 0;  // the weight the next call reads
    const std::vector<std::function<void()>> libs{
        [&] { cpu::gemm_f32(g, A.data(), w[k].W.data(), Cm.data()); },
        [&] { w[k].packed32->gemm(A.data(), Cm.data()); },
        [&] { cpu::onednn_gemm_f32_transposed(on_wt, A.data(), w[k].Wt.data(), Cm.data()); },
        [&] { cpu::gemm_bf16(g, Ab.data(), w[k].Wb.data(), Cm.data()); },
        [&] { w[k].packed16->gemm(Ab.data(), Cm.data()); },
        [&] { cpu::gemm_bf16(g, Ab.data(), w[k].view, Cm.data()); },
    };
    const std::vector<bool> skip{false, false, fwd, !bf16, !bf16, !bf16};
    std::printf("%-30s", s.name.c_str());
    measure_row(libs, skip, Cm, 2.0 * s.M * s.N * s.K, repeats, min_seconds, [&] { k = (k + 1) % w.size(); });
    std::vector<double> prep, plain;
    for (int r = 0; r < repeats; ++r) {
      LaidOut& x = w[r % w.size()];
      prep.push_back(
          parlab::bench::seconds_of([&] { cpu::prepare_weight_bf16(x.prepared.data(), x.W.data(), OC, C, use); }));
      plain.push_back(parlab::bench::seconds_of([&] { cpu::to_bf16(x.Wb.data(), x.W.data(), OC * C); }));
    }
    std::printf(" | %.2f / %.2f\n", 1e3 * parlab::median(prep), 1e3 * parlab::median(plain));
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_gemm: lab-mlp GEMM shapes on one thread, OpenBLAS vs BLIS vs oneDNN (fp32) and oneDNN bf16"};
  int repeats = 7;
  double min_seconds = 0.05;
  std::vector<int64_t> batches{64, 32};
  app.add_option("--repeats", repeats, "timed runs per library and shape (median and spread)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--min-seconds", min_seconds, "each timed run repeats the product for at least this long")
      ->check(CLI::Range(0.001, 10.0));
  app.add_option("--batches", batches, "microbatch sizes (lab-mlp uses 64, lab-mlp-small 32)");
  int cold_weights = 16;
  app.add_option("--cold-weights", cold_weights,
                 "weights the second table reads in turn (16: a lab-mlp step's, 8 blocks x fc1 and fc2)")
      ->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  compute::pin_blas_to_one_thread();
  bli_thread_set_num_threads(1);
  const bool bf16 = cpu::bf16_supported();
  std::printf("bench_gemm: one thread; backend in use: %s; bf16 matmul: %s; load %s\n",
              std::string(cpu::matmul_backend_name()).c_str(), bf16 ? "yes (AVX512-BF16)" : "no",
              parlab::bench::load_average().c_str());
  std::printf("GFLOP/s: median [min..max] of %d runs; det = two runs gave identical bits\n\n", repeats);
  std::printf("%-30s %6s %6s %6s | %-22s | %-22s | %-22s | %-22s | %-22s | %-22s\n", "shape", "M", "N", "K", "OpenBLAS",
              "BLIS", "oneDNN fp32", "oneDNN bf16", "oneDNN fp32 as C^T", "oneDNN bf16 as C^T");

  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const Shape& s : lab_shapes(batches)) {
    std::vector<float> A(s.M * s.K), B(s.K * s.N), C(s.M * s.N);
    for (float& x : A) x = dist(gen);
    for (float& x : B) x = dist(gen);
    std::vector<uint16_t> Ab(A.size()), Bb(B.size());
    cpu::to_bf16(Ab.data(), A.data(), static_cast<int64_t>(A.size()));
    cpu::to_bf16(Bb.data(), B.data(), static_cast<int64_t>(B.size()));
    const int64_t lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
    const cpu::GemmShape g{.M = s.M, .N = s.N, .K = s.K, .trans_a = s.ta, .trans_b = s.tb, .accumulate = false};
    const double flops = 2.0 * s.M * s.N * s.K;

    std::vector<std::function<void()>> libs{
        [&] {
          cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                      1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), s.N);
        },
        [&] {
          float one = 1.0f, zero = 0.0f;
          // BLIS takes general strides: row-major (rs = ld, cs = 1).
          bli_sgemm(s.ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s.tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, s.M, s.N, s.K,
                    &one, A.data(), lda, 1, B.data(), ldb, 1, &zero, C.data(), s.N, 1);
        },
        [&] { cpu::onednn_gemm_f32(g, A.data(), B.data(), C.data()); },
        [&] {
          if (bf16) cpu::onednn_gemm_bf16(g, Ab.data(), Bb.data(), C.data());
        },
        [&] { cpu::onednn_gemm_f32_transposed(g, A.data(), B.data(), C.data()); },
        [&] {
          if (bf16) cpu::onednn_gemm_bf16_transposed(g, Ab.data(), Bb.data(), C.data());
        },
    };
    std::printf("%-30s %6lld %6lld %6lld", s.name.c_str(), static_cast<long long>(s.M), static_cast<long long>(s.N),
                static_cast<long long>(s.K));
    measure_row(libs, {false, false, false, !bf16, false, !bf16}, C, flops, repeats, min_seconds);
    std::printf("\n");
  }
  prepared_table(lab_shapes(batches), bf16, repeats, min_seconds, cold_weights);
  return 0;
}
