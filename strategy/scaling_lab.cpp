#include "strategy/scaling_lab.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "strategy/collectives.h"
#include "base/errors.h"
#include "base/units.h"

namespace parlab::strategy {
namespace {

// The gradient all-reduce of one step: a ring over the w workers.
double scaling_comm_seconds(const ScalingLabInputs& in, int w) {
  return ring_collective_seconds(CollectiveOp::kAllReduce, in.bytes, w, in.latency_seconds, in.link_bytes_per_s);
}

double scaling_straggler_seconds(const ScalingLabInputs& in, int w) {
  return in.straggler_fraction * in.compute_seconds * std::log2(double(w));
}

}  // namespace

double scaling_step_seconds(const ScalingLabInputs& in, int w) {
  return in.compute_seconds + in.overhead_seconds + scaling_comm_seconds(in, w) + scaling_straggler_seconds(in, w);
}

std::vector<std::string> explain_scaling(const ScalingLabInputs& in, int w) {
  // Milliseconds to four significant digits: the chapter's table reads 120.3 and 137.8 ms.
  auto format_seconds = [](double seconds) {
    char b[32];
    std::snprintf(b, sizeof b, "%.4g ms", seconds * 1e3);
    return std::string(b);
  };
  auto num = [](const char* f, double v) {
    char b[64];
    std::snprintf(b, sizeof b, f, v);
    return std::string(b);
  };
  const std::string W = std::to_string(w);
  const std::string fixed = "c " + format_seconds(in.compute_seconds) + " + o " + format_seconds(in.overhead_seconds);
  const double t1 = scaling_step_seconds(in, 1), tw = scaling_step_seconds(in, w);
  std::vector<std::string> lines;
  lines.push_back("t_1 = " + fixed + " = " + format_seconds(t1));
  std::string line = "t_" + W + " = " + fixed;
  if (w > 1) {
    line += " + ring 2(" + W + "-1) x " + format_seconds(in.latency_seconds) + " + 2(" + W + "-1)/" + W + " x " +
            units::format_bytes(in.bytes) + " / " + units::format_bytes_per_s(in.link_bytes_per_s) + " = " +
            format_seconds(scaling_comm_seconds(in, w)) + " + stragglers " + num("%g", in.straggler_fraction) + " x " +
            format_seconds(in.compute_seconds) + " x log2 " + W + " = " +
            format_seconds(scaling_straggler_seconds(in, w));
  }
  lines.push_back(line + ", t_" + W + " = " + format_seconds(tw));
  lines.push_back("speedup = " + W + " x t_1 / t_" + W + " = " + num("%.2fx", w * t1 / tw) + ", efficiency = t_1 / t_" +
                  W + " = " + num("%.3f", t1 / tw));
  return lines;
}

std::vector<ScalingRow> scaling_lab(const ScalingLabInputs& in) {
  // Fields in SI units, named as in ScalingLabInputs (front ends check their own flags first,
  // in the units their users typed).
  auto text = [](double v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  auto positive = [&](const char* field, double v) {
    if (!(v > 0) || !std::isfinite(v)) throw ConfigError(field, text(v), "must be a positive number");
  };
  auto non_negative = [&](const char* field, double v) {
    if (!(v >= 0) || !std::isfinite(v)) throw ConfigError(field, text(v), "must be >= 0");
  };
  positive("scaling.compute_seconds", in.compute_seconds);
  positive("scaling.link_bytes_per_s", in.link_bytes_per_s);
  non_negative("scaling.bytes", in.bytes);
  non_negative("scaling.latency_seconds", in.latency_seconds);
  non_negative("scaling.overhead_seconds", in.overhead_seconds);
  non_negative("scaling.straggler_fraction", in.straggler_fraction);
  if (in.workers.empty()) throw ConfigError("scaling.workers", "(empty)", "give worker counts, e.g. 1,2,4,8,16");
  for (int w : in.workers)
    if (w < 1) throw ConfigError("scaling.workers", std::to_string(w), "worker counts must be >= 1");
  const double t1 = scaling_step_seconds(in, 1);
  std::vector<ScalingRow> rows;
  for (int w : in.workers) {
    ScalingRow r;
    r.workers = w;
    r.step_seconds = scaling_step_seconds(in, w);
    r.comm_seconds = scaling_comm_seconds(in, w);
    r.straggler_seconds = scaling_straggler_seconds(in, w);
    r.speedup = w * t1 / r.step_seconds;
    r.efficiency = t1 / r.step_seconds;
    r.samples_per_s_relative = r.speedup;
    r.global_batch = r.workers;
    rows.push_back(r);
  }
  return rows;
}

}  // namespace parlab::strategy
