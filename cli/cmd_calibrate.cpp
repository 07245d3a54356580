// parlab calibrate: measure this machine and write the calibrated cpu-local cluster.
#include <fmt/core.h>

#include <filesystem>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "experiments/lib/calibrate.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "base/units.h"

namespace parlab::cli {
namespace {

struct CalibrateOptions {
  int nproc = 4;
  bool quick = false;
  bool if_needed = false;
  bool json = false;
  std::string db = db::kDefaultDatabasePath;
};

void print_warnings(const experiments::Calibration& c) {
  if (c.trusted()) return;
  fmt::print(stderr,
             "\nWARNING: this calibration is NOT trustworthy (measured {} time{}); it is written for inspection\n"
             "but not cached: `calibrate --if-needed` will measure again. Measure on a quieter machine.\n",
             c.attempts, c.attempts > 1 ? "s" : "");
  for (const auto& w : c.warnings) fmt::print(stderr, "  - {}\n", w);
  fmt::print(stderr, "\n");
}

// ZeRO's uneven collectives: measured, priced as balanced rings and by their smallest chunks.
void print_sharded(const experiments::Calibration& c) {
  if (c.sharded.empty()) return;
  Table z(
      {"collective", "ranks", "bytes", "smallest chunk", "measured", "all-reduce fit", "error", "own fit", "error"});
  for (const auto& p : c.sharded)
    z.add({p.op, std::to_string(p.ranks), units::format_bytes(p.bytes), units::format_bytes(p.min_chunk_bytes),
           units::format_seconds(p.seconds), units::format_seconds(p.uneven_predicted_seconds),
           fmt::format("{:+.0f}%", 100 * p.uneven_error()), units::format_seconds(p.fitted_seconds),
           fmt::format("{:+.0f}%", 100 * p.fitted_error())});
  Table f({"collective", "ranks", "a", "B", "error (time-weighted)"});
  for (const auto& s : c.sharded_fits)
    f.add({s.op, s.ranks == 0 ? std::string("all") : std::to_string(s.ranks),
           fmt::format("{:.1f} us", s.latency_seconds * 1e6), fmt::format("{:.2f} GB/s", s.link_bytes_per_s / 1e9),
           fmt::format("{:.1f}%", 100 * s.weighted_error)});
  fmt::print(
      "ZeRO's collectives (uneven chunks, back-to-back as buckets and layers issue them), priced by the all-reduce\n"
      "fit of their rank count, (n-1) a + (S - c_min)/B (c_min: the smallest chunk), and by their own fit,\n"
      "(n-1) a + (n-1)/n S/B (the whole message, however it is cut: each rank copies its chunk in and the others "
      "out):\n{}\n"
      "Their own fits: the cost model and the simulator price a reduce-scatter or all-gather on W workers by\n"
      "the fit of W ranks where it is slower than the all-reduce's link (\"all\": the cluster TOML's):\n{}\n",
      z.str(), f.str());
}

// Why --if-needed must measure: the cached calibration cannot serve (none, another machine's, flagged, or stale by
// the runs in the database) or one compute probe disagrees with it. Empty when the cached one still holds.
std::string why_measure(const std::string& db, const std::filesystem::path& results) {
  std::string why;
  if (!std::filesystem::exists(db)) {
    why = experiments::why_recalibrate(results, nullptr);
  } else {
    // Writable: calibrate writes to this database anyway, and an older one is upgraded here
    // rather than refused.
    auto store = open_results("--db", db, /*read_only=*/false);
    why = experiments::why_recalibrate(results, &store);
  }
  if (why.empty()) {
    // Cached, trusted, not contradicted by a measurement: one compute step says whether the
    // machine and its kernels still run at the calibrated rate.
    fmt::print(stderr, "calibrate: checking the cached calibration with one compute probe ...\n");
    why = experiments::compute_probe_disagrees(*experiments::load_stored_calibration(results));
  }
  return why;
}

// One process's GEMM rate and its grid, processes computing at once, and the memory bandwidth.
void print_compute(const experiments::Calibration& c) {
  fmt::print(
      "Compute, 1 process alone: {:.1f} GFLOP/s +-{:.1f}% (median of repeated steps, +- half the interquartile "
      "range)\n",
      c.flops_per_s / 1e9, 100 * c.flops_spread);
  Table g({"microbatch", "hidden", "ffn", "GFLOP/s", "+-"});
  for (const auto& p : c.grid.points)
    g.add({std::to_string(p.microbatch), std::to_string(p.hidden), std::to_string(p.ffn),
           fmt::format("{:.1f}", p.flops_per_s / 1e9), fmt::format("{:.1f}%", 100 * p.spread)});
  fmt::print(
      "The GEMM-rate model: experiments predict each workload's compute at the rate interpolated from this grid\n"
      "(log rate, bilinear in log microbatch x log sqrt(hidden x ffn)):\n{}\n",
      g.str());
  Table t({"processes", "GFLOP/s each", "aggregate", "predicted", "error"});
  for (const auto& p : c.concurrency)
    t.add({std::to_string(p.processes), fmt::format("{:.1f}", p.flops_per_s_each / 1e9),
           fmt::format("{:.1f}", p.aggregate_flops_per_s / 1e9), fmt::format("{:.1f}", p.predicted_aggregate / 1e9),
           fmt::format("{:+.0f}%", 100 * (p.predicted_aggregate / p.aggregate_flops_per_s - 1))});
  fmt::print("Compute: lab-mlp forward+backward, processes running at once\n{}\n", t.str());
  fmt::print("Memory: AdamW update {:.2f} GB/s, memcpy {:.2f} GB/s (one thread)\n\n", c.optimizer_bytes_per_s / 1e9,
             c.memcpy_bytes_per_s / 1e9);
}

// The shared-memory all-reduce and its ring fits, Gloo for reference, ZeRO's collectives and the CPU cost of sending.
void print_communication(const experiments::Calibration& c) {
  Table a({"ranks", "bytes", "measured", "+-", "repeats", "fitted", "error"});
  for (const auto& p : c.allreduce)
    a.add({std::to_string(p.ranks), units::format_bytes(p.bytes), units::format_seconds(p.seconds),
           fmt::format("{:.0f}%", 100 * p.spread), std::to_string(p.repeats), units::format_seconds(p.fitted_seconds),
           fmt::format("{:+.0f}%{}", 100 * (p.fitted_seconds / p.seconds - 1),
                       !experiments::judged(p.bytes) ? " (not judged)" : "")});
  Table f({"ranks", "a", "B", "error (time-weighted)", "+- (time-weighted)"});
  for (const auto& r : c.ring_fits)
    f.add({std::to_string(r.ranks), fmt::format("{:.1f} us", r.latency_seconds * 1e6),
           fmt::format("{:.2f} GB/s", r.link_bytes_per_s / 1e9), fmt::format("{:.1f}%", 100 * r.weighted_error),
           fmt::format("{:.1f}%", 100 * r.weighted_spread)});
  fmt::print(
      "All-reduce between ranks of this host through shared memory (what parlab train --comm auto uses here),\n"
      "fitted to t = 2(n-1) a + 2(n-1)/n S/B for each rank count (messages of\n"
      "{} or more, the sizes predictions use; a prediction on W workers uses the fit of W ranks):\n{}\n"
      "All rank counts at once (the cluster TOML's link): a = {:.1f} us, B = {:.2f} GB/s (error median {:.0f}%, "
      "largest {:.0f}%)\n{}\n",
      units::format_bytes(experiments::kJudgedMessageBytes), f.str(), c.latency_seconds * 1e6, c.link_bytes_per_s / 1e9,
      100 * c.fit_median_relative_error, 100 * c.fit_max_relative_error, a.str());
  for (const auto& g : c.gloo_fits)
    fmt::print(
        "For reference, Gloo over loopback TCP ({} ranks; --comm gloo, or ranks on different hosts): a = {:.1f} us, "
        "B = {:.2f} GB/s\n\n",
        g.ranks, g.latency_seconds * 1e6, g.link_bytes_per_s / 1e9);
  print_sharded(c);
  fmt::print("Communication costs CPU too: {:.2f} ns of CPU per byte a rank sends ({:.2f} GB/s per core).\n\n",
             c.comm_cpu_seconds_per_byte * 1e9, 1e-9 / c.comm_cpu_seconds_per_byte);
}

void run(const CalibrateOptions& o) {
  const std::filesystem::path results = strategy::results_dir();
  if (o.if_needed) {
    const std::string why = why_measure(o.db, results);
    if (why.empty()) {
      fmt::print("cpu-local is already calibrated on this machine ({}); `parlab calibrate` measures again.\n",
                 (results / "clusters" / "cpu-local.toml").string());
      return;
    }
    fmt::print(stderr, "calibrate: measuring because {}\n", why);
  }
  // The database is checked before seconds of measuring, not after.
  auto store = open_results("--db", o.db, /*read_only=*/false);
  experiments::CalibrationOptions co;
  co.nproc = o.nproc;
  co.quick = o.quick;
  co.progress = [](const std::string& s) { fmt::print(stderr, "calibrate: {} ...\n", s); };
  const auto c = experiments::calibrate(co);
  const auto path = experiments::write_calibrated_cluster(c, results);
  store.add_calibration(c.machine, c.to_json());
  print_warnings(c);
  if (o.json) return print_json(c.to_json());

  fmt::print("Calibration of {} ({} hardware threads), {}: {}\n", c.machine, c.hardware_threads, c.created_at,
             c.trusted() ? "trusted" : "FLAGGED (see the warnings)");
  fmt::print(
      "Machine load: load average {:.1f} before, {:.1f} after; other processes (and a VM's steal) took {:.2f} cores "
      "meanwhile.\n\n",
      c.load.loadavg_before, c.load.loadavg_after, c.load.others_busy_cores);
  print_compute(c);
  print_communication(c);
  fmt::print(
      "Wrote {} (the analytic model and the simulator load it for --cluster cpu-local)\n"
      "and a calibration row in {}.\n",
      path.string(), o.db);
  if (!c.trusted()) fmt::print("The calibration is FLAGGED (warnings above): do not trust predictions made with it.\n");
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine (lab-mlp compute on 1..N processes, memory bandwidth, shared-memory and Gloo all-reduce "
      "on\n"
      "loopback for 2..N ranks) and write the calibrated cpu-local cluster to results/clusters/.\n"
      "Every figure is a median of repeats with its spread; the load of other processes is measured\n"
      "meanwhile. Noisy series are repeated more; a calibration whose spread or fit error (weighted by\n"
      "time over the message sizes predictions use) or foreign load is too large is measured again\n"
      "once, then flagged loudly and not cached.");
  cmd->add_option("--nproc", o->nproc, "Most workers to measure together")->capture_default_str();
  cmd->add_flag("--quick", o->quick, "Fewer repetitions and sizes");
  cmd->add_flag("--if-needed", o->if_needed,
                "Measure only when needed: no trusted calibration of this machine yet, the last measured\n"
                "1-worker step (in --db) disagrees with its prediction by more than 15%, or one compute step\n"
                "now runs more than 15% faster or slower than calibrated; says why");
  cmd->add_option("--db", o->db, "Results database")->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->callback([o] { run(*o); });
}

}  // namespace parlab::cli
