#pragma once
// Order statistics of repeated measurements, defined once for the tree: the calibration, the
// measured step times, the straggler detector, the collective bench, the rubric and the benches.
// A machine shared with other jobs gives timings with a long upper tail, so the lab reports
// medians and the spread of the middle half, never a mean or a single sample.
#include <algorithm>
#include <cmath>
#include <vector>

namespace parlab {

// The q-quantile (0 <= q <= 1) with linear interpolation between order statistics (type 7, the
// default of R and NumPy); 0 for no values.
inline double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(q, 0.0, 1.0) * double(v.size() - 1);
  const size_t lo = size_t(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (pos - double(lo)) * (v[hi] - v[lo]);
}

// The middle value; the mean of the two middle values for an even count; 0 for no values.
inline double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

// A measurement repeated n times: its median and the half-width of its interquartile range
// ("+-"), which a single slow sample (another job took the core) barely moves.
struct Spread {
  double median = 0;
  double half_iqr = 0;  // (q75 - q25) / 2, same unit as the samples
  int n = 0;
  double relative() const { return median > 0 ? half_iqr / median : 0; }  // +- as a fraction
};

inline Spread spread_of(const std::vector<double>& v) {
  return {median(v), (quantile(v, 0.75) - quantile(v, 0.25)) / 2, int(v.size())};
}

}  // namespace parlab
