#include "strategy/scaling_lab.h"

#include <cmath>
#include <string>

#include "strategy/errors.h"

namespace parlab::strategy {

double scaling_step_seconds(const ScalingLabInputs& in, int w) {
  const double ring = w > 1 ? 2.0 * (w - 1) * in.latency_seconds + 2.0 * (w - 1) / w * in.bytes / in.link_bytes_per_s : 0.0;
  const double straggler = in.straggler_fraction * in.compute_seconds * std::log2(double(w));
  return in.compute_seconds + in.overhead_seconds + ring + straggler;
}

std::vector<ScalingRow> scaling_lab(const ScalingLabInputs& in) {
  auto positive = [](const char* field, double v) {
    if (!(v > 0) || !std::isfinite(v)) throw ConfigError(field, std::to_string(v), "must be a positive number");
  };
  auto non_negative = [](const char* field, double v) {
    if (!(v >= 0) || !std::isfinite(v)) throw ConfigError(field, std::to_string(v), "must be >= 0");
  };
  positive("--compute-ms", in.compute_seconds);
  positive("--link-gbps", in.link_bytes_per_s);
  non_negative("--bytes", in.bytes);
  non_negative("--latency-us", in.latency_seconds);
  non_negative("--overhead-ms", in.overhead_seconds);
  non_negative("--straggler", in.straggler_fraction);
  if (in.workers.empty()) throw ConfigError("--workers", "(empty)", "give worker counts, e.g. 1,2,4,8,16");
  for (int w : in.workers)
    if (w < 1) throw ConfigError("--workers", std::to_string(w), "worker counts must be >= 1");
  const double t1 = scaling_step_seconds(in, 1);
  std::vector<ScalingRow> rows;
  for (int w : in.workers) {
    ScalingRow r;
    r.workers = w;
    r.step_seconds = scaling_step_seconds(in, w);
    r.comm_seconds = w > 1 ? 2.0 * (w - 1) * in.latency_seconds + 2.0 * (w - 1) / w * in.bytes / in.link_bytes_per_s : 0;
    r.straggler_seconds = in.straggler_fraction * in.compute_seconds * std::log2(double(w));
    r.speedup = w * t1 / r.step_seconds;
    r.efficiency = t1 / r.step_seconds;
    r.samples_per_s_relative = r.speedup;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace parlab::strategy
