#pragma once
// Calibration: "benchmark a small topology before scaling the job". Measures this machine the
// way the lab uses it and writes the calibrated `cpu-local` cluster that the analytic model and
// the simulator load (results/clusters/cpu-local.toml):
//   - compute: lab-mlp forward + backward (the training path's kernels) on one core, over a small
//     grid of microbatch x width shapes -- the GEMM-rate model: a workload's compute rate is
//     interpolated from the grid at its own shape, so predictions hold for shapes calibration did
//     not run -- then with 1..N processes at once, to see how many cores the workers really share;
//   - memory: the AdamW update over lab-mlp's parameters (bandwidth-bound: 28 bytes per
//     parameter), and a single-thread memcpy for reference;
//   - communication: all-reduce between ranks of this host for 2..N ranks, through the backend
//     `parlab train --comm auto` gives them (shared memory; Gloo over loopback TCP is measured on
//     2 ranks beside it, for reference) over a range of sizes,
//     fitted to the ring's alpha-beta form (strategy::ring_collective_seconds; least squares on
//     the relative error) for each rank count, over the sizes predictions use (RingFit).
// Every figure is the median of repeats and carries its spread; a noisy series is measured more
// before it is judged, and all-reduce spread and fit error are judged weighted by each size's
// share of the time. The load other jobs put on the machine is measured during calibration; a
// calibration whose spread, fit error or foreign load is too large is retried once and then
// flagged: written for inspection, but never treated as cached (`--if-needed` measures again).
// Scaling experiments take compute from a profile of the workload itself
// (calibrate_profile.h) and communication from here.
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/results_store.h"
#include "strategy/cluster_spec.h"

namespace parlab::experiments {

struct CalibrationOptions {
  int nproc = 4;       // most workers to measure together (compute and collectives)
  bool quick = false;  // fewer repetitions and sizes (tests)
  std::string model = "lab-mlp";
  int attempts = 2;  // a flagged calibration is measured again this many times in all
  std::function<void(const std::string&)> progress;
};

struct ConcurrencyPoint {
  int processes = 1;
  double flops_per_s_each = 0;  // median over the processes
  double aggregate_flops_per_s = 0;
  double predicted_aggregate = 0;  // what the calibrated cluster predicts (cores shared evenly)
};

struct AllReducePoint {
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;         // median over repeats
  double spread = 0;          // relative half-IQR over repeats
  double fitted_seconds = 0;  // by its rank count's own fit (RingFit)
  int repeats = 0;
};

// Messages at least this large are the ones predictions use (DDP gradient buckets, a
// microbatch's tensor-parallel activations): they are fitted and judged; smaller ones are shown.
inline constexpr double kJudgedMessageBytes = 256e3;
// A point of that size or more (the bench rounds sizes down to whole elements per rank).
inline bool judged(double bytes) { return bytes >= 0.99 * kJudgedMessageBytes; }

// The ring's alpha-beta fitted to one rank count's all-reduce points. On a machine with fewer
// cores than ranks a ring step waits for the next rank to be scheduled, so the latency (and the
// bandwidth) differ by rank count: each count gets its own, and a prediction on W workers uses
// the fit of W ranks. Errors and spreads are weighted by each message size's share of the time
// (what a prediction made of such messages would feel), over the judged sizes.
struct RingFit {
  int ranks = 0;
  double latency_seconds = 0, link_bytes_per_s = 0;
  double weighted_error = 0;   // time-weighted mean |fitted / measured - 1|
  double weighted_spread = 0;  // time-weighted mean relative half-IQR
};

// ZeRO's uneven reduce-scatter or all-gather at one size, beside what the all-reduce fit of its
// rank count predicts for it: as a balanced ring ((n-1) steps of a + S/(nB), what the cost model
// and the simulator charged before they knew the chunks), and priced by its smallest chunk
// ((n-1) a + (S - c_min)/B, strategy::ring_link_bytes: what they charge a ZeRO op now). How far
// each is from the measurement.
struct ShardedPoint {
  std::string op;  // "reduce-scatter" | "all-gather"
  int ranks = 0;
  double bytes = 0;
  double seconds = 0;                   // median burst's seconds per call
  double predicted_seconds = 0;         // balanced ring, by the all-reduce fit of `ranks`
  double min_chunk_bytes = -1;          // the bench's smallest chunk (measure::sharded_counts)
  double uneven_predicted_seconds = 0;  // by the same fit, priced by the smallest chunk
  double fitted_seconds = 0;            // by the op's own fit of `ranks` (ShardedFit)
  double error() const { return seconds > 0 ? predicted_seconds / seconds - 1 : 0; }
  double uneven_error() const { return seconds > 0 ? uneven_predicted_seconds / seconds - 1 : 0; }
  double fitted_error() const { return seconds > 0 ? fitted_seconds / seconds - 1 : 0; }
};

// A reduce-scatter or all-gather fitted on its own over its ShardedPoints, t = (n-1) a + (n-1)/n S
// / B (weighted by 1/t^2; the whole message S however it is cut: strategy::LinkSpec::op_fit), for
// one rank count, or for all at once (ranks 0: the cluster TOML's).
// The cost model and the simulator take it where it is slower than the all-reduce's link
// (strategy::LinkSpec::op_fit): on shared memory these calls are not halves of an all-reduce.
struct ShardedFit {
  std::string op;  // "reduce-scatter" | "all-gather"
  int ranks = 0;
  double latency_seconds = 0, link_bytes_per_s = 0;
  double weighted_error = 0;  // time-weighted mean |fitted / measured - 1| over its points
};

// Fits each (op, rank count) among `points`, then each op over all counts (ranks 0); sets the
// points' fitted_seconds from their own count's fit. Ops with fewer than two sizes get none.
std::vector<ShardedFit> fit_sharded(std::vector<ShardedPoint>& points);

// `link` with the fits of `world` ranks (the largest measured count up to it; ranks 0 where
// `world` is 0) as its reduce-scatter's and all-gather's own.
void apply_sharded_fits(strategy::LinkSpec& link, const std::vector<ShardedFit>& fits, int world);

// Fits each rank count among `points` (judged sizes only) and sets the points' fitted_seconds.
std::vector<RingFit> fit_rings(std::vector<AllReducePoint>& points);

// One point of the GEMM-rate grid: lab-mlp forward+backward at (microbatch, hidden, ffn).
struct ShapePoint {
  int64_t microbatch = 0, hidden = 0, ffn = 0;
  double flops_per_s = 0;          // matmul FLOPs / median step time
  double spread = 0;               // relative half-IQR of the step times
  double forward_flops_per_s = 0;  // the forward's matmul FLOPs (a third) / its median time; 0: not measured
};

// The GEMM-rate model: log-rate interpolated bilinearly over log(microbatch) x log(width), width
// = sqrt(hidden x ffn) (the GEMMs' geometric mean size), clamped at the grid's edges
// (strategy::gemm_rate_at). The calibrated cpu-local carries it (DeviceSpec::gemm_rates), so the
// planner and the simulator price each plan's microbatch and width at its own rate.
struct RateGrid {
  std::vector<ShapePoint> points;  // a full grid: every microbatch with every width
  bool empty() const { return points.empty(); }
  double flops_per_s(int64_t microbatch, int64_t hidden, int64_t ffn) const;
  std::vector<strategy::GemmRatePoint> device_points() const;
};

// What else ran on the machine while calibration measured.
struct MachineLoad {
  double loadavg_before = 0, loadavg_after = 0;  // /proc/loadavg, 1 minute
  double others_busy_cores = 0;                  // CPU time of other processes / wall time (from /proc/stat)
};

struct Calibration {
  std::string machine;
  std::string model;  // the model whose shape `flops_per_s` is measured at
  std::string created_at;
  int hardware_threads = 0;
  double flops_per_s = 0;   // one process alone, the model's own shape
  double flops_spread = 0;  // relative half-IQR of its step times
  // The same under precision=mixed (bf16 matmuls); 0 where the CPU has none. The calibrated
  // cluster's peak_flops_bf16, so the cost model predicts a mixed step at the rate it runs.
  double flops_per_s_bf16 = 0;
  double flops_bf16_spread = 0;
  RateGrid grid;
  std::vector<ConcurrencyPoint> concurrency;
  double optimizer_bytes_per_s = 0;
  double optimizer_spread = 0;
  double memcpy_bytes_per_s = 0;
  std::vector<AllReducePoint> allreduce;
  std::vector<RingFit> ring_fits;        // one per rank count
  std::vector<ShardedPoint> sharded;     // ZeRO's collectives against the fits
  std::vector<ShardedFit> sharded_fits;  // and their own fits, per op and rank count
  std::vector<RingFit> gloo_fits;        // Gloo over loopback TCP (2 ranks), shown for reference
  double latency_seconds = 0;            // fitted per ring step (all rank counts together: the TOML's)
  double link_bytes_per_s = 0;           // fitted
  double fit_max_relative_error = 0;
  double fit_median_relative_error = 0;
  double comm_cpu_seconds_per_byte = 0;  // CPU time per byte a rank sends (all its threads)
  MachineLoad load;
  int attempts = 1;
  // Why this calibration cannot be trusted (spread, fit error, load); empty when it can.
  std::vector<std::string> warnings;
  bool trusted() const { return warnings.empty(); }
  strategy::ClusterSpec cluster;  // the calibrated cpu-local
  nlohmann::json to_json() const;
};

Calibration calibrate(const CalibrationOptions& options);

// Least squares for the ring's t = steps(n) a + factor(n) S / B over all-reduce points, weighted
// by 1/t^2 (relative error): returns {a, 1/B}. a < 0 falls back to a = 0 (bandwidth only).
// Throws RuntimeError when the points cannot separate a from B.
std::pair<double, double> fit_alpha_beta(const std::vector<AllReducePoint>& points);

// The reasons a calibration with these figures is not to be trusted (empty: trusted).
std::vector<std::string> calibration_warnings(const Calibration& c);

// Writes `cluster` as <results>/clusters/cpu-local.toml (atomically) with the whole calibration
// beside it (cpu-local.calibration.json: the rate grid, spreads, load, warnings); returns the
// TOML's path.
std::filesystem::path write_calibrated_cluster(const Calibration& c, const std::filesystem::path& results_dir);

// The calibration stored beside <results>/clusters/cpu-local.toml, as much of it as later steps
// need; nullopt when there is none or it is unreadable.
struct StoredCalibration {
  std::string machine, created_at;
  std::string comm;  // the backend its all-reduce fits measured: "shm" (older calibrations: "gloo")
  bool trusted = false;
  std::vector<std::string> warnings;
  RateGrid grid;
  double flops_per_s = 0;  // one process alone at the calibration model's shape
  std::string model;       // the model that shape is of
  std::vector<RingFit> ring_fits;
  std::vector<ShardedFit> sharded_fits;
};
std::optional<StoredCalibration> load_stored_calibration(const std::filesystem::path& results_dir);

// True when <results>/clusters/cpu-local.toml exists, was calibrated on this machine and its
// calibration was not flagged.
bool calibrated_here(const std::filesystem::path& results_dir);

// `calibrate --if-needed` measures again when the last measured 1-worker step under the current
// calibration is this far from the prediction recorded with it (the lab's goal is 15%).
inline constexpr double kStaleCalibrationError = 0.15;

// Why the cached calibration in <results> cannot serve (none, another machine's, flagged, or
// stale: the last measured 1-worker cpu-local run in `store` made under it disagrees with its
// recorded prediction by more than kStaleCalibrationError); empty when it serves.
std::string why_recalibrate(const std::filesystem::path& results_dir, db::ResultsStore* store);

// A calibration measured before a change to the kernels or the machine still passes every
// other test: `calibrate --if-needed` times the calibration's own compute step again (about a
// second) and measures again when it runs this much faster or slower than the calibration says.
// Empty when the probe agrees, else why not.
std::string compute_probe_disagrees(const StoredCalibration& stored);

// The links of `ranks` ranks on this host measured now, as calibration measures them (the
// shared-memory all-reduce at the sizes predictions use, ZeRO's uneven reduce-scatter and
// all-gather) and fitted: what an experiment in rounds prices each round with, since this
// machine's communication drifts as its compute does (a 4-rank reduce-scatter of 4 MB measured
// 2.3 ms in one calibration and 8.5 ms in the next, an hour apart).
struct LinkFits {
  RingFit ring;
  std::vector<ShardedFit> sharded;  // this rank count's reduce-scatter and all-gather fits
};
LinkFits measure_links(int ranks, bool quick = false);  // quick: fewer sizes and repeats (tests)

// `cluster` with the link fitted for `world` ranks (the largest measured count beyond it); any
// cluster that is not a calibrated cpu-local, or no fits, unchanged.
strategy::ClusterSpec cluster_for_world(const strategy::ClusterSpec& cluster, const std::vector<RingFit>& fits,
                                        int world, const std::vector<ShardedFit>& sharded = {});

// The cluster a DDP workload is predicted on: a calibrated cpu-local's compute rate replaced by
// the rate grid's at the workload's shape and microbatch; any other cluster unchanged.
strategy::ClusterSpec cluster_for_workload(const strategy::ClusterSpec& cluster, const RateGrid& grid,
                                           int64_t microbatch, int64_t hidden, int64_t ffn);

}  // namespace parlab::experiments
