#pragma once
// The all-reduce scaling lab: what a data-parallel job delivers as workers are added, once
// communication and stragglers are paid for. The course's quantitative lens:
//
//   speedup(W)    = W t_1 / t_W          (W workers each process a full local batch)
//   efficiency(W) = throughput_W / (W throughput_1) = t_1 / t_W
//
// Symbols and units:
//   W            worker count (integer >= 1)
//   c            local compute per step, seconds (the seed: 120 ms)
//   o            fixed per-step overhead, seconds (optimizer, launch, data), paid at every W
//   S            gradient bytes all-reduced per step
//   a, B         per-hop latency (seconds) and link bandwidth (bytes/s) of the ring
//   s            straggler penalty per doubling of W, as a fraction of c: the slowest of W
//                workers is late by about s c log2 W (the expected maximum of W samples of a
//                light-tailed delay grows like log W)
//
//   t_W = c + o + 2 (W - 1) a + 2 (W - 1)/W x S/B + s c log2 W       (ring all-reduce: 2(W-1) steps)
//
// Hand-checked two-worker example with the defaults (fit to the seed's table):
//   c = 120 ms, o = 0.3 ms, a = 0.183 ms, S = 2 MB, B = 15 GB/s (S/B = 0.1333 ms), s = 0.0408
//   t_1 = 120.3 ms
//   t_2 = 120 + 0.3 + 2(0.183) + 2(1/2)(0.1333) + 0.0408(120)(1) = 125.695 ms
//   speedup = 2 x 120.3 / 125.695 = 1.914 (the seed's "1.9x"), efficiency 0.957.
#include <string>
#include <vector>

namespace parlab::strategy {

struct ScalingLabInputs {
  double compute_seconds = 0.120;
  double overhead_seconds = 0.0003;
  double bytes = 2e6;
  double link_bytes_per_s = 15e9;
  double latency_seconds = 183e-6;
  double straggler_fraction = 0.0408;  // per doubling of W, of the compute time
  std::vector<int> workers = {1, 2, 4, 8, 16};
};

struct ScalingRow {
  int workers = 1;
  double step_seconds = 0;
  double comm_seconds = 0;       // the ring all-reduce
  double straggler_seconds = 0;  // waiting for the slowest worker
  double speedup = 1;
  double efficiency = 1;
  double samples_per_s_relative = 1;  // throughput_W / throughput_1 (= speedup)
  // Samples per step in local batches: the chapter's lab gives every worker a full local batch
  // (the global batch grows with W).
  double global_batch = 1;
};

// Throws ConfigError naming the field for non-positive compute, bandwidth or workers.
std::vector<ScalingRow> scaling_lab(const ScalingLabInputs& in);
double scaling_step_seconds(const ScalingLabInputs& in, int workers);
// The model with the numbers in, computed by the functions above (three lines):
//   "t_1 = c 120 ms + o 0.3 ms = 120.3 ms"
//   "t_8 = c 120 ms + o 0.3 ms + ring 2(8-1) x 0.183 ms + 2(8-1)/8 x 2.00 MB / 15.0 GB/s = 2.8 ms + stragglers ...,
//    t_8 = 137.8 ms"
//   "speedup = 8 x 120.3 ms / 137.8 ms = 6.98x, efficiency = t_1 / t_8 = 0.873"
std::vector<std::string> explain_scaling(const ScalingLabInputs& in, int workers);

}  // namespace parlab::strategy
