// bench_peer: parlab and PyTorch side by side on the same job, in the same run: lab-mlp, global
// batch 1024 in microbatches of 64, AdamW, one thread per rank, 1 and 2 workers (DDP: parlab's
// executor over shared memory, as --comm auto on one host / PyTorch DistributedDataParallel over
// Gloo), fp32 and mixed precision
// (parlab precision=mixed / torch.autocast bfloat16). The two alternate, repeat after repeat, so
// load on a shared machine falls on both; each cell is the median step time over the repeats
// (each repeat's figure: the median of its measured steps, slowest rank), with min..max beside it.
//
// Goals (printed, never asserted):
//   1 worker, fp32: parlab >= 1.8x faster than torch (parlab / torch <= 0.56);
//   2 workers, fp32: parlab >= 1.3x faster than PyTorch DDP (parlab / torch <= 0.77), and
//     parlab's 2 workers >= 1.6x faster than its 1 worker (issue 32);
//   1 worker, fp32: the step's matmul FLOPs at >= 85% of oneDNN's fp32 matmul rate at the lab's
//     forward shapes, measured in the same repeat just before the parlab run (wall time, as the step);
//   mixed vs fp32 on 1 worker: parlab's step >= 1.8x faster.
// The peer is bench/peer/torch_lab_mlp.py under --python (Debian's python3-torch is installed
// for /usr/bin/python3); without torch the peer columns say why and parlab still runs.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <barrier>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <span>
#include <thread>
#include <vector>

#include "bench/ranks.h"
#include "bench/timing.h"
#include "parlab/source_dir.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/trainer.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "base/stats.h"

namespace {

using namespace parlab;

struct Job {
  int64_t hidden = 1024, ffn = 4096, blocks = 8, classes = 16, gbs = 1024, mb = 64;
  int warmup = 1, steps = 2;
};

struct ParlabRun {
  double step_seconds = 0;    // median over measured steps of the slowest rank's step
  double last_loss = 0;       // global mean loss of the last step
  uint64_t weights_hash = 0;  // FNV-1a of rank 0's fp32 weights after the last step (DDP: a replica)
};

uint64_t fnv1a(std::span<const float> v) {
  uint64_t h = 1469598103934665603ull;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (size_t i = 0; i < v.size_bytes(); ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// The job's model and plan for `world` workers, as run_parlab trains it.
train::TrainConfig job_config(const Job& job, int world, const std::string& precision) {
  std::ostringstream toml;
  toml << "name = \"lab-mlp-peer\"\nkind = \"mlp\"\nlayers = " << job.blocks << "\nhidden = " << job.hidden
       << "\nffn = " << job.ffn << "\nclasses = " << job.classes << "\nmicrobatch = " << job.mb
       << "\nprecision = \"fp32\"\n";
  train::TrainConfig cfg;
  cfg.model = strategy::parse_model_toml(toml.str(), "bench");
  cfg.plan = train::resolve_train_plan(
      cfg.model,
      "gbs=" + std::to_string(job.gbs) + ",mb=" + std::to_string(job.mb) + ",optimizer=adam,precision=" + precision,
      world, strategy::load_cluster("cpu-local"));
  cfg.optimizer = train::AdamWConfig{.lr = 2e-4};
  cfg.data_size = job.gbs * (job.warmup + job.steps);
  cfg.seed = 1;
  cfg.comm_timeout = std::chrono::minutes(10);
  return cfg;
}

// parlab: ranks as threads of this process over shared memory, what `parlab train --comm auto`
// gives ranks of one host (the gradients in the DP group's registered memory).
ParlabRun run_parlab(const Job& job, int world, const std::string& precision) {
  const train::TrainConfig cfg = job_config(job, world, precision);
  std::vector<std::vector<double>> times(world);
  std::vector<double> loss_sums(world, 0.0);
  ParlabRun out;
  bench::run_ranks(
      world, std::chrono::minutes(10),
      [&](int r, comm::Communicator& c, std::barrier<>&) {
        train::Trainer trainer(cfg, c);
        for (int s = 0; s < job.warmup + job.steps; ++s) {
          const train::StepRecord rec = trainer.step();
          if (s >= job.warmup) times[r].push_back(rec.times.step_seconds);
          loss_sums[r] = rec.loss_sum;
        }
        if (r == 0) out.weights_hash = fnv1a(trainer.state().model.params());
      },
      bench::RanksOver::kShm);
  std::vector<double> slowest(job.steps, 0.0);
  for (int s = 0; s < job.steps; ++s)
    for (int r = 0; r < world; ++r) slowest[s] = std::max(slowest[s], times[r][s]);
  out.step_seconds = parlab::median(slowest);
  for (double l : loss_sums) out.last_loss += l / double(job.gbs);
  return out;
}

// Runs a shell command; returns its stdout (empty on failure) and sets ok.
std::string capture(const std::string& cmd, bool& ok) {
  std::array<char, 4096> buf{};
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ok = false;
    return out;
  }
  while (fgets(buf.data(), buf.size(), p) != nullptr) out += buf.data();
  ok = pclose(p) == 0;
  return out;
}

bool cpu_has_flag(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    for (std::string w; words >> w;)
      if (w == flag) return true;
    return false;
  }
  return false;
}

// The OpenBLAS core type the peer runs with, and why. torch 1.13's fp32 nn.Linear is addmm on the
// system BLAS (Debian: OpenBLAS, DYNAMIC_ARCH), which picks kernels from the CPU's family/model; a
// CPU it does not know (a VM's generic "Intel Xeon Processor") gets "Prescott", SSE3 kernels at a
// fraction of the core's rate -- an unfair peer. `request`: "auto" names the core from the CPU's
// flags when OpenBLAS fell back to a pre-AVX core, "none" leaves the detection alone, anything
// else is passed as OPENBLAS_CORETYPE. Returns the environment prefix for the peer's command
// ("" for none) and prints the reasoning.
std::string peer_blas_env(const std::string& python, const std::string& request) {
  bool ok = false;
  const std::string detected =
      capture(python +
                  " -c 'import ctypes; l = ctypes.CDLL(\"libopenblas.so.0\"); "
                  "l.openblas_get_corename.restype = ctypes.c_char_p; print(l.openblas_get_corename().decode())' "
                  "2>/dev/null",
              ok);
  const std::string core = ok ? detected.substr(0, detected.find('\n')) : "unknown (no libopenblas.so.0)";
  std::string chosen;
  std::string why;
  if (request == "none") {
    why = "left to OpenBLAS's detection (--peer-coretype none)";
  } else if (request != "auto") {
    chosen = request;
    why = "named by --peer-coretype";
  } else {
    static const char* kPreAvx[] = {"Prescott", "Core2", "Penryn", "Dunnington",
                                    "Nehalem",  "Atom",  "Katmai", "Northwood"};
    const bool fell_back =
        std::any_of(std::begin(kPreAvx), std::end(kPreAvx), [&](const char* c) { return core == c; });
    if (!fell_back) {
      why = "OpenBLAS's own detection (" + core + ") is kept";
    } else if (cpu_has_flag("avx512f")) {
      chosen = "SkylakeX";
      why = "OpenBLAS detected " + core + " (pre-AVX kernels) but the CPU has avx512f: SkylakeX's AVX-512 sgemm";
    } else if (cpu_has_flag("avx2")) {
      chosen = "Haswell";
      why = "OpenBLAS detected " + core + " (pre-AVX kernels) but the CPU has avx2: Haswell's AVX2 sgemm";
    } else {
      why = "OpenBLAS detected " + core + " and the CPU has no AVX2: kept";
    }
  }
  std::printf("peer BLAS: OpenBLAS detects \"%s\" here; the peer runs with %s (%s)\n", core.c_str(),
              chosen.empty() ? "its detection" : ("OPENBLAS_CORETYPE=" + chosen).c_str(), why.c_str());
  return chosen.empty() ? "" : "OPENBLAS_CORETYPE=" + chosen + " ";
}

// The PyTorch peer: the median of its measured steps, or < 0 when it failed. `env` prefixes the
// command (the peer's environment only). The peer's own "peer_blas" line is printed once.
double run_torch(const std::string& env, const std::string& python, const std::string& script, const Job& job,
                 int world, const std::string& precision, int port) {
  std::ostringstream cmd;
  cmd << env << python << " " << script << " --workers " << world << " --precision " << precision << " --gbs "
      << job.gbs << " --mb " << job.mb << " --hidden " << job.hidden << " --ffn " << job.ffn << " --blocks "
      << job.blocks << " --classes " << job.classes << " --warmup " << job.warmup << " --steps " << job.steps
      << " --port " << port << " 2>&1";
  bool ok = false;
  const std::string out = capture(cmd.str(), ok);
  const auto at = out.find("step_seconds");
  if (!ok || at == std::string::npos) {
    std::fprintf(stderr, "bench_peer: the PyTorch peer failed:\n%s\n", out.c_str());
    return -1;
  }
  static bool reported = false;
  if (const auto b = out.find("peer_blas"); b != std::string::npos && !reported) {
    std::printf("peer reports: %s\n", out.substr(b, out.find('\n', b) - b).c_str());
    reported = true;
  }
  std::istringstream in(out.substr(at + 12));
  std::vector<double> v;
  for (double s; in >> s;) v.push_back(s);
  return parlab::median(v);
}

// oneDNN's matmul rate (FLOP/s, wall time) at the job's forward products (B x f x h and
// B x h x f, the weight read transposed), plain calls: the reference the step's share is of.
double matmul_rate(const Job& job, bool bf16) {
  const compute::cpu::GemmShape fc1{.M = job.mb, .N = job.ffn, .K = job.hidden, .trans_b = true};
  const compute::cpu::GemmShape fc2{.M = job.mb, .N = job.hidden, .K = job.ffn, .trans_b = true};
  const std::vector<float> a(job.mb * job.ffn, 0.01f), b(job.hidden * job.ffn, 0.02f);
  const std::vector<uint16_t> a16(a.size(), 0x3c00), b16(b.size(), 0x3c00);
  std::vector<float> c(job.mb * job.ffn);
  auto pair = [&] {
    if (bf16) {
      compute::cpu::onednn_gemm_bf16(fc1, a16.data(), b16.data(), c.data());
      compute::cpu::onednn_gemm_bf16(fc2, a16.data(), b16.data(), c.data());
    } else {
      compute::cpu::onednn_gemm_f32(fc1, a.data(), b.data(), c.data());
      compute::cpu::onednn_gemm_f32(fc2, a.data(), b.data(), c.data());
    }
  };
  pair();  // the primitives are built
  const int calls = 32;
  const double seconds = bench::seconds_of([&] {
    for (int i = 0; i < calls; ++i) pair();
  });
  return calls * 4.0 * job.mb * job.hidden * job.ffn / seconds;
}

struct Cell {
  std::vector<double> rate;  // oneDNN's matmul rate at the lab's shapes, per repeat (FLOP/s)
  std::vector<double> parlab, torch;
  std::vector<double> loss;      // parlab's last-step loss, per repeat
  std::vector<uint64_t> hashes;  // parlab's weights after the run, per repeat
};

std::string stat(const std::vector<double>& v) {
  if (v.empty()) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%7.3f [%.3f..%.3f]", parlab::median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
  return buf;
}

// scale * a[i] / b[i] per repeat (a repeat measures both sides back to back): median [min..max].
std::string ratio_stat(const std::vector<double>& a, const std::vector<double>& b, double scale, const char* format) {
  std::vector<double> r;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) r.push_back(scale * a[i] / b[i]);
  if (r.empty()) return "n/a";
  char buf[96];
  std::snprintf(buf, sizeof buf, format, parlab::median(r), *std::min_element(r.begin(), r.end()),
                *std::max_element(r.begin(), r.end()));
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_peer: parlab vs PyTorch on the same lab-mlp job, side by side, 1 and 2 workers, fp32 and mixed"};
  Job job;
  int repeats = 3;
  std::vector<int> workers{1, 2};
  std::vector<std::string> precisions{"fp32", "mixed"};
  std::string python = "/usr/bin/python3";
  std::string script = std::string(PARLAB_SOURCE_DIR) + "/bench/peer/torch_lab_mlp.py";
  std::string coretype = "auto";
  app.add_option("--repeats", repeats, "alternating parlab/torch runs per configuration")->check(CLI::Range(1, 100));
  app.add_option("--steps", job.steps, "measured steps per run")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", job.warmup, "unmeasured first steps per run")->check(CLI::Range(0, 100));
  app.add_option("--gbs", job.gbs, "global batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--mb", job.mb, "microbatch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--workers", workers, "worker counts")->delimiter(',')->check(CLI::Range(1, 64));
  app.add_option("--precisions", precisions, "fp32 and/or mixed")
      ->delimiter(',')
      ->check(CLI::IsMember({"fp32", "mixed"}));
  app.add_option("--python", python, "interpreter with torch for the peer");
  app.add_option("--peer-script", script, "the PyTorch peer");
  std::string cluster_file;
  app.add_option("--cluster", cluster_file,
                 "a calibrated cpu-local.toml (parlab calibrate writes <results>/clusters/cpu-local.toml): "
                 "prints the cost model's predicted parlab step beside the measured one");
  app.add_option("--peer-coretype", coretype,
                 "OPENBLAS_CORETYPE for the peer: auto (name the core from the CPU's flags when OpenBLAS fell back "
                 "to pre-AVX kernels), none, or a core name");
  CLI11_PARSE(app, argc, argv);

  compute::pin_blas_to_one_thread();
  bool have_torch = false;
  const std::string version = capture(python + " -c 'import torch; print(torch.__version__)' 2>&1", have_torch);
  std::printf(
      "bench_peer: lab-mlp h %lld f %lld x %lld blocks, %lld classes; global batch %lld, microbatch %lld, "
      "AdamW, one thread per rank\n",
      (long long)job.hidden, (long long)job.ffn, (long long)job.blocks, (long long)job.classes, (long long)job.gbs,
      (long long)job.mb);
  std::printf("parlab matmuls: %s; bf16: %s\n", std::string(compute::cpu::matmul_backend_name()).c_str(),
              compute::cpu::bf16_supported() ? "yes" : std::string(compute::cpu::bf16_unsupported_reason()).c_str());
  std::string peer_env;
  if (have_torch) {
    std::printf("peer: PyTorch %s (%s)\n", version.substr(0, version.find('\n')).c_str(), python.c_str());
    peer_env = peer_blas_env(python, coretype);
  } else {
    std::printf("peer: skipped: %s cannot import torch (install python3-torch)\n", python.c_str());
  }
  std::printf("%d repeats x (%d warm-up + %d measured steps), alternating; load before: %s\n\n", repeats, job.warmup,
              job.steps, bench::load_average().c_str());

  std::map<std::pair<std::string, int>, Cell> cells;
  int port = 29611;
  for (const std::string& prec : precisions) {
    if (prec == "mixed" && !compute::cpu::bf16_supported()) {
      std::printf("mixed: skipped: %s\n", std::string(compute::cpu::bf16_unsupported_reason()).c_str());
      continue;
    }
    for (int W : workers) {
      Cell& c = cells[{prec, W}];
      for (int r = 0; r < repeats; ++r) {
        if (W == 1) c.rate.push_back(matmul_rate(job, prec == "mixed"));
        const ParlabRun run = run_parlab(job, W, prec);
        c.parlab.push_back(run.step_seconds);
        c.loss.push_back(run.last_loss);
        c.hashes.push_back(run.weights_hash);
        if (have_torch) {
          const double t = run_torch(peer_env, python, script, job, W, prec, port++);
          if (t > 0) c.torch.push_back(t);
        }
        std::printf("  %-5s W=%d repeat %d: parlab %.3f s, torch %s s (load %s)\n", prec.c_str(), W, r + 1,
                    c.parlab.back(), c.torch.size() > size_t(r) ? std::to_string(c.torch.back()).c_str() : "n/a",
                    bench::load_average().c_str());
        std::fflush(stdout);
      }
    }
  }

  std::printf("\n%-6s %7s | %-26s | %-26s | %s\n", "prec", "workers", "parlab step s (median [min..max])",
              "torch step s", "parlab / torch per repeat (torch / parlab)");
  for (const auto& [key, c] : cells) {
    std::printf("%-6s %7d | %-26s | %-26s | %s (%s)\n", key.first.c_str(), key.second, stat(c.parlab).c_str(),
                stat(c.torch).c_str(), ratio_stat(c.parlab, c.torch, 1.0, "%.3f [%.3f..%.3f]").c_str(),
                ratio_stat(c.torch, c.parlab, 1.0, "%.2fx [%.2f..%.2f]").c_str());
  }
  if (!cluster_file.empty()) {
    // The cost model's step on the calibrated cluster (fp32 at peak_flops_fp32, mixed at the
    // measured bf16 rate peak_flops_bf16) beside the measured median.
    const strategy::ClusterSpec calibrated = strategy::load_cluster(cluster_file);
    std::printf("\npredicted (%s: fp32 %.1f GFLOP/s, bf16 %.1f GFLOP/s) vs measured parlab step:\n",
                cluster_file.c_str(), calibrated.device.peak_flops_fp32 / 1e9, calibrated.device.peak_flops_bf16 / 1e9);
    for (const auto& [key, c] : cells) {
      const train::TrainConfig cfg = job_config(job, key.second, key.first);
      const double predicted =
          strategy::estimate_step(cfg.model, cfg.plan, strategy::with_world(calibrated, key.second), false)
              .step_seconds;
      std::printf("%-5s W=%d: predicted %.3f s, measured %.3f s (%+.1f%%)\n", key.first.c_str(), key.second, predicted,
                  parlab::median(c.parlab), 100.0 * (predicted / parlab::median(c.parlab) - 1));
    }
  }
  std::printf(
      "\ngoals: 1 worker fp32 parlab >= 1.8x faster than torch (parlab/torch <= 0.56); "
      "2 workers fp32 parlab >= 1.3x faster than torch (parlab/torch <= 0.77)\n");
  if (const auto w1 = cells.find({"fp32", 1}), w2 = cells.find({"fp32", 2}); w1 != cells.end() && w2 != cells.end())
    std::printf(
        "fp32 2 workers over 1: parlab %.2fx (ratio of medians; repeat i against repeat i: %s) (goal >= 1.6x)\n",
        parlab::median(w1->second.parlab) / parlab::median(w2->second.parlab),
        ratio_stat(w1->second.parlab, w2->second.parlab, 1.0, "%.2f [%.2f..%.2f]").c_str());
  const auto f1 = cells.find({"fp32", 1}), m1 = cells.find({"mixed", 1});
  // The 1-worker step's matmul FLOPs over its time, against oneDNN's rate measured beside it.
  for (const auto* cell : {&f1, &m1}) {
    if (*cell == cells.end() || (*cell)->second.rate.empty()) continue;
    const auto& [key, c] = **cell;
    const double flops = model::LabMlp::step_matmul_flops(
        model::MlpShape{.hidden = job.hidden, .ffn = job.ffn, .blocks = job.blocks, .classes = job.classes}, job.gbs);
    const double step_rate = flops / parlab::median(c.parlab), ref = parlab::median(c.rate);
    // Per repeat: that repeat's step rate over the oneDNN rate measured just before it.
    std::vector<double> step_rates;
    for (double t : c.parlab) step_rates.push_back(flops / t);
    std::vector<double> shares;
    for (size_t i = 0; i < std::min(step_rates.size(), c.rate.size()); ++i) shares.push_back(step_rates[i] / c.rate[i]);
    const double share = shares.empty() ? 0 : parlab::median(shares);
    std::printf(
        "%-5s W=1: the step runs %.1f GFLOP/s, %s of oneDNN's %s matmul rate at the lab's shapes "
        "(%.1f GFLOP/s, median [%.1f..%.1f])%s\n",
        key.first.c_str(), step_rate / 1e9, ratio_stat(step_rates, c.rate, 100.0, "%.1f%% [%.1f..%.1f]").c_str(),
        key.first == "fp32" ? "fp32" : "bf16", ref / 1e9, *std::min_element(c.rate.begin(), c.rate.end()) / 1e9,
        *std::max_element(c.rate.begin(), c.rate.end()) / 1e9,
        key.first == "fp32" ? (share >= 0.85 ? " (goal >= 85%: met)" : " (goal >= 85%: NOT met)") : "");
  }
  if (f1 != cells.end() && m1 != cells.end())
    std::printf(
        "mixed vs fp32, 1 worker: parlab %.2fx faster (ratio of medians; repeat i against repeat i: %s) "
        "(goal >= 1.8x)%s\n",
        parlab::median(f1->second.parlab) / parlab::median(m1->second.parlab),
        ratio_stat(f1->second.parlab, m1->second.parlab, 1.0, "%.2f [%.2f..%.2f]").c_str(),
        f1->second.torch.empty() || m1->second.torch.empty()
            ? ""
            : (", torch " +
               std::to_string(parlab::median(f1->second.torch) / parlab::median(m1->second.torch)).substr(0, 4) + "x")
                  .c_str());
  // Learning and determinism, from the same runs: every repeat trains the same steps from the
  // same seed, so its weights must hash the same, and mixed's loss must follow fp32's.
  for (const auto& [key, c] : cells) {
    const bool same = std::all_of(c.hashes.begin(), c.hashes.end(), [&](uint64_t h) { return h == c.hashes[0]; });
    std::printf("%-5s W=%d: loss after %d steps %.8f; weights bit-identical over %zu repeats: %s\n", key.first.c_str(),
                key.second, job.warmup + job.steps, c.loss.empty() ? 0.0 : c.loss[0], c.hashes.size(),
                same ? "yes" : "NO");
  }
  if (f1 != cells.end() && m1 != cells.end() && !f1->second.loss.empty() && !m1->second.loss.empty())
    std::printf("mixed loss vs fp32, 1 worker: %+.3f%% (goal within 2%%)\n",
                100.0 * (m1->second.loss[0] - f1->second.loss[0]) / f1->second.loss[0]);
  std::printf("load after: %s\n", bench::load_average().c_str());
  return 0;
}
