#include "experiments/lib/calibrate.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <optional>
#include <fstream>
#include <iterator>
#include <numeric>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "experiments/lib/calibrate_measure.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/train/trainer.h"
#include "strategy/collectives.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/presets.h"
#include "base/stats.h"
#include "strategy/toml_reader.h"
#include "base/units.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

// When a calibration is not to be trusted. A quiet 2-core machine repeats a compute step within
// a few percent; its all-reduce of 256 kB..64 MB varies by 5-30% at a given size (more with more
// ranks than cores), but a prediction is made of DDP buckets of megabytes, where the time is.
// So all-reduce spread and fit error are judged weighted by each size's share of the time, over
// the sizes predictions use. The limits sit above what a quiet machine shows and below what a
// busy one produces (another job on one of two cores halves a process's rate at random moments:
// compute spreads of 20-50%, all-reduce times two to five times the quiet ones at random).
constexpr double kMaxComputeSpread = 0.10;    // relative half-IQR of the step times
constexpr double kMaxAllReduceSpread = 0.20;  // time-weighted, per rank count
constexpr double kMaxFitError = 0.15;         // time-weighted |fitted / measured - 1|, per rank count
constexpr double kMaxOthersBusyCores = 0.3;   // CPU other jobs used meanwhile, in cores
constexpr double kMinSharedAggregate = 0.75;  // measured / predicted aggregate, all cores busy

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

std::string now_utc() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

void say(const CalibrationOptions& o, const std::string& s) {
  if (o.progress) o.progress(s);
}

std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f%%", 100 * x);
  return b;
}

model::MlpShape grid_shape(int64_t hidden, int64_t ffn, int blocks) {
  strategy::ModelSpec m;
  m.kind = strategy::ModelKind::kMlp;
  m.hidden = hidden, m.ffn = ffn, m.layers = blocks, m.classes = 16;
  return train::mlp_shape(m);
}

// Step times of one shape; when they vary more than calibration accepts, as many again (a busy
// moment passes; a busy machine does not, and is flagged).
parlab::Spread measured_step(const model::MlpShape& shape, int64_t b, int reps) {
  auto times = measure::step_seconds(shape, b, reps);
  // A step of a millisecond or two is one scheduler slice: a quarter second of them at least.
  const double total = std::accumulate(times.begin(), times.end(), 0.0);
  if (total > 0 && total < 0.25) {
    const auto more = measure::step_seconds(shape, b, std::min(50, int(reps * (0.25 / total))));
    times.insert(times.end(), more.begin(), more.end());
  }
  if (parlab::spread_of(times).relative() > kMaxComputeSpread) {
    const auto more = measure::step_seconds(shape, b, reps);
    times.insert(times.end(), more.begin(), more.end());
  }
  return parlab::spread_of(times);
}

// The GEMM-rate grid: every microbatch with every width, on one core, the shapes measured
// round-robin (a burst of load then costs each shape one rep). Shapes whose steps vary too much
// or add up to under a quarter second (a step of a millisecond is one scheduler slice) are
// measured again, as many reps more.
RateGrid measure_grid(const CalibrationOptions& o) {
  // Microbatch 1 too: a pipeline of many one-sample microbatches runs its layers as
  // matrix-vector products, bound by memory and several times slower per FLOP; the planner
  // searches such plans and must price them at that rate.
  const std::vector<int64_t> microbatches =
      o.quick ? std::vector<int64_t>{1, 8, 32} : std::vector<int64_t>{1, 8, 32, 128};
  const std::vector<std::pair<int64_t, int64_t>> widths =
      o.quick ? std::vector<std::pair<int64_t, int64_t>>{{64, 256}, {256, 1024}}
              : std::vector<std::pair<int64_t, int64_t>>{{256, 1024}, {1024, 4096}};
  std::vector<std::pair<model::MlpShape, int64_t>> shapes;
  for (const auto& [h, f] : widths)
    for (int64_t b : microbatches) shapes.push_back({grid_shape(h, f, o.quick ? 1 : 2), b});
  const int reps = o.quick ? 3 : 5;
  std::vector<std::vector<double>> forward;
  auto times = measure::interleaved_step_seconds(shapes, reps, &forward);
  std::vector<size_t> again;
  std::vector<std::pair<model::MlpShape, int64_t>> again_shapes;
  int more = reps;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const double total = std::accumulate(times[s].begin(), times[s].end(), 0.0);
    if (parlab::spread_of(times[s]).relative() <= kMaxComputeSpread && total >= 0.25) continue;
    again.push_back(s), again_shapes.push_back(shapes[s]);
    if (total > 0) more = std::max(more, std::min(50, int(reps * (0.25 / total))));
  }
  if (!again.empty()) {
    double longest = 0;  // and no shape more than two seconds more
    for (size_t s : again) longest = std::max(longest, parlab::median(times[s]));
    if (longest > 0) more = std::max(reps, std::min(more, int(2.0 / longest)));
    std::vector<std::vector<double>> extra_forward;
    const auto extra = measure::interleaved_step_seconds(again_shapes, more, &extra_forward);
    for (size_t k = 0; k < again.size(); ++k) {
      times[again[k]].insert(times[again[k]].end(), extra[k].begin(), extra[k].end());
      forward[again[k]].insert(forward[again[k]].end(), extra_forward[k].begin(), extra_forward[k].end());
    }
  }
  RateGrid g;
  for (size_t s = 0; s < shapes.size(); ++s) {
    const auto spread = parlab::spread_of(times[s]);
    const auto& [shape, b] = shapes[s];
    const double flops = model::LabMlp::step_matmul_flops(shape, b);
    g.points.push_back(
        {b, shape.hidden, shape.ffn, flops / spread.median, spread.relative(), flops / 3 / parlab::median(forward[s])});
  }
  return g;
}

// precision=mixed's rate (bf16 matmul inputs, fp32 accumulation) at the model's shape, where
// this CPU has bf16 matmuls; without them the bf16 peak stays the fp32 one (mixed is refused).
void measure_mixed_compute(Calibration& c, const CalibrationOptions& o, const model::MlpShape& shape, int64_t b) {
  if (!compute::cpu::bf16_supported()) return;
  say(o, "compute: the same under precision=mixed (bf16 matmuls)");
  const auto mixed = parlab::spread_of(measure::mixed_step_seconds(shape, b, o.quick ? 3 : 7));
  c.flops_per_s_bf16 = model::LabMlp::step_matmul_flops(shape, b) / mixed.median;
  c.flops_bf16_spread = mixed.relative();
}

void measure_compute(Calibration& c, const CalibrationOptions& o, const strategy::ModelSpec& m) {
  const auto shape = train::mlp_shape(m);
  const int64_t b = m.default_microbatch;
  say(o, "compute: lab-mlp forward+backward, 1 process, " + std::to_string(m.hidden) + " wide at microbatch " +
             std::to_string(b));
  const auto alone = measured_step(shape, b, o.quick ? 3 : 7);
  c.flops_per_s = model::LabMlp::step_matmul_flops(shape, b) / alone.median;
  c.flops_spread = alone.relative();
  measure_mixed_compute(c, o, shape, b);
  say(o, "compute: the GEMM-rate grid (microbatch x width, 1 process)");
  c.grid = measure_grid(o);
  // 1..N processes at once (forked before any thread of ours exists).
  for (int k = 1; k <= o.nproc; ++k) {
    say(o, "compute: " + std::to_string(k) + " process" + (k > 1 ? "es" : "") + " at once");
    const auto each = measure::concurrent_step_flops(shape, b, k, o.quick ? 2 : 5);
    ConcurrencyPoint p;
    p.processes = k;
    p.flops_per_s_each = parlab::median(each);
    for (double f : each) p.aggregate_flops_per_s += f;
    c.concurrency.push_back(p);
  }
  const int cores = std::min(c.hardware_threads, o.nproc);
  for (auto& p : c.concurrency) p.predicted_aggregate = c.flops_per_s * std::min(p.processes, cores);
}

// The time-weighted spread of one rank count's judged sizes.
double weighted_spread(const std::vector<std::vector<double>>& per_size, const std::vector<double>& sizes) {
  double w = 0, sum = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!judged(sizes[i])) continue;
    const auto s = parlab::spread_of(per_size[i]);
    w += s.median, sum += s.median * s.relative();
  }
  return w > 0 ? sum / w : 0;
}

// ZeRO's reduce-scatter and all-gather (uneven, as shard boundaries cut them) at the sizes its
// buckets and layers have, each beside the all-reduce fit's prediction for it.
void measure_sharded(Calibration& c, const CalibrationOptions& o) {
  const std::vector<double> sizes = o.quick ? std::vector<double>{1e6} : std::vector<double>{1e6, 4e6, 16e6};
  for (const RingFit& f : c.ring_fits) {
    say(o, "communication: ZeRO's uneven reduce-scatter and all-gather, " + std::to_string(f.ranks) + " ranks");
    for (strategy::CollectiveOp op : {strategy::CollectiveOp::kReduceScatter, strategy::CollectiveOp::kAllGather}) {
      const auto t = measure::sharded_seconds(op, f.ranks, sizes, o.quick ? 2 : 5);
      for (size_t i = 0; i < sizes.size(); ++i) {
        const std::vector<int64_t> counts = measure::sharded_counts(f.ranks, sizes[i]);
        const double min_chunk = 4.0 * double(*std::min_element(counts.begin(), counts.end()));  // fp32
        c.sharded.push_back(
            {std::string(strategy::to_string(op)), f.ranks, sizes[i], t[i],
             strategy::ring_collective_seconds(op, sizes[i], f.ranks, f.latency_seconds, f.link_bytes_per_s), min_chunk,
             strategy::ring_collective_seconds(op, sizes[i], f.ranks, f.latency_seconds, f.link_bytes_per_s,
                                               min_chunk)});
      }
    }
  }
  c.sharded_fits = fit_sharded(c.sharded);
}

// Gloo's all-reduce over loopback TCP on 2 ranks, the path `--comm gloo` and ranks on different
// hosts take: fitted and shown beside the shared-memory fit that predictions on one host use.
void measure_gloo_reference(Calibration& c, const CalibrationOptions& o) {
  say(o, "communication: Gloo all-reduce on loopback (2 ranks), for reference");
  const std::vector<double> sizes =
      o.quick ? std::vector<double>{256e3, 4e6} : std::vector<double>{256e3, 1e6, 4e6, 16e6};
  const auto t = measure::allreduce_seconds(2, sizes, o.quick ? 2 : 3, comm::CommChoice::kGloo);
  std::vector<AllReducePoint> pts;
  for (size_t i = 0; i < sizes.size(); ++i) pts.push_back({2, std::floor(sizes[i] / 8) * 8, t[i], 0, 0, 1});
  c.gloo_fits = fit_rings(pts);
}

void measure_allreduce(Calibration& c, const CalibrationOptions& o, int first, int last) {
  const std::vector<double> sizes =
      o.quick ? std::vector<double>{256e3, 1e6, 16e6} : std::vector<double>{64e3, 256e3, 1e6, 4e6, 16e6, 64e6};
  const int repeats = o.quick ? 2 : 3, extra = o.quick ? 1 : 4;
  for (int n = first; n <= last; ++n) {
    say(o, "communication: all-reduce between ranks of this host (shared memory, as parlab train uses), " +
               std::to_string(n) + " ranks, " + std::to_string(repeats) + " repeats");
    std::vector<std::vector<double>> per_size(sizes.size());
    auto once = [&] {
      const auto t = measure::allreduce_seconds(n, sizes, o.quick ? 3 : 5);
      for (size_t i = 0; i < t.size(); ++i) per_size[i].push_back(t[i]);
    };
    for (int r = 0; r < repeats; ++r) once();
    // A noisy series is measured more before it is judged: one slow repeat of three moves the
    // quartiles a lot; of seven, little.
    for (int r = 0; r < extra && weighted_spread(per_size, sizes) > kMaxAllReduceSpread; ++r) {
      if (r == 0) say(o, "communication: " + std::to_string(n) + " ranks vary; measuring more repeats");
      once();
    }
    for (size_t i = 0; i < sizes.size(); ++i) {
      const auto s = parlab::spread_of(per_size[i]);
      // The bench moves whole fp32 elements, a multiple of n: the size it really moved.
      const double moved = std::floor(sizes[i] / 4 / n) * n * 4;
      c.allreduce.push_back({n, moved, s.median, s.relative(), 0, int(per_size[i].size())});
    }
  }
}

void measure_communication(Calibration& c, const CalibrationOptions& o) {
  measure_allreduce(c, o, 2, std::max(2, o.nproc));
  say(o, "communication: CPU time per byte of shared-memory traffic");
  c.comm_cpu_seconds_per_byte = measure::comm_cpu_seconds_per_byte(2, o.quick ? 4e6 : 64e6, o.quick ? 2 : 4);
  std::vector<AllReducePoint> big;
  for (const auto& p : c.allreduce)
    if (judged(p.bytes)) big.push_back(p);
  const auto [a, beta] = fit_alpha_beta(big);  // all rank counts at once: the TOML's link
  c.latency_seconds = a;
  c.link_bytes_per_s = 1.0 / beta;
  c.ring_fits = fit_rings(c.allreduce);
  std::vector<double> errors;
  for (const auto& p : c.allreduce)
    if (judged(p.bytes)) errors.push_back(std::fabs(p.fitted_seconds / p.seconds - 1));
  c.fit_max_relative_error = *std::max_element(errors.begin(), errors.end());
  c.fit_median_relative_error = parlab::median(errors);
  measure_sharded(c, o);
  measure_gloo_reference(c, o);
}

// The calibrated cluster: the preset's shape with measured figures. One "device" is one worker
// process; cores_per_node is what the workers really share.
strategy::ClusterSpec calibrated_cluster(const Calibration& c, int nproc) {
  strategy::ClusterSpec cl =
      strategy::parse_cluster_toml(std::string(*strategy::embedded_preset("clusters", "cpu-local")), "cpu-local");
  cl.description = "calibrated on " + c.machine + " at " + c.created_at;
  cl.cores_per_node = std::min(c.hardware_threads, nproc);
  cl.device.peak_flops_fp32 = c.flops_per_s;
  cl.device.peak_flops_bf16 = c.flops_per_s_bf16 > 0 ? c.flops_per_s_bf16 : c.flops_per_s;
  cl.device.gemm_efficiency = 1.0;
  cl.device.memory_bytes_per_s = c.optimizer_bytes_per_s;
  cl.device.gemm_rates = c.grid.device_points();
  cl.intra.kind = "loopback";
  cl.intra.bytes_per_s = c.link_bytes_per_s;
  cl.intra.latency_seconds = c.latency_seconds;
  apply_sharded_fits(cl.intra, c.sharded_fits, 0);
  cl.inter = cl.intra;
  cl.comm_cpu_seconds_per_byte = c.comm_cpu_seconds_per_byte;
  cl.calibrated = true;
  return cl;
}

Calibration calibrate_once(const CalibrationOptions& o, const strategy::ModelSpec& m) {
  Calibration c;
  c.machine = host_name();
  c.model = o.model;
  c.created_at = now_utc();
  c.hardware_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  c.load.loadavg_before = measure::loadavg_1min();
  const measure::CpuSample before = measure::sample_cpu();

  measure_compute(c, o, m);
  say(o, "memory: AdamW update and memcpy");
  const auto opt = parlab::spread_of(measure::optimizer_bytes_per_s(train::mlp_shape(m), o.quick ? 3 : 5));
  c.optimizer_bytes_per_s = opt.median;
  c.optimizer_spread = opt.relative();
  c.memcpy_bytes_per_s = measure::memcpy_bytes_per_s();
  measure_communication(c, o);

  c.load.others_busy_cores = measure::others_busy_cores(before, measure::sample_cpu());
  c.load.loadavg_after = measure::loadavg_1min();
  c.cluster = calibrated_cluster(c, o.nproc);
  c.warnings = calibration_warnings(c);
  return c;
}

}  // namespace

LinkFits measure_links(int ranks, bool quick) {
  CalibrationOptions o;
  o.quick = quick;
  Calibration c;
  measure_allreduce(c, o, ranks, ranks);
  c.ring_fits = fit_rings(c.allreduce);
  if (c.ring_fits.empty()) throw RuntimeError("measuring the links of " + std::to_string(ranks) + " ranks gave no fit");
  measure_sharded(c, o);
  LinkFits out{c.ring_fits.front(), {}};
  for (const ShardedFit& f : c.sharded_fits)
    if (f.ranks == ranks) out.sharded.push_back(f);
  return out;
}

std::vector<std::string> calibration_warnings(const Calibration& c) {
  std::vector<std::string> w;
  if (c.flops_spread > kMaxComputeSpread)
    w.push_back("compute step times vary +-" + pct(c.flops_spread) + " (limit " + pct(kMaxComputeSpread) + ")");
  for (const auto& p : c.grid.points)
    if (p.spread > kMaxComputeSpread)
      w.push_back("the rate grid's microbatch " + std::to_string(p.microbatch) + " x " + std::to_string(p.hidden) +
                  " step varies +-" + pct(p.spread) + " (limit " + pct(kMaxComputeSpread) + ")");
  for (const auto& p : c.concurrency)
    if (p.processes == c.cluster.cores_per_node && p.processes > 1 &&
        p.aggregate_flops_per_s < kMinSharedAggregate * p.predicted_aggregate)
      w.push_back(std::to_string(p.processes) + " processes at once reached " +
                  pct(p.aggregate_flops_per_s / p.predicted_aggregate) + " of " + std::to_string(p.processes) +
                  " cores' worth: the cores were not free");
  for (const auto& f : c.ring_fits) {
    const std::string on = " on " + std::to_string(f.ranks) + " ranks";
    if (f.weighted_spread > kMaxAllReduceSpread)
      w.push_back("all-reduce times" + on + " vary +-" + pct(f.weighted_spread) +
                  " (weighted by time over messages of " + units::format_bytes(kJudgedMessageBytes) +
                  " or more; limit " + pct(kMaxAllReduceSpread) + ")");
    if (f.weighted_error > kMaxFitError)
      w.push_back("the all-reduce fit" + on + " is off by " + pct(f.weighted_error) +
                  " (weighted by time over messages of " + units::format_bytes(kJudgedMessageBytes) +
                  " or more; limit " + pct(kMaxFitError) + ")");
  }
  if (c.load.others_busy_cores > kMaxOthersBusyCores) {
    char b[200];
    std::snprintf(
        b, sizeof b,
        "other processes used %.2f of %d cores while calibration ran (steal included; limit %.2f; load average %.1f)",
        c.load.others_busy_cores, c.hardware_threads, kMaxOthersBusyCores, c.load.loadavg_after);
    w.push_back(b);
  }
  return w;
}

Calibration calibrate(const CalibrationOptions& o) {
  if (o.nproc < 1 || o.nproc > 64) throw ConfigError("--nproc", std::to_string(o.nproc), "must be between 1 and 64");
  if (o.attempts < 1) throw ConfigError("attempts", std::to_string(o.attempts), "must be >= 1");
  const strategy::ModelSpec m = strategy::load_model(o.model);
  if (m.kind != strategy::ModelKind::kMlp) throw ConfigError("--model", o.model, "calibration runs the lab MLP");
  Calibration c;
  for (int attempt = 1; attempt <= o.attempts; ++attempt) {
    c = calibrate_once(o, m);
    c.attempts = attempt;
    if (c.trusted()) break;
    if (attempt < o.attempts) {
      say(o, "the calibration is not trustworthy (" + c.warnings.front() + "); measuring again");
    }
  }
  return c;
}

namespace {

void write_atomically(const fs::path& path, const std::string& text) {
  const fs::path tmp = path.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw RuntimeError("cannot write " + tmp.string());
  }
  fs::rename(tmp, path);
}

fs::path stored_calibration_path(const fs::path& results_dir) {
  return results_dir / "clusters" / "cpu-local.calibration.json";
}

}  // namespace

fs::path write_calibrated_cluster(const Calibration& c, const fs::path& results_dir) {
  const fs::path dir = results_dir / "clusters";
  fs::create_directories(dir);
  const fs::path path = dir / "cpu-local.toml";
  char line[1024];
  std::snprintf(
      line, sizeof line,
      "cpu-local, calibrated by `parlab calibrate` on %s at %s%s.\n"
      "One device = one worker process; %d cores shared (cores_per_node).\n"
      "Compute: lab-mlp forward+backward at %.1f GFLOP/s (+-%.0f%%) per process alone; the planner and\n"
      "the simulator price each plan's microbatch and width on the GEMM-rate grid (device.gemm_rate_*),\n"
      "experiments on a profile of each workload's own rank shape.\n"
      "Memory: the AdamW update moves %.2f GB/s (memcpy: %.2f GB/s).\n"
      "Links: all-reduce between ranks of this host (shared memory) fitted to a = %.1f us per step, B = %.2f GB/s\n"
      "(relative error of the fit: median %.0f%%, largest %.0f%%); %.2f ns of CPU per byte sent.\n"
      "Other processes used %.2f cores meanwhile.",
      c.machine.c_str(), c.created_at.c_str(), c.trusted() ? "" : " -- FLAGGED, not trusted", c.cluster.cores_per_node,
      c.flops_per_s / 1e9, 100 * c.flops_spread, c.optimizer_bytes_per_s / 1e9, c.memcpy_bytes_per_s / 1e9,
      c.latency_seconds * 1e6, c.link_bytes_per_s / 1e9, 100 * c.fit_median_relative_error,
      100 * c.fit_max_relative_error, c.comm_cpu_seconds_per_byte * 1e9, c.load.others_busy_cores);
  std::string text = strategy::cluster_to_toml(c.cluster, line);
  // Where and when, as top-level keys (before the first table).
  const size_t tables = text.find("\n[device]");
  text.insert(tables + 1, "machine = \"" + c.machine + "\"\ncalibrated_at = \"" + c.created_at + "\"\n");
  // The details first: a reader of the TOML finds its calibration beside it.
  write_atomically(stored_calibration_path(results_dir), c.to_json().dump(2) + "\n");
  write_atomically(path, text);
  return path;
}

std::optional<StoredCalibration> load_stored_calibration(const fs::path& results_dir) {
  std::ifstream in(stored_calibration_path(results_dir));
  if (!in) return std::nullopt;
  try {
    const auto j = nlohmann::json::parse(in);
    StoredCalibration s;
    s.machine = j.at("machine").get<std::string>();
    s.created_at = j.at("created_at").get<std::string>();
    s.trusted = j.at("trusted").get<bool>();
    s.comm = j.value("comm", std::string("gloo"));  // calibrations before shared memory measured Gloo
    s.warnings = j.at("warnings").get<std::vector<std::string>>();
    for (const auto& p : j.at("rate_grid"))
      s.grid.points.push_back({p.at("microbatch").get<int64_t>(), p.at("hidden").get<int64_t>(),
                               p.at("ffn").get<int64_t>(), p.at("flops_per_s").get<double>(),
                               p.at("spread").get<double>(), p.value("forward_flops_per_s", 0.0)});
    s.flops_per_s = j.value("flops_per_s", 0.0);
    s.model = j.value("model", std::string("lab-mlp"));
    for (const auto& f : j.value("sharded_fits", nlohmann::json::array()))
      s.sharded_fits.push_back({f.at("op").get<std::string>(), f.at("ranks").get<int>(),
                                f.at("latency_seconds").get<double>(), f.at("link_bytes_per_s").get<double>(),
                                f.at("weighted_error").get<double>()});
    for (const auto& f : j.value("ring_fits", nlohmann::json::array()))
      s.ring_fits.push_back({f.at("ranks").get<int>(), f.at("latency_seconds").get<double>(),
                             f.at("link_bytes_per_s").get<double>(), f.at("weighted_error").get<double>(),
                             f.at("weighted_spread").get<double>()});
    return s;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;  // unreadable: as if absent (calibrate again)
  }
}

bool calibrated_here(const fs::path& results_dir) {
  const fs::path path = results_dir / "clusters" / "cpu-local.toml";
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream text;
  text << in.rdbuf();
  try {
    const toml::table t = strategy::parse_toml(text.str(), path.string());
    if (!t["calibrated"].value_or(false) || t["machine"].value_or(std::string()) != host_name()) return false;
  } catch (const Error&) {
    return false;  // unreadable: calibrate again
  }
  const auto stored = load_stored_calibration(results_dir);
  return stored && stored->trusted && stored->machine == host_name() && stored->comm == "shm";
}

std::string why_recalibrate(const fs::path& results, db::ResultsStore* store) {
  const auto stored = load_stored_calibration(results);
  if (!calibrated_here(results)) {
    if (!stored) return "there is no calibration of this machine yet";
    if (!stored->trusted) return "the cached calibration was flagged: " + stored->warnings.front();
    if (stored->comm != "shm")
      return "the cached calibration measured Gloo's all-reduce; ranks of this host now talk through shared memory";
    return "the cached calibration was made on " + stored->machine;
  }
  if (!store) return "";
  // The newest measured 1-worker step made under this calibration, beside its prediction.
  std::optional<std::tuple<db::RunId, double, double>> last;
  for (const auto& run : store->list_runs(db::RunStatus::kCompleted)) {  // oldest first: later runs win
    if (run.kind != db::RunKind::kMeasured || run.world_size != 1 || run.cluster != "cpu-local") continue;
    const auto m = store->run_metrics(run.id);
    const auto meas = m.find("step_seconds"), pred = m.find("predicted_step_seconds");
    if (meas == m.end() || pred == m.end()) continue;
    for (const auto& [k, v] : store->run_params(run.id))
      if (k == "calibrated_at" && v == stored->created_at) last = std::tuple{run.id, meas->second, pred->second};
  }
  if (!last) return "";
  const auto [run, measured, predicted] = *last;
  const double error = predicted / measured - 1;
  if (std::fabs(error) <= kStaleCalibrationError) return "";
  char b[300];
  std::snprintf(
      b, sizeof b,
      "it is stale: the last measured 1-worker step (run %lld, %.1f ms) disagrees with its prediction (%.1f ms) "
      "by %+.1f%% (limit %.0f%%)",
      (long long)run, measured * 1e3, predicted * 1e3, 100 * error, 100 * kStaleCalibrationError);
  return b;
}

strategy::ClusterSpec cluster_for_workload(const strategy::ClusterSpec& cluster, const RateGrid& grid,
                                           int64_t microbatch, int64_t hidden, int64_t ffn) {
  if (!cluster.calibrated || cluster.name != "cpu-local" || grid.empty() || microbatch <= 0 || hidden <= 0 || ffn <= 0)
    return cluster;
  strategy::ClusterSpec c = cluster;
  // The grid is measured in fp32; mixed keeps the calibrated bf16 / fp32 ratio at the model's shape.
  const double bf16_ratio = cluster.device.peak_flops_bf16 / cluster.device.peak_flops_fp32;
  c.device.peak_flops_fp32 = grid.flops_per_s(microbatch, hidden, ffn);
  c.device.peak_flops_bf16 = c.device.peak_flops_fp32 * bf16_ratio;
  c.device.gemm_efficiency = 1.0;
  c.device.gemm_rates.clear();  // the rate is this workload's now
  return c;
}

std::string compute_probe_disagrees(const StoredCalibration& stored) {
  if (!(stored.flops_per_s > 0)) return "the cached calibration has no compute rate to check";
  strategy::ModelSpec m;
  try {
    m = strategy::load_model(stored.model);
  } catch (const Error&) {
    return "the cached calibration's model " + stored.model + " cannot be loaded";
  }
  if (m.kind != strategy::ModelKind::kMlp)
    return "the cached calibration's model " + stored.model + " is not the lab MLP";
  const auto shape = train::mlp_shape(m);
  const double now = model::LabMlp::step_matmul_flops(shape, m.default_microbatch) /
                     measured_step(shape, m.default_microbatch, 5).median;
  const double off = now / stored.flops_per_s - 1;
  if (std::fabs(off) <= kStaleCalibrationError) return "";
  char b[300];
  std::snprintf(
      b, sizeof b,
      "it is stale: one process runs %s's step at %.1f GFLOP/s now, the calibration of %s says %.1f (%+.0f%%, "
      "limit %.0f%%): the kernels or the machine changed, or the machine is busy",
      stored.model.c_str(), now / 1e9, stored.created_at.c_str(), stored.flops_per_s / 1e9, 100 * off,
      100 * kStaleCalibrationError);
  return b;
}

strategy::ClusterSpec cluster_for_world(const strategy::ClusterSpec& cluster, const std::vector<RingFit>& fits,
                                        int world, const std::vector<ShardedFit>& sharded) {
  if (!cluster.calibrated || cluster.name != "cpu-local" || fits.empty()) return cluster;
  const RingFit* use = &fits.front();
  for (const auto& f : fits)
    if (f.ranks <= world && f.ranks >= use->ranks) use = &f;
  strategy::ClusterSpec c = cluster;
  c.intra.latency_seconds = use->latency_seconds;
  c.intra.bytes_per_s = use->link_bytes_per_s;
  c.intra.protocol_efficiency = 1.0;
  apply_sharded_fits(c.intra, sharded, world);
  c.inter = c.intra;
  return c;
}

}  // namespace parlab::experiments
