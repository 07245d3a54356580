#pragma once
// The Communicator: a narrow, c10d-style interface (ProcessGroup/Backend/Work) over which the
// runtime executes the collectives and point-to-point ops of a StepProgram. Backends (Gloo on
// CPUs, NCCL on GPUs) implement the protected `run_*` hooks; the public calls check shapes once,
// here, for every backend.
//
// Execution model: every op is queued and runs on ONE communication thread per communicator, in
// issue order. Issuing returns at once with a Work handle, so a caller can launch a bucket
// all-reduce and keep computing (how DDP overlaps backward). Buffers must stay alive and
// untouched until the Work completes.
//
// Ordering contract (as c10d): every member issues the same collectives in the same order.
// Point-to-point: a Gloo send completes only once the peer has posted the matching recv; a
// shared-memory send completes once its message is in the channel (eager up to two slices of
// ShmOptions::channel_bytes, 2 MiB by default; a longer one waits for the receiver too). One
// thread runs one op at a time, so two neighbours that both send first may deadlock until the
// timeout; order neighbour exchanges (e.g. even stage sends first) or use a second communicator.
//
// Shapes (n = size(), fp32 elements):
//   all_reduce(buf)                  buf[i] <- sum over ranks of buf[i]            (in place)
//   reduce_scatter(in[n*c], out[c])  out[i] <- sum over ranks of in[rank*c + i]
//   all_gather(in[c], out[n*c])      out[r*c + i] <- in[i] of rank r
//   broadcast(buf, root)             buf <- buf of root
//   reduce_scatter_v(in, counts, out) uneven: rank r's chunk is counts[r] elements at
//                                    offset counts[0] + ... + counts[r-1] of in; out holds
//                                    counts[rank()] elements and may alias that chunk of in
//   all_gather_v(in, out, counts)    out[offset_r + i] <- in[i] of rank r (in: counts[rank()]
//                                    elements; it may alias its own chunk of out)
// The v forms are what ZeRO needs: a bucket or a layer cut at the rank's shard boundaries gives
// chunks of different sizes (some empty), and padding would move bytes the program does not.
//   send(buf, peer) / recv(buf, peer): one message between two group ranks
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "runtime/comm/errors.h"

namespace parlab::comm {

class FlightRecorder;

// The lab default: long enough for a loaded laptop, short enough that a hang is seen quickly.
// Production jobs use ~10 minutes (PyTorch's default process-group timeout, which its NCCL
// watchdog enforces): the first collective after a long checkpoint write or a data-loader stall
// must not be killed.
inline constexpr std::chrono::milliseconds kDefaultTimeout{30'000};
inline constexpr std::chrono::milliseconds kProductionTimeout{600'000};
// Work::wait() without a deadline: wait until the op itself completes or times out.
inline constexpr std::chrono::milliseconds kWaitForever = std::chrono::milliseconds::max();

struct CollectiveOptions {
  // No progress within `timeout` fails the op with CollectiveTimeout and poisons the
  // communicator. Gloo applies it to every wait inside the op (a slow but moving transfer is not
  // killed; a missing peer is).
  std::chrono::milliseconds timeout = kDefaultTimeout;
  // Free text naming the tensor or bucket ("grad.bucket3"); shown in errors and the recorder.
  std::string tag;
  // The caller waits for this op at once (a compute-stream collective, such as tensor
  // parallelism's): when nothing is queued ahead of it, the backend may run it on the calling
  // thread. Order, timeouts, the flight recorder and errors are those of a queued op.
  bool caller_waits = false;
};

// Handle of one issued op (c10d Work). Backends drive it through start()/finish().
class Work {
 public:
  explicit Work(OpInfo info) : info_(std::move(info)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  // Blocks until the op completed, then rethrows its failure (CollectiveTimeout, CollectiveError,
  // CommunicatorAborted). If `timeout` passes first, throws CollectiveTimeout; the op itself
  // keeps running (its own CollectiveOptions::timeout bounds it).
  virtual void wait(std::chrono::milliseconds timeout = kWaitForever);
  // True once the op ended, successfully or not (c10d isCompleted). Never blocks.
  virtual bool completed() const;
  // True once the op ended successfully.
  virtual bool succeeded() const;
  // Seconds the op ran on the communication thread (start to end); 0 until completed.
  virtual double seconds() const;
  // Wall-clock stamps (seconds since the Unix epoch, the flight recorder's clock) of when the
  // communication thread started and ended the op, as c10d's WorkInfo carries them: callers that
  // time ops read them here instead of re-matching flight-recorder entries. Empty until then.
  std::optional<double> started_at() const;
  std::optional<double> finished_at() const;
  const OpInfo& info() const { return info_; }

  // Backend side.
  void start();
  void finish(std::exception_ptr error = nullptr);

 private:
  const OpInfo info_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::chrono::steady_clock::time_point start_{}, end_{};
  std::optional<double> started_at_, finished_at_;
};

// Memory from Communicator::allocate_registered: `data` stays valid while `keep` (or a copy of
// it) lives.
struct RegisteredBuffer {
  std::span<float> data;
  std::shared_ptr<void> keep;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual std::string_view backend_name() const = 0;  // "gloo", "nccl"
  virtual int rank() const = 0;                       // rank in this group, [0, size())
  virtual int size() const = 0;
  virtual const std::string& group_name() const = 0;  // "world", "dp.0", "tp.1", ...
  // World rank of every member, indexed by group rank (identity for the world communicator).
  virtual const std::vector<int>& world_ranks() const = 0;
  virtual const FlightRecorder& flight_recorder() const = 0;

  std::shared_ptr<Work> all_reduce(std::span<float> buf, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> reduce_scatter(std::span<const float> input, std::span<float> output,
                                       const CollectiveOptions& opts = {});
  std::shared_ptr<Work> all_gather(std::span<const float> input, std::span<float> output,
                                   const CollectiveOptions& opts = {});
  std::shared_ptr<Work> broadcast(std::span<float> buf, int root, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> reduce_scatter_v(std::span<const float> input, std::span<const int64_t> counts,
                                         std::span<float> output, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> all_gather_v(std::span<const float> input, std::span<float> output,
                                     std::span<const int64_t> counts, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> send(std::span<const float> buf, int peer, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> recv(std::span<float> buf, int peer, const CollectiveOptions& opts = {});
  std::shared_ptr<Work> barrier(const CollectiveOptions& opts = {});

  // Memory a collective of this group can use where it lies, as NCCL's ncclMemAlloc with user
  // buffer registration: on shared memory every member maps every member's block, so an
  // all-reduce over a span of it reads the peers' data in place instead of copying it through
  // staging (2.5 S moved per rank on 2 ranks instead of 4 S). Collective: every member calls it
  // with the same `elements`, in the same order, and passes spans at the same offsets of it to
  // the same collectives (a rank that passes ordinary memory where its peers pass registered
  // memory issues a different collective: the op times out naming the disagreement, as any
  // desync does). An all-gather's input may lie at different offsets on different ranks (uneven
  // ZeRO shards): each rank then copies every chunk straight from its owner's block (one pass of
  // the output instead of three). Zero-filled. Other backends: ordinary heap memory.
  RegisteredBuffer allocate_registered(std::size_t elements);

  // New communicator over a subset of this one's members (DP/TP/PP groups), named `name`.
  // `world_ranks` are world ranks, sorted, unique, all members of this group, including the
  // caller. Collective over the new group's members only: each of them calls it with the same
  // arguments (non-members do not call). Blocks until the sub-group is connected.
  std::unique_ptr<Communicator> split(const std::vector<int>& world_ranks, std::string name);

 protected:
  Communicator() = default;

  // Backend hooks, called after the shapes were checked. The default fails loudly, naming the
  // backend and the op.
  virtual std::shared_ptr<Work> run_all_reduce(std::span<float> buf, const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_reduce_scatter(std::span<const float> input, std::span<float> output,
                                                   const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_all_gather(std::span<const float> input, std::span<float> output,
                                               const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_broadcast(std::span<float> buf, int root, const CollectiveOptions& o);
  // `counts` is copied by the backend before the call returns.
  virtual std::shared_ptr<Work> run_reduce_scatter_v(std::span<const float> input, std::span<const int64_t> counts,
                                                     std::span<float> output, const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_all_gather_v(std::span<const float> input, std::span<float> output,
                                                 std::span<const int64_t> counts, const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_send(std::span<const float> buf, int peer, const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_recv(std::span<float> buf, int peer, const CollectiveOptions& o);
  virtual std::shared_ptr<Work> run_barrier(const CollectiveOptions& o);
  virtual std::unique_ptr<Communicator> run_split(const std::vector<int>& world_ranks, std::string name);
  // Default: zeroed heap memory, 64-byte aligned.
  virtual RegisteredBuffer run_allocate_registered(std::size_t elements);

  [[noreturn]] void unsupported(std::string_view op) const;

 private:
  void check_peer(int peer, const char* what) const;
  void check_counts(std::span<const int64_t> counts, std::size_t elements, const char* what) const;
};

}  // namespace parlab::comm
