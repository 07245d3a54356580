#pragma once
// How a prediction is set beside a measurement, written once for `compare` and the batch
// runner's tables: step times in ms, a measurement's spread as +-, a prediction's relative
// error, speedups. The measures themselves (speedup, efficiency, relative error, regret) have
// one home, strategy/measures.h.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "base/stats.h"
#include "strategy/measures.h"

namespace parlab::experiments {

using strategy::relative_error;
using strategy::speedup;

inline std::string format_ms(double seconds) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", seconds * 1e3);
  return b;
}

// "512.3 ms +-1.2%": the spread relative to the measurement, comparable with an error.
inline std::string format_ms_spread(double seconds, double spread_seconds) {
  char b[48];
  std::snprintf(b, sizeof b, "%.1f ms +-%.1f%%", seconds * 1e3, seconds > 0 ? 100 * spread_seconds / seconds : 0.0);
  return b;
}

// A relative error as the tables print it: "+4.2%".
inline std::string format_relative(double error) {
  char b[32];
  std::snprintf(b, sizeof b, "%+.1f%%", 100 * error);
  return b;
}

inline std::string format_error(double predicted, double measured) {
  return format_relative(relative_error(predicted, measured));
}

inline std::string format_speedup(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", x);
  return b;
}

// An error no larger than the measurement's own spread cannot be told from noise.
inline bool within_noise(double predicted, double measured, double spread_seconds) {
  return std::fabs(predicted - measured) <= spread_seconds;
}

// A prediction's error against a measurement, each given per round (one element for a single
// one): the median of the paired per-round errors (strategy::relative_error), "~" marking an error
// whose medians lie within the measurement's spread.
inline std::string format_paired_error(const std::vector<double>& predicted_rounds,
                                       const std::vector<double>& measured_rounds, double measured_spread) {
  const strategy::Measure e = relative_error(predicted_rounds, measured_rounds);
  if (e.n == 0) return "-";
  const bool noise = within_noise(parlab::median(predicted_rounds), parlab::median(measured_rounds), measured_spread);
  return format_relative(e.value) + (noise ? " ~" : "");
}

}  // namespace parlab::experiments
