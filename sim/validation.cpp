#include "sim/validation.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

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

// Published ring all-reduce busbw on 8 GPUs of one node, GB/s, and the sizes it holds for.
struct Published {
  const char* cluster;
  double busbw_gb_per_s;
  double from_bytes;  // the figure is the large-message plateau: sizes >= this
  const char* source;
};
constexpr Published kPublished[] = {
    {"dgx-h100", 370, 1024.0 * 1024 * 1024,
     "8 x H100 SXM, NCCL_ALGO=RING: \"an effective NVLink bandwidth of 370GB/s, which you can observe as "
     "BusBw ... when running with NCCL_ALGO=RING\" (S. Jeaugey, NVIDIA, NVIDIA/nccl-tests issue 212); "
     "\"busbw is about 365-370 GBps when gpus from 2 to 8\" at 2-4 GiB (NVIDIA/nccl issue 1455)"},
    {"dgx-a100", 240, 1024.0 * 1024 * 1024,
     "8 x A100 SXM on NVLink: \"you should be seeing close to 240 GB/s\" (NVIDIA, NVIDIA/nccl issue 1712)"},
};

std::string pct(double x) { return fmt::format("{:+.1f}%", 100 * x); }
std::string size_text(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return fmt::format("{:.0f} GiB", bytes / (1024.0 * 1024 * 1024));
  return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024));
}

}  // namespace

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

std::vector<BusbwRow> busbw_rows() {
  std::vector<BusbwRow> out;
  for (const auto& pub : kPublished) {
    const ClusterSpec c = strategy::with_world(strategy::load_cluster(pub.cluster), 8);
    for (double bytes = 1024.0 * 1024; bytes <= 8.0 * 1024 * 1024 * 1024; bytes *= 2) {
      BusbwRow r;
      r.cluster = pub.cluster;
      r.bytes = bytes;
      const CollectiveResult sim = simulate_collective(strategy::CollectiveOp::kAllReduce, bytes, 8, c,
                                                       ScheduleOptions{.algorithm = AlgorithmChoice::kRing});
      r.protocol = sim.protocol;
      r.simulated_busbw = sim.busbw_bytes_per_s;
      r.analytic_busbw = sim.analytic.busbw_bytes_per_s;
      r.published_busbw = bytes >= pub.from_bytes ? pub.busbw_gb_per_s * 1e9 : 0;
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

std::string validation_markdown() {
  std::string md;
  md += "# Validation of the GPU presets against published measurements\n\n";
  md += "Generated by `parlab validate` (sim/validation.cpp); a test regenerates it and fails when it\n"
        "differs from this file. Do not edit by hand.\n\n";
  md += "Every efficiency the presets use is a measured quantity with its source in the preset file\n"
        "(strategy/presets/clusters/): dgx-a100 `gemm_efficiency` 0.859 (the maximum achievable bf16 matmul\n"
        "rate on A100 SXM, 267.9 of 312 TFLOP/s, Bekman's ml-engineering MAMF table), `memory_efficiency` 0.88\n"
        "(1.80 of 2.04 TB/s streamed on A100 80GB, NVIDIA developer forum), NVLink `protocol_efficiency` 0.80 and\n"
        "InfiniBand 0.94 (NCCL's measured bus bandwidth over the line rate, NVIDIA/nccl issue 1712 and\n"
        "NVIDIA/nccl-tests issue 290); dgx-h100 0.801, 0.88, 0.822 (NVIDIA/nccl-tests issue 212), 0.94. None was\n"
        "fitted to a figure below.\n\n"
        "GEMMs lose what their own shapes leave idle (wave quantization, strategy/cost_model_gemm.cpp): an\n"
        "A100 runs one 256x128 output tile per SM on its 108 SMs (`sms`, `gemm_tile_rows/cols` in dgx-a100;\n"
        "NVIDIA, \"Matrix Multiplication Background User's Guide\"), so a GEMM of T tiles takes ceil(T / 108)\n"
        "waves. The MAMF best shape behind 0.859 fills whole waves (27 x 128 tiles = 32 x 108); Megatron's\n"
        "shapes do not, and each forward, backward and recomputed GEMM of a layer is stretched to its whole\n"
        "waves: 175B's QKV GEMM at tp 8 (2048 x 4608 outputs) is 288 tiles, three waves of 108, so it runs at\n"
        "8/9 of the best shape's rate.\n\n";

  // ---- step time ----
  md += "## Step time: Megatron on A100, Korthikanti et al. 2022, Table 5\n\n";
  md += "Paper: V. Korthikanti et al., \"Reducing Activation Recomputation in Large Transformer Models\"\n"
        "(arXiv 2205.05198), Table 5 (iteration time, seconds) for the configurations of Table 3 (tensor\n"
        "parallel 8; pipeline 1, 8, 35, 64; interleaving 3 for 175B and 530B; global batch 4, 64, 280, 512;\n"
        "microbatch 4 for 22B, 1 otherwise; sequence 2048) on DGX A100 nodes. \"Full\" is full activation\n"
        "recompute; \"present work\" is sequence parallelism with selective recompute. Predicted by the cost\n"
        "model on `dgx-a100`: the walk of the step programs the simulator runs, with the same compute and\n"
        "link times.\n\n";
  md += "| model | GPUs | full: paper | predicted | error | present work: paper | predicted | error |\n";
  md += "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  const auto t5 = table5_rows();
  double sum = 0, worst = 0;
  for (size_t i = 0; i + 1 < t5.size(); i += 2) {
    const StepTimeRow& f = t5[i];
    const StepTimeRow& s = t5[i + 1];
    md += fmt::format("| {} | {} | {:.2f} s | {:.2f} s | {} | {:.2f} s | {:.2f} s | {} |\n", f.model, f.gpus,
                      f.paper_seconds, f.predicted_seconds, pct(f.error()), s.paper_seconds, s.predicted_seconds,
                      pct(s.error()));
  }
  for (const auto& r : t5) {
    sum += std::fabs(r.error());
    worst = std::max(worst, std::fabs(r.error()));
  }
  md += fmt::format("\nMean absolute error {:.1f}%, worst {:.1f}% (goal: <= 5% mean, <= 10% worst; Calculon, Isaev et\n"
                    "al. SC'23, reports 3.65% / 8.87% on the same table).\n\n",
                    100 * sum / double(t5.size()), 100 * worst);
  md += "Where the prediction still falls short (each a known difference, not a fitted constant):\n"
        "- With sequence parallelism Megatron all-gathers each column-parallel linear's input again in the\n"
        "  backward pass (to save memory), two more all-gathers per layer and microbatch that the step\n"
        "  programs do not make. They are not the missing time: Megatron launches them asynchronously and\n"
        "  overlaps them with the input-gradient GEMM, as it overlaps the backward reduce-scatter with the\n"
        "  weight-gradient GEMM (`LinearWithGradAccumulationAndAsyncCommunication`), while the step programs\n"
        "  keep every tensor-parallel collective synchronous. The present-work rows stay the most too fast,\n"
        "  and what costs them the time is not yet found.\n"
        "- Megatron's 2022 pipeline communication blocks the compute stream (`_communicate` waits on every\n"
        "  `batch_isend_irecv` request and synchronizes the device); the step programs send asynchronously.\n"
        "- The message-size dependence of NCCL's bus bandwidth at the tensor-parallel sizes (50-105 MB per\n"
        "  call) is NCCL's own protocol model (see the all-reduce section), not a per-size measurement: no\n"
        "  per-size nccl-tests table for DGX A100 could be transcribed.\n"
        "- Megatron's mixed-precision optimizer also computes the gradient norm, copies the fp32 master\n"
        "  weights to bf16 and zeroes the fp32 gradients (about 14 more bytes per parameter than Adam's 28);\n"
        "  at most 1.5% of a row (22B).\n\n";

  // ---- all-reduce ----
  md += "## 8-GPU NVLink ring all-reduce: busbw against nccl-tests\n\n";
  md += "Simulated with SimGrid (`parlab simulate collective --op all-reduce --ranks 8`, ring): every step of\n"
        "the ring is a flow on the NVSwitch model of the preset. busbw is nccl-tests' (algbw x 2(n-1)/n).\n\n"
        "What makes small and mid-size messages slower than the plateau is NCCL's protocol choice, timed\n"
        "with NCCL's own tuning constants (NVIDIA/nccl v2.28.7-1, src/graph/tuning.cc, ncclTopoTuneModel;\n"
        "strategy/cost_model_nccl.cpp), none fitted to a figure below. A ring call under protocol p takes\n"
        "base_p + 2(n-1) step_p + 2(n-1)/n S / bw_p, and the fastest protocol is taken, as NCCL's tuner does:\n"
        "- LL: base 6.6 us, 0.6 us a step, a quarter of the ring's bandwidth (8-byte stores of 4 data bytes\n"
        "  and a flag), at most 87.7 GB/s on Ampere and 141 GB/s on Hopper (`llMaxBws`, one node);\n"
        "- LL128: base 14.0 us, 1.9 us a step, 0.92 of the bandwidth (120 of 128 bytes carry data);\n"
        "- Simple: base 8.4 us, 3.4 us a step, the whole bandwidth: the preset's measured plateau (below).\n"
        "The preset's NVLink `latency_us` is LL's 0.6 us step; the other protocols' longer steps, their\n"
        "base latencies and their bandwidth fractions are added to the ring's steps. The cost model's\n"
        "column is the same formula in closed form. NVLink SHARP (NVLS, Hopper's default for all-reduce)\n"
        "is not modelled: the figures compared are NCCL_ALGO=RING.\n\n"
        "Published figures (NCCL_ALGO=RING, large-message plateau):\n";
  for (const auto& pub : kPublished) md += fmt::format("- {}: {:.0f} GB/s. {}\n", pub.cluster, pub.busbw_gb_per_s, pub.source);
  md += "\nBelow 1 GiB the sizes are shown without a comparison, so 1 MiB .. 512 MiB do not meet the goal's\n"
        "comparison: per-size nccl-tests outputs for 8 GPUs in one node exist, but their rows could not be\n"
        "transcribed from the copies at hand (only the headers and a few rows were legible):\n"
        "NVIDIA/nccl issue 583 (8 x A100-SXM4-40GB, DGX-class NVSwitch, `mpirun -np 8 all_reduce_perf -b 32\n"
        "-f 2 -e 8G`, NCCL 2.10 era, NCCL_ALGO not set), NVIDIA/nccl-tests issue 149 (8 x A100-SXM4-80GB\n"
        "HGX, `-b 8 -e 1G -f 4`, NCCL 2.17/2.18) and IBM/pytorch-communication-benchmarks issue 1 (8 x H100\n"
        "80GB HBM3 in one node, `NCCL_ALGO=Ring all_reduce_perf -b 8M -e 16G -f 2 -g 1`). Until their rows\n"
        "are transcribed, the sizes below 1 GiB are NCCL's protocol model, not a validated prediction.\n\n";
  md += "| cluster | size | protocol | simulated busbw | cost model | nccl-tests | error |\n";
  md += "| --- | ---: | --- | ---: | ---: | ---: | ---: |\n";
  double bus_worst = 0;
  for (const auto& r : busbw_rows()) {
    const bool cmp = r.published_busbw > 0;
    if (cmp) bus_worst = std::max(bus_worst, std::fabs(r.error()));
    md += fmt::format("| {} | {} | {} | {:.1f} GB/s | {:.1f} GB/s | {} | {} |\n", r.cluster, size_text(r.bytes),
                      r.protocol, r.simulated_busbw / 1e9, r.analytic_busbw / 1e9,
                      cmp ? fmt::format("{:.0f} GB/s", r.published_busbw / 1e9) : std::string("-"),
                      cmp ? pct(r.error()) : std::string("-"));
  }
  md += fmt::format("\nWorst error where a published figure exists: {:.1f}% (goal: within 10%).\n\n", 100 * bus_worst);

  // ---- activations ----
  md += "## Activation memory: the ledger against Korthikanti et al.'s formulas\n\n";
  md += "Per layer and microbatch with 16-bit activations (Table 2): tensor parallel s b h (10 + 24/t +\n"
        "5 a s/(h t)); with sequence parallelism and selective recompute s b h 34/t. The first pipeline stage\n"
        "holds L layers' worth under 1F1B, times 1 + (p - 1)/(p v) with interleaving (Section 4.2.3). The\n"
        "ledger's first stage (`parlab plan`) also counts the embedding's dropout mask and, for the single\n"
        "stage of 22B, the output layer's fp32 logits, which these formulas leave out.\n\n";
  md += "| model | variant | paper formula | ledger, first stage | error |\n";
  md += "| --- | --- | ---: | ---: | ---: |\n";
  double act_worst = 0;
  for (const auto& r : activation_rows()) {
    act_worst = std::max(act_worst, std::fabs(r.error()));
    md += fmt::format("| {} | {} | {:.2f} GB | {:.2f} GB | {} |\n", r.model, r.variant, r.paper_bytes / 1e9,
                      r.ledger_bytes / 1e9, pct(r.error()));
  }
  md += fmt::format("\nWorst error {:.1f}% (goal: within 3%).\n", 100 * act_worst);
  return md;
}

}  // namespace parlab::sim
