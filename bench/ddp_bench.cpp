// bench_ddp: DDP scaling of the lab-mlp on this machine, through the real executor (bucket
// all-reduces over Gloo/TCP loopback overlapping backward). Ranks are threads of this process,
// each with its own Gloo context and one BLAS thread, as `parlab train --nproc N` runs them as
// processes; the arithmetic and the sockets are the same.
//
// For each global batch G and worker count W (microbatch mb, accumulation G / (mb W)):
//   step seconds   the slowest rank's step, mean over the measured steps (after warm-up)
//   samples/s      G / step seconds
//   efficiency     samples/s(W) / (W x samples/s(1)): 1 is perfect scaling
//   hidden         1 - exposed comm / comm busy: how much all-reduce time ran under backward
//
// Goals (reported, never asserted):
//   1 worker: the step within 10% of its sgemm FLOPs at the measured sgemm rate, i.e.
//             (step FLOPs / sgemm rate) / step seconds >= 0.90. The sgemm rate is measured here
//             on the step's own GEMM shapes (as bench_model does).
//   2 workers on a 2-core machine: efficiency >= 0.85 at G = 1024.
// The machine may be shared: the load average is printed with the figures.
#include <cblas.h>

#include <CLI/CLI.hpp>
#include <ctime>
#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>

#include "bench/ranks.h"
#include "bench/timing.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/trainer.h"
#include "strategy/io.h"

namespace {

using namespace parlab;

using bench::cpu_seconds;

struct Result {
  double step_seconds = 0;  // slowest rank, mean over measured steps
  double cpu_seconds = 0;   // process CPU time per measured step (every rank and comm thread)
  double wall_seconds = 0;  // wall time per measured step, same window
  double forward = 0, backward = 0, exposed = 0, comm = 0, optimizer = 0, data = 0, idle = 0;  // rank 0 means
};

Result run(const train::TrainConfig& config, int world, int warmup, int steps) {
  std::vector<std::vector<train::StepRecord>> records(world);
  double cpu0 = 0, cpu1 = 0, wall0 = 0, wall1 = 0;
  auto now = [] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); };
  bench::run_ranks(world, std::chrono::minutes(5), [&](int r, comm::Communicator& c, std::barrier<>& sync) {
    train::Trainer trainer(config, c);
    for (int s = 0; s < warmup + steps; ++s) {
      if (s == warmup) {  // the measured window starts with everybody here
        sync.arrive_and_wait();
        if (r == 0) cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), wall0 = now();
      }
      train::StepRecord rec = trainer.step();
      rec.events.clear();
      if (s >= warmup) records[r].push_back(rec);
    }
    sync.arrive_and_wait();
    if (r == 0) cpu1 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID), wall1 = now();
  });
  Result res;
  res.cpu_seconds = (cpu1 - cpu0) / steps;
  res.wall_seconds = (wall1 - wall0) / steps;
  for (int s = 0; s < steps; ++s) {
    double slowest = 0;
    for (int r = 0; r < world; ++r) slowest = std::max(slowest, records[r][s].times.step_seconds);
    res.step_seconds += slowest / steps;
    const train::StepTimes& t = records[0][s].times;
    res.forward += t.forward_seconds / steps;
    res.backward += t.backward_seconds / steps;
    res.exposed += t.exposed_comm_seconds / steps;
    res.comm += t.comm_seconds / steps;
    res.optimizer += t.optimizer_seconds / steps;
    res.data += t.data_seconds / steps;
    res.idle += t.idle_seconds / steps;
  }
  return res;
}

// Seconds of the sgemm calls of one forward+backward of a microbatch of B, replayed alone on
// distinct buffers per call (the model's per-layer weights), median of `reps`.
struct GemmTimes {
  double wall = 0, cpu = 0;  // medians
};
GemmTimes sgemm_seconds(const model::MlpShape& s, int64_t B, int reps) {
  struct Gemm {
    CBLAS_TRANSPOSE ta, tb;
    int64_t M, N, K;
  };
  std::vector<Gemm> g;
  for (int64_t l = 0; l < s.blocks; ++l) {
    g.push_back({CblasNoTrans, CblasTrans, B, s.ffn, s.hidden});
    g.push_back({CblasNoTrans, CblasTrans, B, s.hidden, s.ffn});
  }
  g.push_back({CblasNoTrans, CblasTrans, B, s.classes, s.hidden});
  auto backward = [&](int64_t in, int64_t out) {
    g.push_back({CblasNoTrans, CblasNoTrans, B, in, out});
    g.push_back({CblasTrans, CblasNoTrans, out, in, B});
  };
  backward(s.hidden, s.classes);
  for (int64_t l = 0; l < s.blocks; ++l) {
    backward(s.ffn, s.hidden);
    backward(s.hidden, s.ffn);
  }
  std::vector<std::vector<float>> a, b, c;
  for (const Gemm& x : g) {
    a.emplace_back(x.M * x.K, 0.01f);
    b.emplace_back(x.K * x.N, 0.02f);
    c.emplace_back(x.M * x.N, 0.0f);
  }
  std::vector<double> t, tc;
  for (int r = 0; r < reps + 1; ++r) {
    const double c0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < g.size(); ++i) {
      const Gemm& x = g[i];
      // Through the kernels' matmul backend, as LabMlp runs it.
      compute::cpu::gemm_f32({.M = x.M,
                              .N = x.N,
                              .K = x.K,
                              .trans_a = x.ta == CblasTrans,
                              .trans_b = x.tb == CblasTrans,
                              .accumulate = true},
                             a[i].data(), b[i].data(), c[i].data());
    }
    if (r > 0) {
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      tc.push_back(cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - c0);
    }
  }
  std::sort(t.begin(), t.end());
  std::sort(tc.begin(), tc.end());
  return {t[t.size() / 2], tc[tc.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"DDP scaling of the lab-mlp through the runtime executor (ranks as threads, Gloo loopback)"};
  int64_t hidden = 1024, ffn = 4096, blocks = 8, classes = 16, mb = 64;
  std::vector<int> workers = {1, 2, 4};
  std::vector<int64_t> batches = {128, 1024};
  int warmup = 1, steps = 2;
  double bucket_mb = 25;
  std::string optimizer = "adam";
  app.add_option("--hidden", hidden);
  app.add_option("--ffn", ffn);
  app.add_option("--blocks", blocks);
  app.add_option("--classes", classes);
  app.add_option("--mb", mb, "microbatch (lowered to G / W when G / W is smaller)");
  app.add_option("--workers", workers)->delimiter(',');
  app.add_option("--gbs", batches, "global batches")->delimiter(',');
  app.add_option("--warmup", warmup);
  app.add_option("--steps", steps, "measured steps per configuration");
  app.add_option("--bucket-mb", bucket_mb);
  app.add_option("--optimizer", optimizer)->check(CLI::IsMember({"adam", "sgd"}));
  CLI11_PARSE(app, argc, argv);

  compute::pin_blas_to_one_thread();
  std::ostringstream toml;
  toml << "name = \"lab-mlp-bench\"\nkind = \"mlp\"\nlayers = " << blocks << "\nhidden = " << hidden
       << "\nffn = " << ffn << "\nclasses = " << classes << "\nmicrobatch = " << mb << "\nprecision = \"fp32\"\n";
  const strategy::ModelSpec spec = strategy::parse_model_toml(toml.str(), "bench");
  const model::MlpShape shape = train::mlp_shape(spec);
  const strategy::ClusterSpec cluster = strategy::load_cluster("cpu-local");

  std::printf("bench_ddp: lab-mlp h %lld, f %lld, %lld blocks, %lld classes (%.1f M parameters), %s, bucket %g MiB\n",
              (long long)hidden, (long long)ffn, (long long)blocks, (long long)classes,
              model::ParamLayout(shape).numel() / 1e6, optimizer == "adam" ? "AdamW" : "SGD", bucket_mb);
  std::printf("cores online %u; load average before: %s\n", std::thread::hardware_concurrency(),
              bench::load_average().c_str());

  const GemmTimes gemm = sgemm_seconds(shape, mb, 3);
  const double gemm_flops = model::LabMlp::step_matmul_flops(shape, mb);
  const double sgemm_rate = gemm_flops / gemm.wall, sgemm_cpu_rate = gemm_flops / gemm.cpu;
  std::printf("sgemm rate on the step's shapes (B = %lld, one thread): %.1f GFLOP/s wall, %.1f GFLOP/s of CPU time\n",
              (long long)mb, sgemm_rate / 1e9, sgemm_cpu_rate / 1e9);
  std::printf(
      "(cpu/step = process CPU seconds per step, all ranks and comm threads; cores = cpu / wall:\n"
      " what the run actually got of the machine; cpu eff. = W=1 cpu/step over this cpu/step)\n\n");

  for (int64_t G : batches) {
    std::printf("global batch %lld\n", (long long)G);
    std::printf("%7s %5s %5s %9s %10s %7s %8s %8s %8s %8s %8s %7s %8s %6s %9s\n", "workers", "mb", "accum", "step (s)",
                "samples/s", "effic.", "fwd", "bwd", "exposed", "comm", "optim", "hidden", "cpu/step", "cores",
                "cpu eff.");
    double base_sps = 0, base_cpu = 0;
    for (int W : workers) {
      if (G % W != 0) {
        std::printf("%7d  (G not divisible by W; skipped)\n", W);
        continue;
      }
      const int64_t m = std::min<int64_t>(mb, G / W);
      train::TrainConfig cfg;
      cfg.model = spec;
      const std::string plan = "gbs=" + std::to_string(G) + ",mb=" + std::to_string(m) +
                               ",bucket_mb=" + std::to_string(bucket_mb) + ",optimizer=" + optimizer;
      cfg.plan = train::resolve_train_plan(spec, plan, W, cluster);
      cfg.optimizer = train::optimizer_config(cfg.plan.optimizer);
      cfg.data_size = G * (warmup + steps);
      cfg.seed = 1;
      cfg.comm_timeout = std::chrono::minutes(5);
      const Result r = run(cfg, W, warmup, steps);
      const double sps = G / r.step_seconds;
      if (W == 1) base_sps = sps, base_cpu = r.cpu_seconds;
      const double eff = base_sps > 0 ? sps / (W * base_sps) : 0;
      const double hidden_frac = r.comm > 0 ? std::max(0.0, 1 - r.exposed / r.comm) : 0;
      std::printf("%7d %5lld %5lld %9.3f %10.1f %7.2f %8.3f %8.3f %8.3f %8.3f %8.3f %6.0f%% %8.3f %6.2f %9.2f\n", W,
                  (long long)m, (long long)cfg.plan.microbatches, r.step_seconds, sps, eff, r.forward, r.backward,
                  r.exposed, r.comm, r.optimizer, 100 * hidden_frac, r.cpu_seconds, r.cpu_seconds / r.wall_seconds,
                  base_cpu > 0 ? base_cpu / r.cpu_seconds : 0.0);
      if (W == 1) {
        const double need = cfg.plan.microbatches * model::LabMlp::step_matmul_flops(shape, m);
        const double ideal = need / sgemm_rate, ideal_cpu = need / sgemm_cpu_rate;
        std::printf(
            "        1 worker: %.1f GFLOP of sgemm = %.3f s at the sgemm rate; step %.3f s -> %.2f of the "
            "sgemm rate (goal >= 0.90)\n"
            "                  in CPU time: %.3f s of sgemm vs %.3f s per step -> %.2f; "
            "optimizer %.3f s, data %.3f s, idle %.3f s\n",
            need / 1e9, ideal, r.step_seconds, ideal / r.step_seconds, ideal_cpu, r.cpu_seconds,
            ideal_cpu / r.cpu_seconds, r.optimizer, r.data, r.idle);
      }
    }
    std::printf("\n");
  }
  std::printf("load average after: %s\n", bench::load_average().c_str());
  std::printf("goal: 2 workers reach >= 0.85 efficiency at G = 1024 on a 2-core machine (see the table)\n");
  return 0;
}
