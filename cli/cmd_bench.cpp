// parlab bench collective: nccl-tests tables for both CPU backends on this machine, shared
// memory and Gloo. N ranks (threads of this process, each with its own communicator: its own
// mapping of the group's /dev/shm segment, or its own Gloo context talking TCP over loopback, as
// separate processes would) run runtime/comm's collective benchmark; the table has the columns
// of nccl-tests (#wrong included) and the JSON the fields of `parlab simulate collective`. The
// single-thread memcpy bandwidth of each size is measured alongside: it is the ceiling a
// same-host collective's busbw is set against (loopback TCP moves every byte through memory at
// least twice, shared memory ideally about once).
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
#include "base/errors.h"
#include "base/units.h"

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
  std::string comm = "both";
};

// Fewer repetitions for large messages, so 1K..256M finishes in about a minute on loopback.
int iters_for(double bytes, int requested) {
  if (requested > 0) return requested;
  if (bytes <= 1 << 20) return 20;
  if (bytes <= 16 << 20) return 10;
  return 3;
}

// Ranks are threads of this process, each with its own Gloo context and sockets: past this many
// one machine only thrashes (and thousands exhaust threads and descriptors).
constexpr int kMaxBenchRanks = 64;

// The backends --comm names, shared memory first.
std::vector<comm::BenchBackend> bench_backends(const std::string& which) {
  if (which == "shm") return {comm::BenchBackend::kShm};
  if (which == "gloo") return {comm::BenchBackend::kGloo};
  return {comm::BenchBackend::kShm, comm::BenchBackend::kGloo};
}

std::string_view transport(comm::BenchBackend b) {
  return b == comm::BenchBackend::kShm ? "shared memory (/dev/shm), registered buffers" : "Gloo, tcp loopback";
}

void run_bench_collective(const CLI::App& cmd, const BenchCollectiveOptions& o) {
  const auto op = strategy::parse_collective_op(o.op);
  if (!op) throw ConfigError("--op", o.op, "one of allreduce, reducescatter, allgather, broadcast");
  in_range("--nproc", o.nproc, 1, kMaxBenchRanks);
  if (given(cmd, "--iters")) in_range("--iters", o.iters, 1, 1'000'000);
  in_range("--warmup", o.warmup, 0, 1'000'000);
  seconds_flag("--timeout", o.timeout_seconds);
  const std::vector<double> sizes = comm::parse_size_range(o.bytes, "--bytes");
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  const auto iters = [&](double bytes) { return iters_for(bytes, o.iters); };
  std::vector<std::pair<comm::BenchBackend, std::vector<comm::CollectiveBenchRow>>> runs;
  for (comm::BenchBackend b : bench_backends(o.comm))
    runs.emplace_back(b, comm::run_collective_bench_threads(b, *op, sizes, o.nproc, o.warmup, iters, timeout));
  // The yardstick beside every row: one thread copying a message of that size.
  std::vector<double> memcpy_bw;
  for (const auto& r : runs.front().second) {
    const double s = comm::memcpy_seconds(static_cast<size_t>(r.bytes));
    memcpy_bw.push_back(s > 0 ? r.bytes / s : 0);
  }

  if (o.json) {
    nlohmann::json backends = nlohmann::json::array();
    for (const auto& [b, rows] : runs) {
      nlohmann::json out = nlohmann::json::array();
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        out.push_back({{"op", std::string(strategy::to_string(*op))},
                       {"ranks", o.nproc},
                       {"bytes", r.bytes},
                       {"seconds", r.seconds},
                       {"algbw_bytes_per_s", r.algbw_bytes_per_s},
                       {"busbw_bytes_per_s", r.busbw_bytes_per_s},
                       {"wrong", r.wrong},
                       {"memcpy_bytes_per_s", memcpy_bw[i]}});
      }
      backends.push_back(
          {{"backend", std::string(comm::to_string(b))}, {"transport", std::string(transport(b))}, {"rows", out}});
    }
    print_json({{"backends", backends}});
    return;
  }
  for (const auto& [b, rows] : runs) {
    fmt::print("# backend {}: {}\n", comm::to_string(b), transport(b));
    fmt::print("{}", comm::format_collective_bench(rows, *op, o.nproc));
    fmt::print("{:>14} {:>14} {:>10}\n", "size (B)", "memcpy (GB/s)", "busbw/cpy");
    for (size_t i = 0; i < rows.size(); ++i)
      fmt::print("{:>14.0f} {:>14.3f} {:>9.0f}%\n", rows[i].bytes, memcpy_bw[i] / units::kGB,
                 memcpy_bw[i] > 0 ? 100 * rows[i].busbw_bytes_per_s / memcpy_bw[i] : 0.0);
    fmt::print("\n");
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure this machine: collectives over shared memory and Gloo");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchCollectiveOptions>();
  CLI::App* coll = bench->add_subcommand(
      "collective",
      "nccl-tests-style tables of one collective over shared memory and Gloo on loopback (ranks as threads)");
  coll->add_option("--op", o->op, "allreduce | reducescatter | allgather | broadcast")->capture_default_str();
  coll->add_option("--bytes,-b", o->bytes, "Size or range: 64M, 1K..256M (x2 steps; K/M/G binary)")
      ->capture_default_str();
  coll->add_option("--nproc,-n", o->nproc, "Ranks")->capture_default_str();
  coll->add_option("--iters", o->iters,
                   "Timed repetitions per size (default: 20 up to 1 MiB, 10 up to 16 MiB, then 3)");
  coll->add_option("--warmup", o->warmup, "Untimed repetitions per size")->capture_default_str();
  coll->add_option("--timeout", o->timeout_seconds, "Per-op timeout, seconds")->capture_default_str();
  coll->add_option("--comm", o->comm, "both | shm | gloo: the backends to measure")
      ->check(CLI::IsMember({"both", "shm", "gloo"}))
      ->capture_default_str();
  coll->add_flag("--json", o->json, "JSON rows with the fields of `parlab simulate collective`");
  coll->footer("Example:\n  parlab bench collective --op allreduce --bytes 1K..256M --nproc 2");
  coll->callback([o, coll] { run_bench_collective(*coll, *o); });
}

}  // namespace parlab::cli
