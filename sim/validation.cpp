#include "sim/validation.h"

#include "sim/simulate.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/ledger.h"

namespace parlab::sim {
namespace {

using strategy::ClusterSpec;
using strategy::ModelSpec;
using strategy::Plan;

// Korthikanti et al. 2022, Table 3 (configurations; microbatch and interleaving as in the
// Megatron runs, transcribed by Calculon's validation/*.json) and Table 5 (iteration time in
// seconds, full recompute / sequence parallel + selective recompute).
struct Table5Entry {
  const char* model;
  int gpus;
  const char* plan;
  double full, selective;
};
constexpr Table5Entry kTable5[] = {
    {"gpt-22b", 8, "tp=8,pp=1,gbs=4,mb=4", 1.42, 1.10},
    {"gpt-175b", 64, "tp=8,pp=8,schedule=interleaved,v=3,gbs=64,mb=1", 18.13, 13.75},
    {"gpt-530b", 280, "tp=8,pp=35,schedule=interleaved,v=3,gbs=280,mb=1", 49.05, 37.83},
    {"gpt-1t", 512, "tp=8,pp=64,gbs=512,mb=1", 94.42, 71.49},
};

std::string variant_plan(const char* plan, bool selective) {
  return std::string(plan) + (selective ? ",sp=on,recompute=selective" : ",recompute=full");
}

Plan resolved(const ModelSpec& m, const std::string& text, int world, const ClusterSpec& c) {
  Plan p = strategy::resolve(strategy::parse_plan(text), m, world);
  strategy::validate(p, m, c);
  return p;
}

// Published ring all-reduce busbw on 8 GPUs of one node.
constexpr PublishedPlateau kPublished[] = {
    {"dgx-h100", 370, 1024.0 * 1024 * 1024,
     "8 x H100 SXM, NCCL_ALGO=RING: \"an effective NVLink bandwidth of 370GB/s, which you can observe as "
     "BusBw ... when running with NCCL_ALGO=RING\" (S. Jeaugey, NVIDIA, NVIDIA/nccl-tests issue 212); "
     "\"busbw is about 365-370 GBps when gpus from 2 to 8\" at 2-4 GiB (NVIDIA/nccl issue 1455)"},
    {"dgx-a100", 240, 1024.0 * 1024 * 1024,
     "8 x A100 SXM on NVLink: \"you should be seeing close to 240 GB/s\" (NVIDIA, NVIDIA/nccl issue 1712)"},
};

}  // namespace

// The published rows, size (MiB) and bus bandwidth (GB/s), seven to a line.
// clang-format off
const std::vector<PublishedRun>& published_runs() {
  static const std::vector<PublishedRun> runs = {
      {"Galvatron",
       "dgx-a100",
       8,
       "8 x A100-SXM4-40GB in one process (`nGpus 8`, one host), NCCL's default algorithm: the nccl-tests "
       "output AFDWang/Hetu-Galvatron parses in tests/profiler/test_hardware_profile.py (commit 6f77a6c)",
       {{1, 23.29}, {2, 33.73}, {4, 55.97}, {8, 80.04}, {16, 99.99}, {32, 141.27}, {64, 178.69},
        {128, 186.91}, {256, 200.85}, {512, 202.00}, {1024, 230.84}}},
      {"OCI BM.GPU4.8",
       "dgx-a100",
       8,
       "8 x A100-SXM4-40GB on NVSwitch (Oracle BM.GPU4.8) in one process (`all_reduce_perf -b 64 -e 10G -f 2 "
       "-t 1 -g 8`), NCCL of the horovod/horovod container, default algorithm: oracle-japan/ocitutorials, "
       "tutorials/_intermediates/spinup-gpu-cluster.md, section 4-2 (the version with the Horovod walkthrough; "
       "later versions keep only a 10 GiB row, 235.6 GB/s)",
       {{1, 23.92}, {2, 32.66}, {4, 54.57}, {8, 79.02}, {16, 119.81}, {32, 147.46}, {64, 199.23},
        {128, 197.17}, {256, 221.38}, {512, 223.26}, {1024, 230.08}, {2048, 231.52}, {4096, 234.17}, {8192, 235.14}}},
      {"nccl-collectives-bench",
       "dgx-h100",
       4,
       "4 x H100 80GB HBM3 SXM on NVSwitch in one process (`nGpus 4`), NCCL 2.29.2, default algorithm, "
       "which is the ring here (at 256 MiB, 1 GiB and 8 GiB the same repository's NCCL_ALGO=Ring sweep, "
       "results/algo_sweep.txt, is within 0.1% of it and NVLS 3-6% above): waynehacking8/nccl-collectives-bench, "
       "results/quiet/all_reduce.txt (commit 8ab7496)",
       {{1, 58.79}, {2, 103.76}, {4, 144.88}, {8, 199.50}, {16, 247.07}, {32, 286.29}, {64, 305.61},
        {128, 325.91}, {256, 339.44}, {512, 347.80}, {1024, 355.35}, {2048, 360.85}, {4096, 363.07}, {8192, 366.18}}},
      {"together-nccl-tests",
       "dgx-h100",
       8,
       "8 x H100 80GB HBM3 on NVSwitch in one process (`all_reduce_perf -b 1M -e 8G -f 2 -g 8 -w 5 -n 20`), "
       "NCCL 2.26.2, NCCL_ALGO=RING NCCL_NVLS_ENABLE=0 (benchmarks/slurm_nccl_benchmark.sh): "
       "togethercomputer/together-nccl-tests, benchmarks/H100/results/20260306_001221_slurm/all_reduce_ring.out "
       "(commit c9a53f3). Two nodes ran it at once, each its own 8-GPU ring; the first row printed per size is "
       "taken (the other is within 1.6%)",
       {{1, 43.81}, {2, 87.40}, {4, 137.23}, {8, 182.95}, {16, 234.58}, {32, 274.42}, {64, 319.78},
        {128, 333.11}, {256, 346.77}, {512, 353.20}, {1024, 360.78}, {2048, 363.99}, {4096, 366.75}, {8192, 368.15}}},
  };
  return runs;
}
// clang-format on

std::span<const PublishedPlateau> published_plateaus() { return kPublished; }

std::vector<StepTimeRow> table5_rows() {
  std::vector<StepTimeRow> out;
  for (const auto& e : kTable5) {
    const ModelSpec m = strategy::load_model(e.model);
    const ClusterSpec c = strategy::with_world(strategy::load_cluster("dgx-a100"), e.gpus);
    for (bool selective : {false, true}) {
      StepTimeRow r;
      r.model = e.model;
      r.plan = variant_plan(e.plan, selective);
      r.gpus = e.gpus;
      r.selective = selective;
      r.paper_seconds = selective ? e.selective : e.full;
      r.predicted_seconds = strategy::estimate_step(m, resolved(m, r.plan, e.gpus, c), c, false).step_seconds;
      out.push_back(r);
    }
  }
  return out;
}

// Korthikanti et al. 2022, Table 4: one transformer layer of the 22B model (forward, backward ms).
struct Table4Entry {
  const char* variant;
  const char* plan;
  double forward_ms, backward_ms;
};
constexpr Table4Entry kTable4[] = {
    {"baseline, no recompute", "recompute=none", 7.7, 11.9},
    {"sequence parallelism", "sp=on,recompute=none", 7.2, 11.8},
    {"full recompute", "recompute=full", 7.7, 19.5},
    {"selective recompute", "recompute=selective", 7.7, 13.2},
    {"selective + sequence", "sp=on,recompute=selective", 7.2, 13.1},
};

// A middle layer's ops in the per-layer program: its forward and backward compute and the
// tensor-parallel collectives that follow each, at the cost model's times.
std::vector<LayerTimeRow> layer_rows() {
  const ModelSpec m = strategy::load_model("gpt-22b");
  const ClusterSpec c = strategy::with_world(strategy::load_cluster("dgx-a100"), 8);
  std::vector<LayerTimeRow> out;
  for (const auto& e : kTable4) {
    LayerTimeRow r;
    r.variant = e.variant;
    r.plan = std::string("tp=8,pp=1,gbs=4,mb=4,") + e.plan;
    r.paper_forward_ms = e.forward_ms;
    r.paper_backward_ms = e.backward_ms;
    const Plan p = resolved(m, r.plan, 8, c);
    const strategy::StepProgram prog = strategy::build_step(m, p, 0, {.per_layer_ops = true});
    const strategy::GemmTimes gemms(m, p, c);
    const int layer = 1 + int(m.layers) / 2;  // a block: layer 0 is the embedding
    bool forward = true;
    for (const auto& op : prog.ops) {
      if (op.layers.begin != layer || op.layers.end != layer + 1) continue;
      double ms = 0;
      if (op.is_compute()) {
        forward = op.kind == strategy::OpKind::kForward;
        ms = 1e3 * strategy::compute_time(op, c, p, &gemms);
      } else if (op.is_collective()) {
        ms = 1e3 * op.count *
             strategy::collective_time(strategy::collective_of(op.kind), op.bytes, prog.group_of(op).ranks, c,
                                       op.min_chunk_bytes)
                 .seconds;
      }
      (forward ? r.predicted_forward_ms : r.predicted_backward_ms) += ms;
    }
    out.push_back(r);
  }
  return out;
}

std::vector<BusbwRow> busbw_rows() {
  std::vector<BusbwRow> out;
  // c: the preset with `ranks` devices, loaded once per sweep or run.
  auto simulated = [](const ClusterSpec& c, const char* cluster, int ranks, double bytes) {
    const CollectiveResult sim = simulate_collective(strategy::CollectiveOp::kAllReduce, bytes, ranks, c,
                                                     ScheduleOptions{.algorithm = AlgorithmChoice::kRing});
    BusbwRow r;
    r.cluster = cluster;
    r.ranks = ranks;
    r.bytes = bytes;
    r.protocol = sim.protocol;
    r.simulated_busbw = sim.busbw_bytes_per_s;
    r.analytic_busbw = sim.analytic.busbw_bytes_per_s;
    return r;
  };
  // The 8-GPU sweep of each preset, against its quoted plateau.
  for (const auto& pub : kPublished) {
    const ClusterSpec c = strategy::with_world(strategy::load_cluster(pub.cluster), 8);
    for (double bytes = 1024.0 * 1024; bytes <= 8.0 * 1024 * 1024 * 1024; bytes *= 2) {
      BusbwRow r = simulated(c, pub.cluster, 8, bytes);
      if (bytes >= pub.from_bytes) r.published_busbw = pub.busbw_gb_per_s * 1e9;
      out.push_back(r);
    }
  }
  // Every held-out run, size by size, at its own GPU count.
  for (const auto& run : published_runs()) {
    const ClusterSpec c = strategy::with_world(strategy::load_cluster(run.cluster), run.ranks);
    for (const auto& [mib, gb] : run.mib_busbw) {
      BusbwRow r = simulated(c, run.cluster, run.ranks, mib * 1024 * 1024);
      r.published_busbw = gb * 1e9;
      r.run = run.label;
      out.push_back(r);
    }
  }
  return out;
}

// Per layer and microbatch, 16-bit activations (Korthikanti et al. 2022, Table 2):
//   tensor parallel              s b h (10 + 24/t + 5 a s / (h t))
//   + sequence parallel, selective recompute   s b h 34 / t
// and the first pipeline stage holds L layers' worth of them under 1F1B, times
// 1 + (p - 1)/(p v) interleaved (Section 4.2.3). The ledger's first stage also holds the
// embedding's dropout mask, which the formula leaves out.
std::vector<ActivationRow> activation_rows() {
  std::vector<ActivationRow> out;
  for (const auto& e : kTable5) {
    const ModelSpec m = strategy::load_model(e.model);
    const ClusterSpec c = strategy::with_world(strategy::load_cluster("dgx-a100"), e.gpus);
    for (bool present : {false, true}) {
      const std::string text = std::string(e.plan) + (present ? ",sp=on,recompute=selective" : ",recompute=none");
      const Plan p = resolved(m, text, e.gpus, c);
      const double s = double(m.seq_len), b = double(p.microbatch), h = double(m.hidden), a = double(m.heads);
      const double t = p.tp, sbh = s * b * h;
      const double per_layer = present ? sbh * 34 / t : sbh * (10 + 24 / t + 5 * a * s / (h * t));
      const double inflight_factor =
          p.schedule == strategy::Schedule::kInterleaved ? 1 + double(p.pp - 1) / (double(p.pp) * p.v) : 1.0;
      ActivationRow r;
      r.model = e.model;
      r.variant = present ? "sequence parallel + selective" : "tensor parallel";
      r.paper_bytes = double(m.layers) * per_layer * inflight_factor;
      r.ledger_bytes = strategy::ledger_per_stage(m, p, c).front().activations_bytes;
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace parlab::sim
