#pragma once
// The timing loop the one-thread kernel benches share (bench_gemm, bench_optimizer): the
// seconds one call takes, the samples' median and range (base/stats.h's median, the tree's
// one), and the machine's load average printed beside every figure, since a shared machine's
// timings are not its own.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "base/stats.h"

namespace parlab::bench {

// Seconds of CPU time on `clock` (CLOCK_PROCESS_CPUTIME_ID: every thread of the process;
// CLOCK_THREAD_CPUTIME_ID: the calling thread).
inline double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Wall-clock seconds of one call of `f`.
inline double seconds_of(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Calls `f` until at least `min_seconds` passed (once at the least); the calls per second.
inline double calls_per_second(const std::function<void()>& f, double min_seconds) {
  int n = 0;
  double t = 0;
  do {
    t += seconds_of(f);
    ++n;
  } while (t < min_seconds);
  return n / t;
}

// Repeated samples: their median and their range.
struct Range {
  double median = 0, lo = 0, hi = 0;
};
inline Range range_of(const std::vector<double>& v) {
  if (v.empty()) return {};
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return {parlab::median(v), *lo, *hi};
}

// "/proc/loadavg"'s 1, 5 and 15 minute figures.
inline std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

}  // namespace parlab::bench
