#pragma once
// The workload profile: the seed's "benchmark a small topology before scaling". Before a
// workload on this machine is predicted, the ranks it will run on run a few microbatches of THAT
// workload together -- a rank's own depth (its pipeline stage's blocks), widths (its tensor-
// parallel slice of the FFN) and microbatch, the training path's kernels (LabMlp forward +
// backward, the synthetic data, the AdamW update) -- and the calibrated cpu-local cluster is given
// the rates they measured. Communication still comes from `parlab calibrate`.
//
// Why together, in lockstep: ranks that share a host slow each other beyond sharing its cores
// (memory bandwidth, caches, page faults of the activations each microbatch allocates), and by
// how much depends on the machine and the shapes: measured on one Zen 5 VM, two DDP ranks'
// forward ran 2.2x slower per block than one rank's while two sgemm processes of the same shape
// lost 5%. So W processes, forked at once, start every microbatch and every update at a shared
// barrier, as data-parallel ranks do, and the profile keeps what each of them took.
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
  int processes = 1;                                     // ranks that ran it together, in lockstep (the plan's workers)
  int64_t hidden = 0, ffn = 0, blocks = 0, classes = 0;  // the shape one rank runs (its slice, its stage)
  int64_t microbatch = 0;
  int microbatches_per_step = 1;  // timed between the clear and the update, as a step runs them
  // How many of them were between their forward and their backward at once (microbatches_in_flight).
  int microbatches_in_flight = 1;
  // Microbatches whose weight-gradient products ran at once (strategy::weight_grad_group of the
  // plan profiled: 1 under ZeRO-2/3, TP and pipelines), as the plan's trainer runs them.
  int weight_grad_group = 1;
  // The bf16 weight copies made for every forward and every backward (bf16_copies_per_pass), not
  // once a step: in the microbatch's time, as in the rank's.
  bool bf16_copies_per_pass = false;
  double bf16_copies_per_microbatch = 0;  // weight tensors converted to bf16, per microbatch run (process 0's)
  int64_t parameters = 0;
  double fwdbwd_seconds = 0;     // one microbatch's forward + backward, median over the repeats (steps)
  double fwdbwd_spread = 0;      // relative half-IQR of those
  double data_seconds = 0;       // the synthetic data of one microbatch (median)
  double optimizer_seconds = 0;  // the AdamW update over all parameters (median)
  double optimizer_spread = 0;
  double clear_seconds = 0;  // clearing the gradients before a step (median): reported beside the model's
  // New memory made and zeroed (four buffers of 25 MiB at once), bytes per second: the cluster's
  // device.first_touch_bytes_per_s, reported. No prediction prices it since the trainer keeps
  // ZeRO-2/3's buckets in a ring across steps (train/executor.h): steady steps make none.
  double first_touch_bytes_per_s = 0;
  int repeats = 0;  // timed steps
  // How often the plan's tensor-parallel groups met in a microbatch: after every block's forward
  // and backward, as their all-reduces make them, so the microbatch's time holds the waits for
  // each group's slowest member (2 x blocks; 0 without TP or with one process).
  double tp_meetings_per_microbatch = 0;
  // The same steps timed to the barrier that follows them, which every process leaves when the last
  // one arrives: a microbatch's time (forward + backward + data) as the step's makespan over its
  // microbatches, and the update's makespan; means over the processes of medians over the steps.
  // Where more processes than cores ran, these give the rates (cluster_for_profile): the kernel
  // does not share three processes evenly over two cores (one core runs one of them, the other
  // two), so the lone one finishes early and the mean of the processes' own times prices the
  // cores faster than the work they did in a step (deep-mlp's 6-block stage on 3 processes of a
  // 2-core VM: 26.25 ms a microbatch by the mean, 28.10 by the makespan; the update 16.86 / 23.16).
  double microbatch_makespan_seconds = 0, optimizer_makespan_seconds = 0;
  // The CPU time (the process's, user and system) of the same microbatch (forward, backward and
  // data) and update: medians over the steps, means over the processes. What a core delivered:
  // the work over the core-seconds it took, with what the co-running processes cost it (caches,
  // memory bandwidth), without the waits for a core and the cores' idle tails at the barriers.
  double microbatch_cpu_seconds = 0, optimizer_cpu_seconds = 0;
  // The time per microbatch the cost model must charge: forward + backward + its data (the data
  // is made per sample on the compute stream, so it scales with the microbatches like compute).
  double microbatch_seconds() const { return fwdbwd_seconds + data_seconds; }
};

// How many microbatches a rank of `plan` holds between their forward and their backward, so the
// profile runs them in that order (of `per_step` a step): 1, forward then backward back to back,
// where pp = 1; a pipeline's first stage runs pp - 1 forwards before its first backward under
// 1F1B and interleaving (pp in flight), every forward first under GPipe. Why: a backward that
// runs right after its own forward finds that microbatch's activations in the cache; in a
// pipeline stage, other microbatches' work came between. The 6 x 1536/3072 MLP, pp=2 on
// 2 workers of a 2-vCPU VM: the trainer's stage took 317-352 ms a step of forward + backward
// where the profile, back to back, gave 309; in the stage's order the profile's microbatch took
// 43.0-43.6 ms against 41.7-43.3 back to back (three alternations): about 1.5% of that gap.
int microbatches_in_flight(const strategy::Plan& plan, int per_step);

// Whether `plan`'s ranks make their bf16 weight copies again for every pass: ZeRO-3 under mixed
// precision on more than one rank frees each layer's copy with its gather (train/executor_zero.cpp)
// and converts the next gather again, 2 x microbatches times a step where any other plan converts
// twice. A memory-bound pass over the weights (6 bytes an element, 1.2-1.6 ms a lab weight) the
// step program does not hold, so the profile runs it: measured by the workload's own kernels.
bool bf16_copies_per_pass(const strategy::Plan& plan);

// Runs the profile of `plan`'s rank shape (ffn / tp, ceil(layers / pp) blocks, its microbatch and
// precision) in `processes` processes at once (forked: call before this process starts threads
// of its own; 1 runs here), as steps: the clear, the plan's microbatches per step (at most 8) in
// the trainer's order (microbatches_in_flight), the update. One warm-up step, then as many timed
// steps as give `repeats` microbatches (at least 5; up to four times `repeats` steps for a
// workload whose step takes under 1.5 s), each step started together, each process on the core
// the trainer would give its rank (train::CoreHome; not with PARLAB_CORE_HOME=off). The times are
// per microbatch, medians over the steps, then the mean over the processes (what the cores
// deliver to the job as a whole). Why steps and not lone
// microbatches: a microbatch timed alone, just after an update, ran faster than the same one
// inside a step (one Xeon VM, lab-mlp, microbatch 64: 291-308 ms alone, 335 ms eight in a row,
// the trainer's step about 355 ms a microbatch), and the 1-worker prediction was 15-17% fast.
// Throws ConfigError for a model that is not the lab MLP or a bad count, RuntimeError when a
// profiling process fails.
WorkloadProfile profile_workload(const strategy::ModelSpec& model, const strategy::Plan& plan, int processes,
                                 int repeats = 5);
// One process, the whole network (tp = pp = 1).
WorkloadProfile profile_workload(const strategy::ModelSpec& model, int64_t microbatch, int repeats = 5,
                                 strategy::Precision precision = strategy::Precision::kFp32);

// Which of the profile's times price a rank where its processes outnumbered the cores
// (cluster_for_profile). A plan whose ranks meet once a step, at the gradient sync (data
// parallelism, ZeRO-1/2), is priced on the CPU time: between syncs the kernel shares the cores
// out evenly over the step, the sync is the communication model's, and the makespans' idle tails
// (one process left running at a barrier, the other core waiting) priced held2 on 4 workers
// 12-20% slow (DDP +12.1%, ZeRO-1 +19.7%; on CPU time -3.4% / -1.8%). A plan whose ranks meet
// inside the step (tensor-parallel all-reduces, pipeline hand-offs, ZeRO-3's gathers) is priced
// on the makespans: there a partner waits for a core at every meeting, which the simulator's
// fair share of the cores does not model and the makespan holds (on CPU time TP 3 on 3 workers
// was -22.8%, TP2xPP2 on 4 -25.2%). Processes within the cores: their own times.
enum class SharedCorePricing { kOwnTimes, kMakespan, kCpuTime };
SharedCorePricing shared_core_pricing(const strategy::ClusterSpec& cluster, const strategy::Plan& plan,
                                      const WorkloadProfile& profile);

// `cluster` (a calibrated cpu-local) with the profile's rates: the compute rate is the profiled
// shape's forward + backward FLOPs per microbatch (as the step program counts them) over the
// profiled microbatch time, the memory rate the optimizer's traffic (as the program counts it) over
// the profiled update. Where more processes ran than the host has cores, each got a share of a
// core, and the cost model and the simulator share the cores out again: the rates are then the
// CPU times' or the makespans' (shared_core_pricing), a wall time given per core (times
// processes / cores). Any other cluster is returned unchanged.
strategy::ClusterSpec cluster_for_profile(const strategy::ClusterSpec& cluster, const strategy::ModelSpec& model,
                                          const strategy::Plan& plan, const WorkloadProfile& profile);

// One line for reports: what was profiled and the rates it gave.
// `plan`: the plan the rates are for (shared_core_pricing).
std::string describe(const WorkloadProfile& p, const strategy::ClusterSpec& profiled, const strategy::Plan& plan);

}  // namespace parlab::experiments
