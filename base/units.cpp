#include "base/units.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace parlab::units {
namespace {

// Three significant digits with a unit prefix chosen so the mantissa is in [1, 1000).
std::string scaled(double value, const char* const* prefixes, int n_prefixes, double step, const char* suffix) {
  if (std::isinf(value)) return std::string(value > 0 ? "inf " : "-inf ") + suffix;
  if (std::isnan(value)) return std::string("nan ") + suffix;
  int i = 0;
  double v = value;
  while (std::fabs(v) >= step && i + 1 < n_prefixes) {
    v /= step;
    ++i;
  }
  char buf[64];
  const double a = std::fabs(v);
  const char* fmt = a >= 100 || i == 0 ? "%.0f %s%s" : (a >= 10 ? "%.1f %s%s" : "%.2f %s%s");
  if (i == 0 && a < 100 && a != std::floor(a)) fmt = "%.2f %s%s";
  std::snprintf(buf, sizeof buf, fmt, v, prefixes[i], suffix);
  return buf;
}

}  // namespace

std::string format_bytes(double bytes) {
  static const char* const p[] = {"", "k", "M", "G", "T", "P"};
  return scaled(bytes, p, 6, 1000.0, "B");
}

std::string format_count(double count) {
  static const char* const p[] = {"", "k", "M", "B", "T"};
  std::string s = scaled(count, p, 5, 1000.0, "");
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  return s;
}

std::string format_flops_per_s(double flops_per_s) {
  static const char* const p[] = {"", "k", "M", "G", "T", "P", "E"};
  return scaled(flops_per_s, p, 7, 1000.0, "FLOP/s");
}

std::string format_bytes_per_s(double bytes_per_s) {
  static const char* const p[] = {"", "k", "M", "G", "T", "P"};
  return scaled(bytes_per_s, p, 6, 1000.0, "B/s");
}

std::string format_seconds(double seconds) {
  char buf[64];
  const double a = std::fabs(seconds);
  if (std::isinf(seconds)) return "inf s";
  if (a < 1e-9) return "0 s";
  if (a >= 1.0 || a == 0.0) {
    std::snprintf(buf, sizeof buf, a >= 100 ? "%.0f s" : (a >= 10 ? "%.1f s" : "%.2f s"), seconds);
  } else if (a >= 1e-3) {
    std::snprintf(buf, sizeof buf, "%.3g ms", seconds * 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.3g us", seconds * 1e6);
  }
  return buf;
}

}  // namespace parlab::units
