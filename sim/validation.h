#pragma once
// The GPU presets against published measurements: docs/validation.md is validation_markdown(),
// `parlab validate` prints it, and a test regenerates it and compares it with the committed file,
// so the document always shows what the code predicts today.
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
//   speed          the simulator's and the planner's own speed at datacenter scale beside their
//                  targets: the last run bench_sim --table --record recorded (sim/speed_record.inc),
//                  with its machine and load, as recorded (wall time is not this code's to recompute)
#include <string>
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
  std::string run;  // the held-out nccl-tests run this row is compared with; empty: a quoted plateau
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

std::vector<StepTimeRow> table5_rows();
std::vector<BusbwRow> busbw_rows();
std::vector<ActivationRow> activation_rows();
std::vector<LayerTimeRow> layer_rows();

// docs/validation.md.
std::string validation_markdown();

}  // namespace parlab::sim
