// parlab bench collective: an nccl-tests line for Gloo on this machine. N ranks (threads of this
// process, each with its own Gloo context, talking TCP over loopback as separate processes
// would) run runtime/comm's collective benchmark; the table has the columns of nccl-tests and
// the JSON the fields of `parlab simulate collective`. The machine's single-thread memcpy
// bandwidth is measured alongside: loopback TCP moves every byte through memory at least twice
// (into and out of the socket buffers), so it is the ceiling a large message's busbw is set
// against.
#include <fmt/core.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "cli/checks.h"
#include "cli/common.h"
#include "runtime/comm/collective_bench.h"
#include "runtime/comm/rendezvous.h"
#include "strategy/errors.h"
#include "strategy/units.h"

namespace parlab::cli {
namespace {

struct BenchCollectiveOptions {
  std::string op = "allreduce";
  std::string bytes = "1K..256M";
  int nproc = 2;
  int iters = 0;  // 0: by size
  int warmup = 2;
  double timeout_seconds = 120;
  bool json = false;
};

// Fewer repetitions for large messages, so 1K..256M finishes in about a minute on loopback.
int iters_for(double bytes, int requested) {
  if (requested > 0) return requested;
  if (bytes <= 1 << 20) return 20;
  if (bytes <= 16 << 20) return 10;
  return 3;
}

// Median seconds of one memcpy of `bytes` (one thread; source and destination pre-faulted).
double memcpy_seconds(size_t bytes) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    src[i % bytes] = dst[(i * 7919) % bytes];  // keep the copies observable
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<comm::CollectiveBenchRow> run_threads(strategy::CollectiveOp op, const std::vector<double>& sizes,
                                                  const BenchCollectiveOptions& o) {
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  auto store = comm::make_in_process_store();
  std::vector<comm::CollectiveBenchRow> rows;
  std::mutex mu;
  std::vector<std::string> failures;
  std::barrier sync(o.nproc);
  std::vector<std::thread> ranks;
  for (int r = 0; r < o.nproc; ++r) {
    ranks.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = timeout;
        auto c = comm::make_gloo_communicator(store, r, o.nproc, go);
        comm::CollectiveOptions co;
        co.timeout = timeout;
        co.tag = "bench";
        std::vector<comm::CollectiveBenchRow> mine;
        for (double s : sizes)
          for (const auto& row : comm::run_collective_bench(*c, op, {s}, o.warmup, iters_for(s, o.iters), co))
            mine.push_back(row);
        if (r == 0) rows = mine;
        sync.arrive_and_wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
        sync.arrive_and_drop();
      }
    });
  }
  for (auto& t : ranks) t.join();
  if (!failures.empty()) throw RuntimeError("collective bench failed: " + failures.front());
  return rows;
}

// Ranks are threads of this process, each with its own Gloo context and sockets: past this many
// one machine only thrashes (and thousands exhaust threads and descriptors).
constexpr int kMaxBenchRanks = 64;

void run_bench_collective(const CLI::App& cmd, const BenchCollectiveOptions& o) {
  const auto op = strategy::parse_collective_op(o.op);
  if (!op) throw ConfigError("--op", o.op, "one of allreduce, reducescatter, allgather, broadcast");
  in_range("--nproc", o.nproc, 1, kMaxBenchRanks);
  if (given(cmd, "--iters")) in_range("--iters", o.iters, 1, 1'000'000);
  in_range("--warmup", o.warmup, 0, 1'000'000);
  seconds_flag("--timeout", o.timeout_seconds);
  const std::vector<double> sizes = comm::parse_size_range(o.bytes, "--bytes");
  const std::vector<comm::CollectiveBenchRow> rows = run_threads(*op, sizes, o);
  const double largest = rows.empty() ? 0 : rows.back().bytes;
  const double copy_s = largest > 0 ? memcpy_seconds(static_cast<size_t>(largest)) : 0;
  const double memcpy_bytes_per_s = copy_s > 0 ? largest / copy_s : 0;

  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows)
      out.push_back({{"op", std::string(strategy::to_string(*op))},
                     {"ranks", o.nproc},
                     {"bytes", r.bytes},
                     {"seconds", r.seconds},
                     {"algbw_bytes_per_s", r.algbw_bytes_per_s},
                     {"busbw_bytes_per_s", r.busbw_bytes_per_s},
                     {"wrong", r.wrong}});
    print_json({{"backend", "gloo"}, {"transport", "tcp loopback"}, {"rows", out},
                {"memcpy_bytes", largest}, {"memcpy_bytes_per_s", memcpy_bytes_per_s}});
    return;
  }
  fmt::print("{}", comm::format_collective_bench(rows, *op, o.nproc));
  if (!rows.empty() && memcpy_bytes_per_s > 0) {
    fmt::print("\nmemcpy of {} on one thread: {:.2f} GB/s\n", units::format_bytes(largest),
               memcpy_bytes_per_s / units::kGB);
    if (o.nproc > 1)
      fmt::print("largest message: busbw {:.2f} GB/s = {:.0f}% of the memcpy bandwidth\n",
                 rows.back().busbw_bytes_per_s / units::kGB,
                 100 * rows.back().busbw_bytes_per_s / memcpy_bytes_per_s);
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure this machine: collectives over Gloo");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchCollectiveOptions>();
  CLI::App* coll = bench->add_subcommand(
      "collective", "nccl-tests-style table of one collective over Gloo on loopback (ranks as threads)");
  coll->add_option("--op", o->op, "allreduce | reducescatter | allgather | broadcast")->capture_default_str();
  coll->add_option("--bytes,-b", o->bytes, "Size or range: 64M, 1K..256M (x2 steps; K/M/G binary)")
      ->capture_default_str();
  coll->add_option("--nproc,-n", o->nproc, "Ranks")->capture_default_str();
  coll->add_option("--iters", o->iters, "Timed repetitions per size (default: 20 up to 1 MiB, 10 up to 16 MiB, then 3)");
  coll->add_option("--warmup", o->warmup, "Untimed repetitions per size")->capture_default_str();
  coll->add_option("--timeout", o->timeout_seconds, "Per-op timeout, seconds")->capture_default_str();
  coll->add_flag("--json", o->json, "JSON rows with the fields of `parlab simulate collective`");
  coll->footer("Example:\n  parlab bench collective --op allreduce --bytes 1K..256M --nproc 2");
  coll->callback([o, coll] { run_bench_collective(*coll, *o); });
}

}  // namespace parlab::cli
