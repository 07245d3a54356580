// bench_peer: parlab and PyTorch side by side on the same job, in the same run: lab-mlp, global
// batch 1024 in microbatches of 64, AdamW, one thread per rank, 1 and 2 workers (DDP: parlab's
// executor over Gloo / PyTorch DistributedDataParallel over Gloo), fp32 and mixed precision
// (parlab precision=mixed / torch.autocast bfloat16). The two alternate, repeat after repeat, so
// load on a shared machine falls on both; each cell is the median step time over the repeats
// (each repeat's figure: the median of its measured steps, slowest rank), with min..max beside it.
//
// Goals (printed, never asserted):
//   1 worker, fp32: parlab / torch <= 1.00 (no slower);
//   2 workers, fp32: parlab / torch < 1.00 (faster than PyTorch DDP);
//   mixed vs fp32 on 1 worker: parlab's step >= 1.5x faster.
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
#include <thread>
#include <vector>

#include "bench/ranks.h"
#include "parlab/source_dir.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/train/trainer.h"
#include "strategy/io.h"

namespace {

using namespace parlab;

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Job {
  int64_t hidden = 1024, ffn = 4096, blocks = 8, classes = 16, gbs = 1024, mb = 64;
  int warmup = 1, steps = 2;
};

// parlab: ranks as threads of this process, each with its own Gloo context (as bench_ddp).
// Returns the median over measured steps of the slowest rank's step seconds.
double run_parlab(const Job& job, int world, const std::string& precision) {
  std::ostringstream toml;
  toml << "name = \"lab-mlp-peer\"\nkind = \"mlp\"\nlayers = " << job.blocks << "\nhidden = " << job.hidden
       << "\nffn = " << job.ffn << "\nclasses = " << job.classes << "\nmicrobatch = " << job.mb
       << "\nprecision = \"fp32\"\n";
  train::TrainConfig cfg;
  cfg.model = strategy::parse_model_toml(toml.str(), "bench");
  cfg.plan = train::resolve_train_plan(cfg.model,
                                       "gbs=" + std::to_string(job.gbs) + ",mb=" + std::to_string(job.mb) +
                                           ",optimizer=adam,precision=" + precision,
                                       world, strategy::load_cluster("cpu-local"));
  cfg.optimizer = train::AdamWConfig{.lr = 2e-4};
  cfg.data_size = job.gbs * (job.warmup + job.steps);
  cfg.seed = 1;
  cfg.comm_timeout = std::chrono::minutes(10);
  std::vector<std::vector<double>> times(world);
  bench::run_ranks(world, std::chrono::minutes(10), [&](int r, comm::Communicator& c, std::barrier<>&) {
    train::Trainer trainer(cfg, c);
    for (int s = 0; s < job.warmup + job.steps; ++s) {
      const train::StepRecord rec = trainer.step();
      if (s >= job.warmup) times[r].push_back(rec.times.step_seconds);
    }
  });
  std::vector<double> slowest(job.steps, 0.0);
  for (int s = 0; s < job.steps; ++s)
    for (int r = 0; r < world; ++r) slowest[s] = std::max(slowest[s], times[r][s]);
  return median(slowest);
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

// The PyTorch peer: the median of its measured steps, or < 0 when it failed.
double run_torch(const std::string& python, const std::string& script, const Job& job, int world,
                 const std::string& precision, int port) {
  std::ostringstream cmd;
  cmd << python << " " << script << " --workers " << world << " --precision " << precision << " --gbs " << job.gbs
      << " --mb " << job.mb << " --hidden " << job.hidden << " --ffn " << job.ffn << " --blocks " << job.blocks
      << " --classes " << job.classes << " --warmup " << job.warmup << " --steps " << job.steps << " --port "
      << port << " 2>&1";
  bool ok = false;
  const std::string out = capture(cmd.str(), ok);
  const auto at = out.find("step_seconds");
  if (!ok || at == std::string::npos) {
    std::fprintf(stderr, "bench_peer: the PyTorch peer failed:\n%s\n", out.c_str());
    return -1;
  }
  std::istringstream in(out.substr(at + 12));
  std::vector<double> v;
  for (double s; in >> s;) v.push_back(s);
  return median(v);
}

struct Cell {
  std::vector<double> parlab, torch;
};

std::string stat(const std::vector<double>& v) {
  if (v.empty()) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%7.3f [%.3f..%.3f]", median(v), *std::min_element(v.begin(), v.end()),
                *std::max_element(v.begin(), v.end()));
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
  app.add_option("--repeats", repeats, "alternating parlab/torch runs per configuration")->check(CLI::Range(1, 100));
  app.add_option("--steps", job.steps, "measured steps per run")->check(CLI::Range(1, 1000));
  app.add_option("--warmup", job.warmup, "unmeasured first steps per run")->check(CLI::Range(0, 100));
  app.add_option("--gbs", job.gbs, "global batch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--mb", job.mb, "microbatch")->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--workers", workers, "worker counts")->delimiter(',')->check(CLI::Range(1, 64));
  app.add_option("--precisions", precisions, "fp32 and/or mixed")->delimiter(',')->check(CLI::IsMember({"fp32", "mixed"}));
  app.add_option("--python", python, "interpreter with torch for the peer");
  app.add_option("--peer-script", script, "the PyTorch peer");
  CLI11_PARSE(app, argc, argv);

  compute::pin_blas_to_one_thread();
  bool have_torch = false;
  const std::string version = capture(python + " -c 'import torch; print(torch.__version__)' 2>&1", have_torch);
  std::printf("bench_peer: lab-mlp h %lld f %lld x %lld blocks, %lld classes; global batch %lld, microbatch %lld, "
              "AdamW, one thread per rank\n",
              (long long)job.hidden, (long long)job.ffn, (long long)job.blocks, (long long)job.classes,
              (long long)job.gbs, (long long)job.mb);
  std::printf("parlab matmuls: %s; bf16: %s\n", std::string(compute::cpu::matmul_backend_name()).c_str(),
              compute::cpu::bf16_supported() ? "yes" : std::string(compute::cpu::bf16_unsupported_reason()).c_str());
  if (have_torch) {
    std::printf("peer: PyTorch %s (%s)\n", version.substr(0, version.find('\n')).c_str(), python.c_str());
  } else {
    std::printf("peer: skipped: %s cannot import torch (install python3-torch)\n", python.c_str());
  }
  std::printf("%d repeats x (%d warm-up + %d measured steps), alternating; load before: %s\n\n", repeats, job.warmup,
              job.steps, load_average().c_str());

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
        c.parlab.push_back(run_parlab(job, W, prec));
        if (have_torch) {
          const double t = run_torch(python, script, job, W, prec, port++);
          if (t > 0) c.torch.push_back(t);
        }
        std::printf("  %-5s W=%d repeat %d: parlab %.3f s, torch %s s (load %s)\n", prec.c_str(), W, r + 1,
                    c.parlab.back(), c.torch.size() > size_t(r) ? std::to_string(c.torch.back()).c_str() : "n/a",
                    load_average().c_str());
        std::fflush(stdout);
      }
    }
  }

  std::printf("\n%-6s %7s | %-26s | %-26s | %s\n", "prec", "workers", "parlab step s (median [min..max])",
              "torch step s", "parlab / torch");
  for (const auto& [key, c] : cells) {
    const double ratio = c.torch.empty() ? 0 : median(c.parlab) / median(c.torch);
    std::printf("%-6s %7d | %-26s | %-26s | %s\n", key.first.c_str(), key.second, stat(c.parlab).c_str(),
                stat(c.torch).c_str(), c.torch.empty() ? "n/a" : std::to_string(ratio).substr(0, 5).c_str());
  }
  std::printf("\ngoals: 1 worker fp32 parlab/torch <= 1.00; 2 workers fp32 parlab/torch < 1.00\n");
  const auto f1 = cells.find({"fp32", 1}), m1 = cells.find({"mixed", 1});
  if (f1 != cells.end() && m1 != cells.end())
    std::printf("mixed vs fp32, 1 worker: parlab %.2fx faster (goal >= 1.5x)%s\n",
                median(f1->second.parlab) / median(m1->second.parlab),
                f1->second.torch.empty() || m1->second.torch.empty()
                    ? ""
                    : (", torch " + std::to_string(median(f1->second.torch) / median(m1->second.torch)).substr(0, 4) + "x").c_str());
  std::printf("load after: %s\n", load_average().c_str());
  return 0;
}
