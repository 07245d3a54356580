#pragma once
// The workload profile: the seed's "benchmark a small topology before scaling". Before a DDP
// workload on this machine is predicted, one core runs a few microbatches of THAT workload -- its
// own depth, widths and microbatch, the training path's kernels (LabMlp forward + backward, the
// synthetic data, the AdamW update over its parameters) -- and the calibrated cpu-local cluster is
// given the rates it measured. Communication and core sharing still come from `parlab calibrate`.
//
// Why not only the calibration's GEMM-rate grid: a lab-mlp step is not GEMMs at one smooth rate.
// At small microbatches the backward's weight-gradient GEMMs (K = microbatch) are bound by
// reading and accumulating the gradient matrices (at microbatch 16 a 512 x 1536 block's backward
// takes five times its forward), the grid's 256-wide corner fits the core's L2 while a 512-wide
// block does not, and the grid interpolated between them ran 19% fast for such a workload. The
// profile measures the shape itself, in about a second.
#include <cstdint>
#include <string>

#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::experiments {

struct WorkloadProfile {
  int64_t microbatch = 0;
  int64_t parameters = 0;
  double fwdbwd_seconds = 0;     // one microbatch's forward + backward, median of the repeats
  double fwdbwd_spread = 0;      // relative half-IQR of those
  double data_seconds = 0;       // the synthetic data of one microbatch (median)
  double optimizer_seconds = 0;  // the AdamW update over all parameters (median)
  double optimizer_spread = 0;
  double clear_seconds = 0;      // clearing the gradients before a step (median): reported beside the model's
  int repeats = 0;
  // The time per microbatch the cost model must charge: forward + backward + its data (the data
  // is made per sample on the compute stream, so it scales with the microbatches like compute).
  double microbatch_seconds() const { return fwdbwd_seconds + data_seconds; }
};

// Runs the profile on this process's core: one warm-up microbatch, then `repeats` timed ones (up to
// four times as many for a workload whose microbatch takes under 0.3 s: 1.5 s of timed work).
// Under precision=mixed the microbatches run the bf16 kernels the workload will run.
// Throws ConfigError for a model that is not the lab MLP.
WorkloadProfile profile_workload(const strategy::ModelSpec& model, int64_t microbatch, int repeats = 5,
                                 strategy::Precision precision = strategy::Precision::kFp32);

// `cluster` (a calibrated cpu-local) with the profile's rates: the compute rate is the plan's
// forward + backward FLOPs per microbatch (as the step program counts them) over the profiled
// microbatch time, the memory rate the optimizer's traffic (as the program counts it) over the
// profiled update. Any other cluster is returned unchanged.
strategy::ClusterSpec cluster_for_profile(const strategy::ClusterSpec& cluster, const strategy::ModelSpec& model,
                                          const strategy::Plan& plan, const WorkloadProfile& profile);

// One line for reports: what was profiled and the rates it gave.
std::string describe(const WorkloadProfile& p, const strategy::ClusterSpec& profiled);

}  // namespace parlab::experiments
