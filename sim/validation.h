#pragma once
// The GPU presets against published measurements: the rows docs/validation.md shows (its text is
// experiments/lib/gpu_validation.h's, `parlab validate` prints it, and a test regenerates it and
// compares it with the committed file, so the document always shows what the code predicts today).
//
//   step time      the Megatron runs of Korthikanti et al. 2022, Table 5, predicted by the cost
//                  model (the walk of the same step programs the simulator runs, with the same
//                  compute and link times); and one layer of 22B against the per-layer
//                  times of the paper's Table 4, which shows where the step time's errors sit
//   all-reduce     the simulated 8-GPU NVLink ring all-reduce of dgx-a100 and dgx-h100 against
//                  nccl-tests' plateaus, 1 MiB .. 8 GiB, and size by size against held-out
//                  published runs (two of 8 x A100, one of 4 x H100, one of 8 x H100)
//   activations    the memory ledger against the paper's activation formulas (Table 2 and the
//                  pipeline schedule's in-flight factor, Section 4.2.3)
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace parlab::sim {

struct StepTimeRow {
  std::string model;  // preset name
  std::string plan;   // plan text (Table 3's configuration)
  int gpus = 0;
  bool selective = false;  // "present work": sequence parallel + selective recompute; else full recompute
  double paper_seconds = 0;
  double predicted_seconds = 0;
  double error() const { return predicted_seconds / paper_seconds - 1; }
};

struct BusbwRow {
  std::string cluster;
  int ranks = 8;  // GPUs of one node in the ring
  double bytes = 0;
  std::string protocol;        // NCCL's protocol at this size (LL, LL128, Simple), or "measured" (the preset's curve)
  double simulated_busbw = 0;  // bytes/s
  double analytic_busbw = 0;
  double published_busbw = 0;  // 0: no published figure for this size
  std::string run;             // the held-out nccl-tests run this row is compared with; empty: a quoted plateau
  double error() const { return published_busbw > 0 ? simulated_busbw / published_busbw - 1 : 0; }
};

// One transformer layer of gpt-22b (tp 8, microbatch 4, one DGX A100 node): forward and backward
// times, each with the layer's tensor-parallel collectives, against Korthikanti et al. Table 4.
struct LayerTimeRow {
  std::string variant;  // Table 4's experiment name
  std::string plan;
  double paper_forward_ms = 0, paper_backward_ms = 0;
  double predicted_forward_ms = 0, predicted_backward_ms = 0;
  double forward_error() const { return predicted_forward_ms / paper_forward_ms - 1; }
  double backward_error() const { return predicted_backward_ms / paper_backward_ms - 1; }
  double total_error() const {
    return (predicted_forward_ms + predicted_backward_ms) / (paper_forward_ms + paper_backward_ms) - 1;
  }
};

struct ActivationRow {
  std::string model;
  std::string variant;     // "tensor parallel" or "sequence parallel + selective"
  double paper_bytes = 0;  // the paper's formula
  double ledger_bytes = 0;
  double error() const { return ledger_bytes / paper_bytes - 1; }
};

// Published ring all-reduce busbw on 8 GPUs of one node, GB/s, and the sizes it holds for.
struct PublishedPlateau {
  const char* cluster;
  double busbw_gb_per_s;
  double from_bytes;  // the figure is the large-message plateau: sizes >= this
  const char* source;
};

// A published nccl-tests all_reduce_perf run on one node, per message size: held out, i.e. not
// the run a preset's measured curve comes from, nor anything its protocol model was set from.
struct PublishedRun {
  const char* label;  // short name in the tables
  const char* cluster;
  int ranks;  // GPUs in the ring
  const char* source;
  std::vector<std::pair<double, double>> mib_busbw;  // (size MiB, out-of-place busbw GB/s)
};

std::span<const PublishedPlateau> published_plateaus();
const std::vector<PublishedRun>& published_runs();

std::vector<StepTimeRow> table5_rows();
std::vector<BusbwRow> busbw_rows();  // the plateau sweeps, then every held-out run size by size
std::vector<ActivationRow> activation_rows();
std::vector<LayerTimeRow> layer_rows();

}  // namespace parlab::sim
