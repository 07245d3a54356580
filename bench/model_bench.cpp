// bench_model: one lab-mlp forward+backward step on one core, against the same sgemm calls alone.
//
// Goal (the lead's): the step runs within 10% of its sgemm FLOPs at the measured sgemm rate,
// i.e. sgemm_seconds / step_seconds >= 0.90. The step's FLOPs are counted, not measured:
//   3 x [2 B (h f + f h) L + 2 B h C]   (forward, then backward = dinp + dweight = 2x forward)
// The sgemm reference replays exactly the step's 6 L + 3 calls (same M, N, K, transposes and
// beta), once on one reused set of buffers (hot caches: the classic sgemm benchmark) and once
// with distinct buffers per call (as the model's per-layer weights); the differences separate
// operand memory traffic from the non-GEMM work (GELU, bias broadcasts and sums, residual adds,
// copies, softmax, allocation, data generation).
//
// The jobs run round-robin (one repetition of each in turn) and are timed in process CPU time as
// well as wall time, so other processes on a shared machine slow all of them alike and the CPU
// figures stay meaningful. Prints figures; never fails on noise.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/data.h"
#include "strategy/stats.h"

namespace {

using parlab::model::LabMlp;
using parlab::model::MlpShape;
namespace cpu = parlab::compute::cpu;

double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Job {
  std::string name;
  std::function<void()> run;
  bool show_rate = false;
  std::vector<double> cpu, wall;
  double median_cpu() const { return parlab::strategy::median(cpu); }
  double median_wall() const { return parlab::strategy::median(wall); }
};

// One sgemm call of the step: C (M, N) = op(A) op(B) + beta C, row-major.
struct Gemm {
  CBLAS_TRANSPOSE ta, tb;
  int64_t M, N, K;
  float beta;
};

void run_gemm(const Gemm& g, const float* a, const float* b, float* c) {
  // Through the kernels' matmul backend (oneDNN or OpenBLAS), as LabMlp runs it.
  parlab::compute::cpu::gemm_f32({.M = g.M, .N = g.N, .K = g.K, .trans_a = g.ta == CblasTrans, .trans_b = g.tb == CblasTrans,
                          .accumulate = g.beta != 0.0f},
                         a, b, c);
}

// The calls LabMlp makes for one microbatch of B (see runtime/compute/cpu/linear.cpp).
std::vector<Gemm> step_gemms(const MlpShape& s, int64_t B) {
  std::vector<Gemm> gemms;
  auto forward = [&](int64_t in, int64_t out) {
    gemms.push_back({CblasNoTrans, CblasTrans, B, out, in, 1.0f});  // out = bias + inp W^T
  };
  auto backward = [&](int64_t in, int64_t out) {
    gemms.push_back({CblasNoTrans, CblasNoTrans, B, in, out, 1.0f});  // dinp += dout W
    gemms.push_back({CblasTrans, CblasNoTrans, out, in, B, 1.0f});    // dW += dout^T inp
  };
  for (int64_t l = 0; l < s.blocks; ++l) {
    forward(s.hidden, s.ffn);
    forward(s.ffn, s.hidden);
  }
  forward(s.hidden, s.classes);
  backward(s.hidden, s.classes);
  for (int64_t l = 0; l < s.blocks; ++l) {
    backward(s.ffn, s.hidden);
    backward(s.hidden, s.ffn);
  }
  return gemms;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lab-mlp step time vs sgemm at the same shapes (one core)"};
  int64_t hidden = 1024, ffn = 4096, blocks = 8, classes = 16, batch = 64;
  int reps = 7;
  app.add_option("--hidden", hidden, "h");
  app.add_option("--ffn", ffn, "f");
  app.add_option("--blocks", blocks, "L");
  app.add_option("--classes", classes, "C");
  app.add_option("--batch", batch, "microbatch B");
  app.add_option("--reps", reps, "timed repetitions of each job (after one warm-up)");
  CLI11_PARSE(app, argc, argv);

  parlab::compute::pin_blas_to_one_thread();
  const MlpShape shape{.hidden = hidden, .ffn = ffn, .blocks = blocks, .classes = classes};
  LabMlp model(shape, 1);
  const parlab::train::SyntheticDataset data(
      {.seed = 2, .size = batch, .width = hidden, .classes = classes});
  std::vector<int64_t> indices(batch);
  for (int64_t i = 0; i < batch; ++i) indices[i] = i;
  const double flops = LabMlp::step_matmul_flops(shape, batch);

  const std::vector<Gemm> gemms = step_gemms(shape, batch);
  int64_t max_elems = 0;
  for (const Gemm& g : gemms) max_elems = std::max({max_elems, g.M * g.K, g.K * g.N, g.M * g.N});
  std::vector<float> a(max_elems, 0.01f), b(max_elems, 0.02f), c(max_elems, 0.0f);
  std::vector<std::vector<float>> as, bs, cs;
  for (const Gemm& g : gemms) {
    as.emplace_back(g.M * g.K, 0.01f);
    bs.emplace_back(g.K * g.N, 0.02f);
    cs.emplace_back(g.M * g.N, 0.0f);
  }
  // Stand-ins for the non-GEMM work of L blocks, at the same sizes.
  const int64_t bf = batch * ffn, bh = batch * hidden;
  std::vector<float> x(bf, 0.5f), y(bf), dy(bf, 0.1f), bias(ffn, 0.0f), dbias(ffn, 0.0f);
  std::vector<float> xs(bh);
  std::vector<int32_t> labels(batch);
  parlab::model::MicrobatchState mb = model.new_microbatch(batch, batch);

  std::vector<Job> jobs;
  auto add = [&jobs](std::string name, std::function<void()> run, bool show_rate = false) {
    jobs.push_back(Job{std::move(name), std::move(run), show_rate, {}, {}});
  };
  add(
      "lab-mlp forward+backward step",
      [&] {
        parlab::model::MicrobatchState fresh = model.new_microbatch(batch, batch);
        data.fill(indices, fresh);
        model.forward(fresh);
        model.backward(fresh);
      },
      true);
  add(
      "  forward+backward only",
      [&] {
        model.forward(mb);
        model.backward(mb);
      },
      true);
  add(
      "sgemm alone, hot buffers",
      [&] {
        for (const Gemm& g : gemms) run_gemm(g, a.data(), b.data(), c.data());
      },
      true);
  add(
      "sgemm alone, distinct buffers",
      [&] {
        for (size_t i = 0; i < gemms.size(); ++i)
          run_gemm(gemms[i], as[i].data(), bs[i].data(), cs[i].data());
      },
      true);
  add("GELU fwd+bwd alone (x L)", [&] {
    for (int64_t l = 0; l < blocks; ++l) {
      cpu::gelu_forward(y.data(), x.data(), bf);
      cpu::gelu_backward(y.data(), cpu::GradWrite::kOverwrite, x.data(), dy.data(), bf);
    }
  });
  add("bias/residual/copies alone (x L)", [&] {
    for (int64_t l = 0; l < blocks; ++l) {
      for (int64_t r = 0; r < batch; ++r) std::copy(bias.begin(), bias.end(), y.begin() + r * ffn);
      for (int64_t r = 0; r < batch; ++r)
        std::copy(bias.begin(), bias.begin() + hidden, y.begin() + r * hidden);
      for (int64_t r = 0; r < batch; ++r)
        for (int64_t o = 0; o < ffn; ++o) dbias[o] += dy[r * ffn + o];
      for (int64_t r = 0; r < batch; ++r)
        for (int64_t o = 0; o < hidden; ++o) dbias[o] += dy[r * hidden + o];
      cpu::residual_forward(y.data(), y.data(), x.data(), bh);
      std::copy(x.begin(), x.begin() + bh, y.begin());
      std::fill(y.begin(), y.end(), 0.0f);
    }
  });
  add("data fill of the microbatch", [&] { data.fill(indices, xs, labels); });

  // The persistent state `mb` needs data and a forward before its first backward.
  data.fill(indices, mb);
  for (Job& job : jobs) job.run();  // warm-up
  for (int r = 0; r < reps; ++r) {
    for (Job& job : jobs) {
      const double c0 = cpu_seconds(), w0 = wall_seconds();
      job.run();
      job.cpu.push_back(cpu_seconds() - c0);
      job.wall.push_back(wall_seconds() - w0);
    }
  }

  std::printf("lab-mlp h%lld f%lld L%lld C%lld, microbatch %lld, 1 BLAS thread (%s)\n",
              (long long)hidden, (long long)ffn, (long long)blocks, (long long)classes,
              (long long)batch, openblas_get_config());
  std::printf("step matmul FLOPs: %.3f GFLOP (3 x 2 x 2hf x L x B + head), %d reps\n\n",
              flops / 1e9, reps);
  std::printf("%-34s %11s %11s %14s\n", "median per step", "cpu s", "wall s", "GFLOP/s (cpu)");
  for (const Job& job : jobs) {
    std::printf("%-34s %11.4f %11.4f", job.name.c_str(), job.median_cpu(), job.median_wall());
    if (job.show_rate) std::printf(" %14.1f", flops / job.median_cpu() / 1e9);
    std::printf("\n");
  }
  const Job &step = jobs[0], &sgemm = jobs[2], &distinct = jobs[3];
  const double ratio = sgemm.median_cpu() / step.median_cpu();
  std::printf("\nsgemm rate (hot) %.1f GFLOP/s; the step reaches %.1f%% of it (goal >= 90%%): %s\n",
              flops / sgemm.median_cpu() / 1e9, 100.0 * ratio, ratio >= 0.9 ? "met" : "NOT met");
  std::printf("step - sgemm(hot) = %.4f s cpu, of which operand traffic (distinct - hot) %.4f s\n",
              step.median_cpu() - sgemm.median_cpu(), distinct.median_cpu() - sgemm.median_cpu());
  return 0;
}
