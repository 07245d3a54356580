#pragma once
// A collective benchmark in the manner of nccl-tests: for each size, `warmup` untimed runs, then
// `iters` timed runs; a row reports the median time and the bandwidths of strategy/collectives.h
// (algbw = S / t, busbw = algbw * bus_bandwidth_factor(op, n); S is the whole tensor, as there).
//
// One run per size is checked: its input filled with rank-dependent values, its output compared
// element by element; a row counts the wrong elements over all ranks (#wrong, as nccl-tests
// prints), so a fast but broken collective does not go unseen. The timed runs follow back to
// back on the same buffers, after one barrier (nccl-tests times the same way). The buffers are the
// group's registered memory (Communicator::allocate_registered), as the trainer's gradient
// buffers are, like nccl-tests -R.
//
// Every member of the communicator calls it with the same arguments. A timed run's time on a
// rank is from the end of its previous run to its own end; a row's time is the median over runs
// of the slowest rank's (an all-gather of the per-rank times), so every rank returns the same rows.
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/communicator.h"
#include "strategy/collectives.h"

namespace parlab::comm {

struct CollectiveBenchRow {
  double bytes = 0;    // S actually moved: rounded down to whole fp32 elements, a multiple of n
  double seconds = 0;  // median over the back-to-back iters of the slowest rank's time
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  int64_t wrong = 0;  // output elements that differ from the expected result, all ranks (one checked run)
};

// Throws ConfigError for iters < 1, warmup < 0 or a size under one element per rank.
std::vector<CollectiveBenchRow> run_collective_bench(Communicator& comm, strategy::CollectiveOp op,
                                                     const std::vector<double>& sizes_bytes, int warmup, int iters,
                                                     const CollectiveOptions& options = {});

// "1K..256M" -> 1 KiB, 2 KiB, ..., 256 MiB (factor 2, like nccl-tests -b 1K -e 256M -f 2);
// "64M" -> one size. Suffixes K, M, G are binary as in nccl-tests (KiB, MiB, GiB also accepted);
// KB, MB, GB are decimal. Throws ConfigError naming `field`.
std::vector<double> parse_size_range(std::string_view text, const std::string& field = "sizes");

// nccl-tests style table: size, time, algbw, busbw (decimal GB/s), #wrong, one row per size.
std::string format_collective_bench(const std::vector<CollectiveBenchRow>& rows, strategy::CollectiveOp op,
                                    int n_ranks);

}  // namespace parlab::comm

namespace parlab::comm {

// Which backend a threads-as-ranks bench connects: "shm" or "gloo" (loopback TCP).
enum class BenchBackend { kShm, kGloo };
std::string_view to_string(BenchBackend b);

// Runs run_collective_bench on `nproc` threads of this process, each its own rank of a fresh
// communicator of `backend` (an in-process store); rows as rank 0 got them. `iters_for(bytes)`
// picks the timed repetitions per size. Throws RuntimeError naming the rank that failed.
std::vector<CollectiveBenchRow> run_collective_bench_threads(BenchBackend backend, strategy::CollectiveOp op,
                                                             const std::vector<double>& sizes_bytes, int nproc,
                                                             int warmup, const std::function<int(double)>& iters_for,
                                                             std::chrono::milliseconds timeout);

// The shared-memory all-reduce as the cost model needs it (for calibration):
//   t(S) = alpha + S * busbw_factor(n) / beta    least squares over the rows' median times
// and the CPU it burns: process CPU seconds (all ranks, copies, sums and waits together) per
// byte of the message, measured over back-to-back all-reduces of the largest size.
struct ShmAllReduceFit {
  int ranks = 0;
  double alpha_seconds = 0;
  double beta_bus_bytes_per_s = 0;
  double cpu_seconds_per_byte = 0;
  std::vector<CollectiveBenchRow> rows;
};
ShmAllReduceFit measure_shm_all_reduce(int ranks, const std::vector<double>& sizes_bytes, int iters);

// Median seconds of one single-thread memcpy of `bytes` (source and destination pre-faulted):
// the yardstick a same-host collective's bus bandwidth is compared with.
double memcpy_seconds(std::size_t bytes);

}  // namespace parlab::comm
