// parlab calibrate: measure this machine and write the calibrated cpu-local cluster.
#include <fmt/core.h>

#include <filesystem>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "experiments/lib/calibrate.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "strategy/units.h"

namespace parlab::cli {
namespace {

struct CalibrateOptions {
  int nproc = 4;
  bool quick = false;
  bool if_needed = false;
  bool json = false;
  std::string db = db::kDefaultDatabasePath;
};

void run(const CalibrateOptions& o) {
  const std::filesystem::path results = strategy::results_dir();
  if (o.if_needed && experiments::calibrated_here(results)) {
    fmt::print("cpu-local is already calibrated on this machine ({}); `parlab calibrate` measures again.\n",
               (results / "clusters" / "cpu-local.toml").string());
    return;
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
  if (o.json) return print_json(c.to_json());

  fmt::print("Calibration of {} ({} hardware threads), {}\n\n", c.machine, c.hardware_threads, c.created_at);
  Table t({"processes", "GFLOP/s each", "aggregate", "predicted", "error"});
  for (const auto& p : c.concurrency)
    t.add({std::to_string(p.processes), fmt::format("{:.1f}", p.flops_per_s_each / 1e9),
           fmt::format("{:.1f}", p.aggregate_flops_per_s / 1e9), fmt::format("{:.1f}", p.predicted_aggregate / 1e9),
           fmt::format("{:+.0f}%", 100 * (p.predicted_aggregate / p.aggregate_flops_per_s - 1))});
  fmt::print("Compute: lab-mlp forward+backward, processes running at once\n{}\n", t.str());
  fmt::print("Memory: AdamW update {:.2f} GB/s, memcpy {:.2f} GB/s (one thread)\n\n", c.optimizer_bytes_per_s / 1e9,
             c.memcpy_bytes_per_s / 1e9);
  Table a({"ranks", "bytes", "measured", "fitted", "error"});
  for (const auto& p : c.allreduce)
    a.add({std::to_string(p.ranks), units::format_bytes(p.bytes), units::format_seconds(p.seconds),
           units::format_seconds(p.fitted_seconds), fmt::format("{:+.0f}%", 100 * (p.fitted_seconds / p.seconds - 1))});
  fmt::print("Gloo ring all-reduce on loopback, fitted to t = 2(n-1) a + 2(n-1)/n S/B: a = {:.1f} us, B = {:.2f} GB/s\n{}\n",
             c.latency_seconds * 1e6, c.link_bytes_per_s / 1e9, a.str());
  fmt::print("Communication costs CPU too: {:.2f} ns of CPU per byte a rank sends ({:.2f} GB/s per core).\n\n",
             c.comm_cpu_seconds_per_byte * 1e9, 1e-9 / c.comm_cpu_seconds_per_byte);
  fmt::print("Wrote {} (the analytic model and the simulator load it for --cluster cpu-local)\n"
             "and a calibration row in {}.\n", path.string(), o.db);
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "calibrate",
      "Measure this machine (lab-mlp compute on 1..N processes, memory bandwidth, Gloo all-reduce on\n"
      "loopback for 2..N ranks) and write the calibrated cpu-local cluster to results/clusters/.");
  cmd->add_option("--nproc", o->nproc, "Most workers to measure together")->capture_default_str();
  cmd->add_flag("--quick", o->quick, "Fewer repetitions and sizes");
  cmd->add_flag("--if-needed", o->if_needed, "Do nothing when this machine is already calibrated");
  cmd->add_option("--db", o->db, "Results database")->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->callback([o] { run(*o); });
}

}  // namespace parlab::cli
