// parlab scaling: the all-reduce scaling lab. Add workers to a data-parallel job and see what
// is delivered after ring communication and stragglers (strategy/scaling_lab.h has the model,
// its symbols and a hand-checked two-worker example).
#include <cerrno>
#include <cmath>
#include <fmt/core.h>

#include <sstream>

#include "cli/common.h"
#include "base/errors.h"
#include "strategy/scaling_lab.h"
#include "base/units.h"

namespace parlab::cli {
namespace {

struct ScalingOptions {
  double compute_ms = 120;
  double overhead_ms = 0.3;
  std::string bytes = "2MB";
  double link_gbps = 15;  // GB/s
  double latency_us = 183;
  double straggler = 0.0408;
  std::string workers = "1,2,4,8,16";
  bool json = false;
};

constexpr long kMaxWorkers = 1 << 20;

std::vector<int> parse_workers(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || end != item.c_str() + item.size())
      throw ConfigError("--workers", item, "must be a comma-separated list of integers");
    // Checked before the narrowing to int: 99999999999 would wrap to 1215752191.
    if (errno == ERANGE || v < 1 || v > kMaxWorkers)
      throw ConfigError("--workers", item, "each count must be an integer from 1 to " + std::to_string(kMaxWorkers));
    out.push_back(int(v));
  }
  return out;
}

}  // namespace

// "2MB", "25MiB", "1.5e6", "64K": decimal (kB, MB, GB) or binary (KiB, MiB, GiB) suffixes; K,
// M, G alone are binary, as nccl-tests reads them.
double parse_bytes(const std::string& field, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) throw ConfigError(field, text, "must be a size such as 64K, 25MB, 1GiB or 1e6");
  std::string unit(end);
  double scale = 1;
  if (unit == "" || unit == "B")
    scale = 1;
  else if (unit == "kB" || unit == "KB")
    scale = 1e3;
  else if (unit == "MB")
    scale = 1e6;
  else if (unit == "GB")
    scale = 1e9;
  else if (unit == "K" || unit == "KiB")
    scale = 1024.0;
  else if (unit == "M" || unit == "MiB")
    scale = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    scale = 1024.0 * 1024 * 1024;
  else
    throw ConfigError(field, text, "unknown unit '" + unit + "'; use B, kB, MB, GB, K/KiB, M/MiB, G/GiB");
  if (!(v >= 0)) throw ConfigError(field, text, "must be >= 0");
  // Far beyond any message or gradient, and low enough that times and bandwidths stay finite.
  constexpr double kMostBytes = 1125899906842624.0;  // 1 PiB
  if (!(v * scale <= kMostBytes)) throw ConfigError(field, text, "must be at most 1 PiB");
  return v * scale;
}

void add_scaling_command(CLI::App& app) {
  auto o = std::make_shared<ScalingOptions>();
  CLI::App* cmd = app.add_subcommand(
      "scaling",
      "The all-reduce scaling lab: step time, speedup W t1/tW and efficiency t1/tW of a data-parallel\n"
      "job as workers are added, with ring all-reduce and a logarithmic straggler penalty:\n"
      "  t_W = c + o + 2(W-1) a + 2(W-1)/W S/B + s c log2 W\n"
      "The defaults reproduce the seed's table (120 ms of local compute).");
  cmd->add_option("--compute-ms", o->compute_ms, "Local compute per step c, in ms")->capture_default_str();
  cmd->add_option("--overhead-ms", o->overhead_ms, "Fixed per-step overhead o, in ms")->capture_default_str();
  cmd->add_option("--bytes", o->bytes, "Gradient bytes all-reduced per step S (e.g. 2MB, 25MiB)")
      ->capture_default_str();
  cmd->add_option("--link", o->link_gbps, "Link bandwidth B in GB/s")->capture_default_str();
  cmd->add_option("--latency-us", o->latency_us, "Per-hop latency a in microseconds")->capture_default_str();
  cmd->add_option("--straggler", o->straggler, "Straggler penalty s per doubling of workers, fraction of c")
      ->capture_default_str();
  cmd->add_option("--workers", o->workers, "Worker counts W, comma-separated")->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->callback([o] {
    // Checked here in the units the user typed; the lab checks its SI inputs again.
    // At most 1e9 of each unit (11 days of compute, 1e9 GB/s): beyond that the table is noise.
    auto check = [](const char* flag, double v, bool zero_ok) {
      if (!std::isfinite(v) || v < 0 || (!zero_ok && v == 0) || v > 1e9)
        throw ConfigError(flag, fmt::format("{}", v),
                          std::string(zero_ok ? "must be >= 0" : "must be a positive number") + " and at most 1e9");
    };
    check("--compute-ms", o->compute_ms, false);
    check("--overhead-ms", o->overhead_ms, true);
    check("--link", o->link_gbps, false);
    check("--latency-us", o->latency_us, true);
    check("--straggler", o->straggler, true);
    strategy::ScalingLabInputs in;
    in.compute_seconds = o->compute_ms / 1e3;
    in.overhead_seconds = o->overhead_ms / 1e3;
    in.bytes = parse_bytes("--bytes", o->bytes);
    in.link_bytes_per_s = o->link_gbps * units::kGB;
    in.latency_seconds = o->latency_us * 1e-6;
    in.straggler_fraction = o->straggler;
    in.workers = parse_workers(o->workers);
    const auto rows = strategy::scaling_lab(in);
    if (o->json) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& r : rows)
        j.push_back({{"workers", r.workers},
                     {"step_seconds", r.step_seconds},
                     {"comm_seconds", r.comm_seconds},
                     {"straggler_seconds", r.straggler_seconds},
                     {"speedup", r.speedup},
                     {"efficiency", r.efficiency}});
      print_json({{"inputs",
                   {{"compute_seconds", in.compute_seconds},
                    {"overhead_seconds", in.overhead_seconds},
                    {"bytes", in.bytes},
                    {"link_bytes_per_s", in.link_bytes_per_s},
                    {"latency_seconds", in.latency_seconds},
                    {"straggler_fraction", in.straggler_fraction}}},
                  {"rows", j}});
      return;
    }
    Table t({"workers", "step", "all-reduce", "straggler", "speedup", "efficiency", ""});
    for (const auto& r : rows) {
      const int bar = int(r.efficiency * 40 + 0.5);
      t.add({std::to_string(r.workers), fmt::format("{:.1f} ms", r.step_seconds * 1e3),
             fmt::format("{:.2f} ms", r.comm_seconds * 1e3), fmt::format("{:.2f} ms", r.straggler_seconds * 1e3),
             fmt::format("{:.1f}x", r.speedup), fmt::format("{:.2f}", r.efficiency), std::string(bar, '#')});
    }
    fmt::print(
        "Data-parallel scaling: c = {} ms compute, S = {} over {} GB/s links ({} us per hop), straggler {:.1f}% of c "
        "per doubling\n\n{}",
        o->compute_ms, units::format_bytes(in.bytes), o->link_gbps, o->latency_us, 100 * o->straggler, t.str());
    fmt::print(
        "\nspeedup = W t1 / tW; efficiency = throughput_W / (W throughput_1) = t1 / tW. Stop adding workers when\n"
        "the next doubling's speedup gain is worth less than the devices it takes.\n");
  });
}

}  // namespace parlab::cli
