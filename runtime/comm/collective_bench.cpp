#include "runtime/comm/collective_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "runtime/comm/shm/shm_communicator.h"
#include "base/stats.h"
#include "base/units.h"

namespace parlab::comm {
namespace {

// What rank r puts in element i of the whole tensor: small integers, so every sum over ranks is
// exact in fp32 and a result can be checked element by element (nccl-tests fills and checks the
// same way). The rank term makes a collective that drops or repeats a rank's data visible.
float fill_value(int rank, std::size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 7)); }

// The sum over n ranks of fill_value(r, i).
float sum_value(int n, std::size_t i) { return static_cast<float>(n * (n + 1) / 2 + n * static_cast<int>(i % 7)); }

// Runs `op` on buffers sized for `elements` (S / 4): fill() writes this rank's inputs, run()
// is the collective alone (what is timed), wrong() counts the output elements that differ from
// what the collective must produce.
class BenchBuffers {
 public:
  // The buffers are the group's registered memory (Communicator::allocate_registered), as the
  // trainer's gradients are: on shared memory an all-reduce then reads the peers' data in place.
  BenchBuffers(Communicator& comm, strategy::CollectiveOp op, std::size_t elements, int rank, int n)
      : op_(op), rank_(rank), n_(n), piece_(elements / static_cast<std::size_t>(n)) {
    switch (op) {
      case strategy::CollectiveOp::kAllReduce:
      case strategy::CollectiveOp::kBroadcast:
        a_ = comm.allocate_registered(elements);
        break;
      case strategy::CollectiveOp::kReduceScatter:
        a_ = comm.allocate_registered(elements);
        b_ = comm.allocate_registered(piece_);
        break;
      case strategy::CollectiveOp::kAllGather:
        a_ = comm.allocate_registered(piece_);
        b_ = comm.allocate_registered(elements);
        break;
    }
  }

  // This rank's inputs (all-reduce and broadcast work in place: their input is the output).
  void fill() {
    const std::size_t offset = op_ == strategy::CollectiveOp::kAllGather ? rank_index() * piece_ : 0;
    for (std::size_t i = 0; i < a_.data.size(); ++i) a_.data[i] = fill_value(rank_, offset + i);
    std::fill(b_.data.begin(), b_.data.end(), -1.0f);
  }

  void run(Communicator& comm, const CollectiveOptions& o) {
    std::shared_ptr<Work> w;
    switch (op_) {
      case strategy::CollectiveOp::kAllReduce:
        w = comm.all_reduce(a_.data, o);
        break;
      case strategy::CollectiveOp::kBroadcast:
        w = comm.broadcast(a_.data, 0, o);
        break;
      case strategy::CollectiveOp::kReduceScatter:
        w = comm.reduce_scatter(a_.data, b_.data, o);
        break;
      case strategy::CollectiveOp::kAllGather:
        w = comm.all_gather(a_.data, b_.data, o);
        break;
    }
    w->wait();
  }

  int64_t wrong() const {
    int64_t bad = 0;
    auto count = [&](std::span<const float> got, auto expected) {
      for (std::size_t i = 0; i < got.size(); ++i) bad += got[i] == expected(i) ? 0 : 1;
    };
    switch (op_) {
      case strategy::CollectiveOp::kAllReduce:
        count(a_.data, [&](std::size_t i) { return sum_value(n_, i); });
        break;
      case strategy::CollectiveOp::kBroadcast:
        count(a_.data, [&](std::size_t i) { return fill_value(0, i); });
        break;
      case strategy::CollectiveOp::kReduceScatter:
        count(b_.data, [&](std::size_t i) { return sum_value(n_, rank_index() * piece_ + i); });
        break;
      case strategy::CollectiveOp::kAllGather:
        count(b_.data, [&](std::size_t i) { return fill_value(static_cast<int>(i / piece_), i); });
        break;
    }
    return bad;
  }

 private:
  std::size_t rank_index() const { return static_cast<std::size_t>(rank_); }
  strategy::CollectiveOp op_;
  int rank_, n_;
  std::size_t piece_;
  RegisteredBuffer a_, b_;  // the input and output (or the in-place buffer and none)
};

using parlab::median;

}  // namespace

std::vector<CollectiveBenchRow> run_collective_bench(Communicator& comm, strategy::CollectiveOp op,
                                                     const std::vector<double>& sizes_bytes, int warmup, int iters,
                                                     const CollectiveOptions& options) {
  if (iters < 1) throw ConfigError("iters", std::to_string(iters), "must be at least 1");
  if (warmup < 0) throw ConfigError("warmup", std::to_string(warmup), "must be >= 0");
  const int n = comm.size();
  std::vector<CollectiveBenchRow> rows;
  for (double requested : sizes_bytes) {
    // Whole elements, and a multiple of n so reduce-scatter/all-gather pieces are equal.
    const auto elements_total = static_cast<std::size_t>(requested / sizeof(float));
    const std::size_t elements = elements_total - elements_total % static_cast<std::size_t>(n);
    if (elements == 0) {
      throw ConfigError("sizes", units::format_bytes(requested),
                        "must hold at least one fp32 element per rank (" + std::to_string(n * sizeof(float)) +
                            " B on " + std::to_string(n) + " ranks)");
    }
    BenchBuffers buffers(comm, op, elements, comm.rank(), n);
    // Checked once, on its own: filled, run, compared element by element.
    buffers.fill();
    comm.barrier(options)->wait();
    buffers.run(comm, options);
    const int64_t wrong = buffers.wrong();
    // Then timed back to back on the same buffers, as nccl-tests times (in-place sums keep
    // growing, exactly, which no longer matters). Refilling between runs let a rank that waited
    // for the refill fall asleep in the barrier, and its wake-up (hundreds of microseconds on a
    // loaded VM) landed in the next op's time: a 4 MiB shared-memory all-reduce measured 2.5-5 ms
    // where back to back it takes about 1.
    for (int i = 0; i < warmup; ++i) buffers.run(comm, options);
    std::vector<float> mine(static_cast<std::size_t>(iters));
    comm.barrier(options)->wait();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      buffers.run(comm, options);
      const auto t1 = std::chrono::steady_clock::now();
      mine[static_cast<std::size_t>(i)] = std::chrono::duration<float>(t1 - t0).count();
      t0 = t1;
    }
    // Every rank reports its wrong elements; the row counts them over all ranks.
    std::vector<float> wrong_mine = {static_cast<float>(wrong)}, wrong_all(static_cast<std::size_t>(n));
    comm.all_gather(wrong_mine, wrong_all, options)->wait();
    // A collective is done when its slowest rank is: take the max over ranks per iteration.
    std::vector<float> all(mine.size() * static_cast<std::size_t>(n));
    comm.all_gather(mine, all, options)->wait();
    std::vector<double> slowest(mine.size(), 0.0);
    for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
      for (std::size_t i = 0; i < mine.size(); ++i) {
        slowest[i] = std::max(slowest[i], static_cast<double>(all[r * mine.size() + i]));
      }
    }
    CollectiveBenchRow row;
    row.bytes = static_cast<double>(elements * sizeof(float));
    row.seconds = median(slowest);
    for (float w : wrong_all) row.wrong += static_cast<int64_t>(w);
    row.algbw_bytes_per_s = strategy::algbw_bytes_per_s(row.bytes, row.seconds);
    row.busbw_bytes_per_s = strategy::busbw_bytes_per_s(op, n, row.bytes, row.seconds);
    rows.push_back(row);
  }
  return rows;
}

namespace {

// "256M" -> 268435456. Throws ConfigError naming `field` and the whole `text`.
double parse_size(std::string_view s, const std::string& field, std::string_view text) {
  auto fail = [&]() -> double {
    throw ConfigError(field, "\"" + std::string(text) + "\"",
                      "sizes like 1K, 64M, 1G (binary, as nccl-tests; KiB/MiB/GiB too; "
                      "KB/MB/GB decimal), or a range 1K..256M stepping by 2");
  };
  std::size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return fail();
  double value = 0;
  try {
    value = std::stod(std::string(s.substr(0, digits)));
  } catch (const std::exception&) {
    return fail();
  }
  std::string suffix(s.substr(digits));
  for (char& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double scale = 0;
  if (suffix.empty() || suffix == "B")
    scale = 1;
  else if (suffix == "K" || suffix == "KIB")
    scale = units::kKiB;
  else if (suffix == "M" || suffix == "MIB")
    scale = units::kMiB;
  else if (suffix == "G" || suffix == "GIB")
    scale = units::kGiB;
  else if (suffix == "KB")
    scale = units::kKB;
  else if (suffix == "MB")
    scale = units::kMB;
  else if (suffix == "GB")
    scale = units::kGB;
  else
    return fail();
  if (!(value > 0) || !std::isfinite(value)) return fail();
  return std::floor(value * scale);
}

}  // namespace

std::vector<double> parse_size_range(std::string_view text, const std::string& field) {
  const std::size_t dots = text.find("..");
  if (dots == std::string_view::npos) return {parse_size(text, field, text)};
  const double lo = parse_size(text.substr(0, dots), field, text);
  const double hi = parse_size(text.substr(dots + 2), field, text);
  if (hi < lo) {
    throw ConfigError(field, "\"" + std::string(text) + "\"", "the end of a range must not be below its start");
  }
  std::vector<double> sizes;
  for (double b = lo; b <= hi; b *= 2) sizes.push_back(b);
  return sizes;
}

std::string format_collective_bench(const std::vector<CollectiveBenchRow>& rows, strategy::CollectiveOp op,
                                    int n_ranks) {
  std::string out = "# " + std::string(strategy::to_string(op)) + " on " + std::to_string(n_ranks) +
                    " ranks (busbw factor " + std::to_string(strategy::bus_bandwidth_factor(op, n_ranks)).substr(0, 5) +
                    "; GB = 1e9 B)\n";
  char line[160];
  std::snprintf(line, sizeof line, "%14s %12s %14s %14s %8s\n", "size (B)", "time (us)", "algbw (GB/s)", "busbw (GB/s)",
                "#wrong");
  out += line;
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%14.0f %12.1f %14.3f %14.3f %8lld\n", r.bytes, r.seconds * 1e6,
                  r.algbw_bytes_per_s / units::kGB, r.busbw_bytes_per_s / units::kGB, static_cast<long long>(r.wrong));
    out += line;
  }
  return out;
}

}  // namespace parlab::comm

// ---- threads as ranks, the shared-memory fit, memcpy ----

namespace parlab::comm {

std::string_view to_string(BenchBackend b) { return b == BenchBackend::kShm ? "shm" : "gloo"; }

namespace {

std::unique_ptr<Communicator> connect_bench_rank(BenchBackend backend, std::shared_ptr<Store> store, int rank,
                                                 int nproc, std::chrono::milliseconds timeout) {
  GlooOptions go;
  go.timeout = timeout;
  if (backend == BenchBackend::kShm) return make_shm_communicator(std::move(store), rank, nproc, shm_options_from(go));
  return make_gloo_communicator(std::move(store), rank, nproc, go);
}

// Runs body(rank, communicator) on nproc threads; rethrows the first failure, naming its rank.
void on_rank_threads(BenchBackend backend, int nproc, std::chrono::milliseconds timeout,
                     const std::function<void(int, Communicator&)>& body) {
  auto store = make_in_process_store();
  std::mutex mu;
  std::vector<std::string> failures;
  std::barrier sync(nproc);
  std::vector<std::thread> ranks;
  for (int r = 0; r < nproc; ++r) {
    ranks.emplace_back([&, r] {
      try {
        auto c = connect_bench_rank(backend, store, r, nproc, timeout);
        body(r, *c);
        sync.arrive_and_wait();  // nobody tears down while a peer still benches
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
        sync.arrive_and_drop();
      }
    });
  }
  for (auto& t : ranks) t.join();
  if (!failures.empty()) throw RuntimeError("collective bench failed: " + failures.front());
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

}  // namespace

std::vector<CollectiveBenchRow> run_collective_bench_threads(BenchBackend backend, strategy::CollectiveOp op,
                                                             const std::vector<double>& sizes_bytes, int nproc,
                                                             int warmup, const std::function<int(double)>& iters_for,
                                                             std::chrono::milliseconds timeout) {
  std::vector<CollectiveBenchRow> rows;
  on_rank_threads(backend, nproc, timeout, [&](int r, Communicator& c) {
    CollectiveOptions co;
    co.timeout = timeout;
    co.tag = "bench";
    std::vector<CollectiveBenchRow> mine;
    for (double s : sizes_bytes)
      for (const auto& row : run_collective_bench(c, op, {s}, warmup, iters_for(s), co)) mine.push_back(row);
    if (r == 0) rows = std::move(mine);
  });
  return rows;
}

ShmAllReduceFit measure_shm_all_reduce(int ranks, const std::vector<double>& sizes_bytes, int iters) {
  if (ranks < 2) throw ConfigError("ranks", std::to_string(ranks), "a fit needs at least 2 ranks");
  if (sizes_bytes.size() < 2)
    throw ConfigError("sizes", std::to_string(sizes_bytes.size()), "a fit needs 2 sizes or more");
  const auto timeout = std::chrono::milliseconds(120'000);
  const auto op = strategy::CollectiveOp::kAllReduce;
  ShmAllReduceFit fit;
  fit.ranks = ranks;
  fit.rows = run_collective_bench_threads(
      BenchBackend::kShm, op, sizes_bytes, ranks, 2, [iters](double) { return iters; }, timeout);
  // Least squares of t = alpha + x / beta with x = S * factor (bytes on the bus).
  const double factor = strategy::bus_bandwidth_factor(op, ranks);
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& r : fit.rows) {
    const double x = r.bytes * factor, y = r.seconds;
    n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
  }
  const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  fit.alpha_seconds = std::max(0.0, (sy - slope * sx) / n);
  fit.beta_bus_bytes_per_s = slope > 0 ? 1.0 / slope : 0;
  // CPU: back-to-back all-reduces of the largest size, no refills or checks in between.
  const double largest = *std::max_element(sizes_bytes.begin(), sizes_bytes.end());
  const std::size_t elements = static_cast<std::size_t>(largest / sizeof(float));
  double cpu = 0;
  on_rank_threads(BenchBackend::kShm, ranks, timeout, [&](int r, Communicator& c) {
    std::vector<float> buf(elements, 1.0f);
    CollectiveOptions co;
    co.timeout = timeout;
    c.all_reduce(buf, co)->wait();  // warm: pages faulted
    c.barrier(co)->wait();
    const double before = r == 0 ? process_cpu_seconds() : 0;
    for (int i = 0; i < iters; ++i) c.all_reduce(buf, co)->wait();
    c.barrier(co)->wait();
    if (r == 0) cpu = process_cpu_seconds() - before;
  });
  fit.cpu_seconds_per_byte = cpu / (static_cast<double>(iters) * static_cast<double>(elements * sizeof(float)));
  return fit;
}

double memcpy_seconds(std::size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    src[i % bytes] = dst[(i * 7919) % bytes];  // keep the copies observable
  }
  return median(t);
}

}  // namespace parlab::comm
