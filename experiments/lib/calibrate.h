#pragma once
// Calibration: "benchmark a small topology before scaling the job". Measures this machine the
// way the lab uses it and writes the calibrated `cpu-local` cluster that the analytic model and
// the simulator load (results/clusters/cpu-local.toml):
//   - compute: lab-mlp forward + backward at its microbatch on one core (the FLOP rate the
//     model's compute ops really get, GELU and bias adds included), then with 1..N processes
//     at once, to see how many cores the workers really share;
//   - memory: the AdamW update over lab-mlp's parameters (bandwidth-bound: 28 bytes per
//     parameter), and a single-thread memcpy for reference;
//   - communication: Gloo ring all-reduce on loopback for 2..N ranks over a range of sizes,
//     fitted to the ring's alpha-beta form t = 2(n-1) a + 2(n-1)/n S/B (least squares on the
//     relative error, so small and large messages count alike).
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strategy/cluster_spec.h"

namespace parlab::experiments {

struct CalibrationOptions {
  int nproc = 4;      // most workers to measure together (compute and collectives)
  bool quick = false;  // fewer repetitions and sizes (tests)
  std::string model = "lab-mlp";
  std::function<void(const std::string&)> progress;
};

struct ConcurrencyPoint {
  int processes = 1;
  double flops_per_s_each = 0;   // median over the processes
  double aggregate_flops_per_s = 0;
  double predicted_aggregate = 0;  // what the calibrated cluster predicts (cores shared evenly)
};

struct AllReducePoint {
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;
  double fitted_seconds = 0;
};

struct Calibration {
  std::string machine;
  std::string created_at;
  int hardware_threads = 0;
  double flops_per_s = 0;  // one process alone
  std::vector<ConcurrencyPoint> concurrency;
  double optimizer_bytes_per_s = 0;
  double memcpy_bytes_per_s = 0;
  std::vector<AllReducePoint> allreduce;
  double latency_seconds = 0;   // fitted per ring step
  double link_bytes_per_s = 0;  // fitted
  double fit_max_relative_error = 0;
  double comm_cpu_seconds_per_byte = 0;  // CPU time per byte a rank sends (all its threads)
  strategy::ClusterSpec cluster;  // the calibrated cpu-local
  nlohmann::json to_json() const;
};

Calibration calibrate(const CalibrationOptions& options);

// Writes `cluster` as <results>/clusters/cpu-local.toml (atomically) and returns the path.
std::filesystem::path write_calibrated_cluster(const Calibration& c, const std::filesystem::path& results_dir);

// True when <results>/clusters/cpu-local.toml exists and was calibrated on this machine.
bool calibrated_here(const std::filesystem::path& results_dir);

}  // namespace parlab::experiments
