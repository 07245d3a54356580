#include "strategy/cluster_spec.h"

#include <cmath>
#include <set>
#include <tuple>

#include "base/errors.h"
#include "strategy/plan.h"

namespace parlab::strategy {

double ClusterSpec::device_flops_per_s(Precision precision) const {
  const double peak = precision == Precision::kFp32 ? device.peak_flops_fp32 : device.peak_flops_bf16;
  return peak * device.gemm_efficiency;
}

double gemm_rate_at(const std::vector<GemmRatePoint>& grid, int64_t microbatch, int64_t hidden, int64_t ffn) {
  if (grid.empty()) throw ConfigError("device.gemm_rates", "(empty)", "a rate grid needs at least one point");
  auto width = [](double h, double f) { return std::sqrt(h * f); };
  std::set<double> bs, ws;
  for (const auto& p : grid) bs.insert(double(p.microbatch)), ws.insert(width(double(p.hidden), double(p.ffn)));
  auto rate_at = [&](double b, double w) {
    for (const auto& p : grid)
      if (double(p.microbatch) == b && width(double(p.hidden), double(p.ffn)) == w) return p.flops_per_s;
    throw ConfigError("device.gemm_rates", std::to_string(grid.size()) + " points",
                      "must be a full grid: every microbatch with every width");
  };
  // The two grid values around x (both the nearest edge outside the grid) and x's weight
  // between them, in log space.
  auto bracket = [](const std::set<double>& axis, double x) {
    auto hi = axis.lower_bound(x);
    if (hi == axis.end()) return std::tuple{*axis.rbegin(), *axis.rbegin(), 0.0};
    if (hi == axis.begin() || *hi == x) return std::tuple{*hi, *hi, 0.0};
    auto lo = std::prev(hi);
    return std::tuple{*lo, *hi, std::log(x / *lo) / std::log(*hi / *lo)};
  };
  const auto [b0, b1, tb] = bracket(bs, double(microbatch));
  const auto [w0, w1, tw] = bracket(ws, width(double(hidden), double(ffn)));
  const double l00 = std::log(rate_at(b0, w0)), l01 = std::log(rate_at(b0, w1));
  const double l10 = std::log(rate_at(b1, w0)), l11 = std::log(rate_at(b1, w1));
  return std::exp((1 - tb) * ((1 - tw) * l00 + tw * l01) + tb * ((1 - tw) * l10 + tw * l11));
}

ClusterSpec with_world(const ClusterSpec& c, int world) {
  if (world <= 0) throw ConfigError("world", std::to_string(world), "must be a positive number of devices");
  ClusterSpec out = c;
  if (world <= c.devices_per_node) {
    out.nodes = 1;
    out.devices_per_node = world;
    return out;
  }
  if (world % c.devices_per_node != 0)
    throw ConfigError("world", std::to_string(world),
                      "must be at most devices_per_node (" + std::to_string(c.devices_per_node) +
                          ") or a multiple of it for cluster " + c.name);
  out.nodes = world / c.devices_per_node;
  return out;
}

void validate(const ClusterSpec& c, const std::string& where) {
  auto positive = [&](const std::string& field, double v) {
    if (!(v > 0)) throw ConfigError(where + "." + field, std::to_string(v), "must be positive");
  };
  if (c.nodes <= 0) throw ConfigError(where + ".nodes", std::to_string(c.nodes), "must be a positive integer");
  if (c.devices_per_node <= 0)
    throw ConfigError(where + ".devices_per_node", std::to_string(c.devices_per_node), "must be a positive integer");
  if (c.nics_per_node <= 0)
    throw ConfigError(where + ".nics_per_node", std::to_string(c.nics_per_node), "must be a positive integer");
  if (c.comm_cpu_seconds_per_byte < 0 || std::isnan(c.comm_cpu_seconds_per_byte))
    throw ConfigError(where + ".comm_cpu_ns_per_byte", std::to_string(c.comm_cpu_seconds_per_byte * 1e9),
                      "must be >= 0");
  if (c.cores_per_node < 0)
    throw ConfigError(where + ".cores_per_node", std::to_string(c.cores_per_node),
                      "must be >= 0 (0: one device per host)");
  positive("device.memory", c.device.memory_bytes);
  positive("device.peak_flops_fp32", c.device.peak_flops_fp32);
  positive("device.peak_flops_bf16", c.device.peak_flops_bf16);
  positive("device.memory_bandwidth", c.device.memory_bytes_per_s);
  if (!(c.device.gemm_efficiency > 0 && c.device.gemm_efficiency <= 1))
    throw ConfigError(where + ".device.gemm_efficiency", std::to_string(c.device.gemm_efficiency), "must be in (0, 1]");
  if (!(c.device.memory_efficiency > 0 && c.device.memory_efficiency <= 1))
    throw ConfigError(where + ".device.memory_efficiency", std::to_string(c.device.memory_efficiency),
                      "must be in (0, 1]");
  if (!c.device.gemm_rates.empty()) {
    for (const auto& p : c.device.gemm_rates)
      if (p.microbatch <= 0 || p.hidden <= 0 || p.ffn <= 0 || !(p.flops_per_s > 0) || std::isinf(p.flops_per_s) ||
          !(p.forward_flops_per_s >= 0) || std::isinf(p.forward_flops_per_s))
        throw ConfigError(
            where + ".device.gemm_rate",
            std::to_string(p.microbatch) + " x " + std::to_string(p.hidden) + " x " + std::to_string(p.ffn),
            "every point needs a positive microbatch, hidden, ffn and rate");
    // A full grid: each (microbatch, width) once, and as many points as microbatches x widths.
    std::set<int64_t> bs;
    std::set<double> ws;
    std::set<std::tuple<int64_t, double>> seen;
    for (const auto& p : c.device.gemm_rates) {
      const double w = std::sqrt(double(p.hidden) * double(p.ffn));
      bs.insert(p.microbatch), ws.insert(w);
      if (!seen.insert({p.microbatch, w}).second)
        throw ConfigError(where + ".device.gemm_rate", std::to_string(p.microbatch) + " x " + std::to_string(p.hidden),
                          "each (microbatch, width) once");
    }
    if (seen.size() != bs.size() * ws.size())
      throw ConfigError(where + ".device.gemm_rate", std::to_string(seen.size()) + " points",
                        "must be a full grid: every microbatch with every width (" + std::to_string(bs.size()) + " x " +
                            std::to_string(ws.size()) + ")");
  }
  for (const auto& [name, link] : {std::pair<const char*, const LinkSpec&>{"intra", c.intra}, {"inter", c.inter}})
    if (!(link.protocol_efficiency > 0 && link.protocol_efficiency <= 1))
      throw ConfigError(where + "." + name + ".protocol_efficiency", std::to_string(link.protocol_efficiency),
                        "must be in (0, 1]");
  positive("intra.bandwidth", c.intra.bytes_per_s);
  positive("inter.bandwidth", c.inter.bytes_per_s);
  if (c.intra.latency_seconds < 0 || std::isnan(c.intra.latency_seconds))
    throw ConfigError(where + ".intra.latency", std::to_string(c.intra.latency_seconds), "must be >= 0");
  if (c.inter.latency_seconds < 0 || std::isnan(c.inter.latency_seconds))
    throw ConfigError(where + ".inter.latency", std::to_string(c.inter.latency_seconds), "must be >= 0");
}

}  // namespace parlab::strategy
