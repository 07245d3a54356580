#pragma once
// The measurements calibration is made of, each repeated and summarised by its median and
// spread (base/stats.h). Internal to experiments/lib/calibrate.cpp.
#include <string>
#include <vector>

#include "experiments/lib/calibrate.h"
#include "runtime/comm/backend_choice.h"
#include "runtime/model/lab_mlp.h"
#include "strategy/collectives.h"
#include "strategy/model_spec.h"
#include "base/stats.h"

namespace parlab::experiments::measure {

// lab-mlp forward + backward of `microbatch` samples on this process's core, `reps` timed steps
// after one warm-up (the first step pays page faults). Returns the step times in seconds.
std::vector<double> step_seconds(const model::MlpShape& shape, int64_t microbatch, int reps);
// The same under precision=mixed (bf16 matmul inputs, fp32 accumulation: LabMlp's mixed path).
// The bf16 weight copies are made in the warm-up and stay fresh, as over a step's microbatches.
// Throws RuntimeError where bf16 matmuls are unavailable (compute::cpu::bf16_supported()).
std::vector<double> mixed_step_seconds(const model::MlpShape& shape, int64_t microbatch, int reps);

// step_seconds for several (shape, microbatch) pairs at once, round-robin: rep r of every shape
// runs before rep r + 1 of any, so a burst of another job's load lands on one rep of each
// shape, not on all reps of one. Returns the step times per shape, in the order given; and in
// `forward`, if given, the same steps' forward times.
std::vector<std::vector<double>> interleaved_step_seconds(
    const std::vector<std::pair<model::MlpShape, int64_t>>& shapes, int reps,
    std::vector<std::vector<double>>* forward = nullptr);

// `k` processes measure step_seconds at once (forked: call before this process starts any
// thread); returns each one's FLOP/s (matmul FLOPs / its median step).
std::vector<double> concurrent_step_flops(const model::MlpShape& shape, int64_t microbatch, int k, int reps);

// The AdamW update over the shape's parameters, `reps` times: bytes moved per second for each.
std::vector<double> optimizer_bytes_per_s(const model::MlpShape& shape, int reps);

double memcpy_bytes_per_s();

// Gloo ring all-reduce on loopback among `n` ranks (threads with their own contexts and
// sockets), each size measured as DDP issues its gradient buckets: a burst of
// calls_per_burst(size) back-to-back calls (issued at once, then waited for; about 32 MB in all,
// 1 to 64 calls). Returns per size the median burst's seconds per call over `iters` bursts.
// Why not the median of lone calls between barriers (nccl-tests' way): a lone call's latency on
// loopback is bimodal (a 256 kB call took 0.45 ms in one calibration, 4 ms in another, so the
// fitted latency moved from 120 to 480 us between quiet calibrations), and the barrier hides the
// wake-ups and skew a rank pays between back-to-back calls; a burst pays and averages them.
// `choice`: the backend (auto: shared memory, as `parlab train` uses between ranks of one host).
std::vector<double> allreduce_seconds(int n, const std::vector<double>& sizes, int iters,
                                      comm::CommChoice choice = comm::CommChoice::kAuto);
int calls_per_burst(double bytes);

// ZeRO's collectives as the executor issues them: reduce-scatter and all-gather of `bytes` (the
// whole buffer, nccl-tests' convention) cut unevenly at shard boundaries (sharded_counts), in
// bursts of calls_per_burst(bytes) back-to-back calls, on `n` ranks (threads, as
// allreduce_seconds). Returns per size the median burst's seconds per call over `iters` bursts.
std::vector<double> sharded_seconds(strategy::CollectiveOp op, int n, const std::vector<double>& sizes, int iters);
// The chunks (fp32 elements, rank by rank) sharded_seconds cuts `bytes` into: rank 0's about 3/2
// of each other rank's.
std::vector<int64_t> sharded_counts(int n, double bytes);

// CPU time per byte a rank sends in a Gloo all-reduce of `bytes` among `n` ranks.
double comm_cpu_seconds_per_byte(int n, double bytes, int iters);
// `calls` back-to-back all-reduces of `bytes` each on n ranks (issued at once, then waited for, as
// DDP issues its gradient buckets): the median seconds of `repeats` such bursts.
double burst_seconds(int n, double bytes, int calls, int repeats, comm::CommChoice choice = comm::CommChoice::kAuto);

// CPU use of the whole machine and of this process (with its waited-for children), to tell the
// load other jobs put on the machine while calibration ran.
struct CpuSample {
  double wall = 0, machine_busy = 0, own = 0;  // seconds
};
CpuSample sample_cpu();
// The busy seconds of /proc/stat's first line ("cpu ..."): user, nice, system, irq, softirq and
// steal; 0 for a line that is not it.
double busy_seconds_of_proc_stat(const std::string& line, double ticks_per_second);
// Cores' worth of CPU that other processes, or on a virtual machine the hypervisor (steal), took
// between two samples.
double others_busy_cores(const CpuSample& before, const CpuSample& after);
// /proc/loadavg's 1-minute average (0 where there is none).
double loadavg_1min();

}  // namespace parlab::experiments::measure
