// bench_optimizer: the AdamW update of lab-mlp's 67 M parameters (one streaming pass: reads
// p, g, m, v and writes p, m, v, 28 bytes per element) against memcpy on this machine, both on
// one thread. Prints GB/s of each (median [min..max] over --repeats, alternating) and the ratio.
// Goal (printed, never asserted): AdamW moves its 28 B/element at >= 0.8 of memcpy's
// read+write bandwidth (memcpy of S bytes moves 2 S). calibrate measures the same two figures
// (optimizer_bytes_per_s, memcpy_bytes_per_s) with the same optimizer code.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "runtime/train/optimizer.h"

using parlab::bench::Range;
using parlab::bench::range_of;
using parlab::bench::seconds_of;

int main(int argc, char** argv) {
  CLI::App app{"bench_optimizer: fused AdamW pass vs memcpy bandwidth, one thread"};
  int64_t n = 67'186'704;  // lab-mlp's parameter count
  int repeats = 7;
  app.add_option("--params", n, "elements updated per step (default: lab-mlp)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32));
  app.add_option("--repeats", repeats, "timed steps (median and spread)")->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);

  std::vector<float> p(n, 0.5f), g(n, 1e-3f);
  auto opt = parlab::train::make_optimizer(parlab::train::AdamWConfig{}, {0, n});
  const size_t bytes = static_cast<size_t>(n) * 16;  // memcpy as large as p + g + m + v
  std::vector<char> src(bytes, 1), dst(bytes, 2);
  opt->step(p, g);  // first touch of the state buffers
  std::memcpy(dst.data(), src.data(), bytes);
  std::vector<double> adam, copy;
  for (int r = 0; r < repeats; ++r) {
    adam.push_back(28.0 * double(n) / seconds_of([&] { opt->step(p, g); }) / 1e9);
    copy.push_back(2.0 * double(bytes) / seconds_of([&] { std::memcpy(dst.data(), src.data(), bytes); }) / 1e9);
  }
  const Range a = range_of(adam), c = range_of(copy);
  std::printf("bench_optimizer: %lld elements, %d runs, load %s\n", static_cast<long long>(n), repeats,
              parlab::bench::load_average().c_str());
  std::printf("  AdamW pass  %6.2f GB/s [%.2f..%.2f]  (28 B/element; %.1f ms per step)\n", a.median, a.lo, a.hi,
              28.0 * double(n) / a.median / 1e6);
  std::printf("  memcpy      %6.2f GB/s [%.2f..%.2f]  (read + write)\n", c.median, c.lo, c.hi);
  std::printf("  ratio       %6.2f  (goal >= 0.80)\n", a.median / c.median);
  return 0;
}
