#include "runtime/comm/communicator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/comm/flight_recorder.h"
#include "strategy/collectives.h"
#include "base/units.h"

namespace parlab::comm {

// ---- op names and errors ----

// Collectives are spelled as the step programs spell them (strategy/collectives.cpp), so a flight
// recorder's entries and a program's ops name the same call the same way.
std::string_view to_string(OpKind op) {
  switch (op) {
    case OpKind::kAllReduce:
      return strategy::to_string(strategy::CollectiveOp::kAllReduce);
    case OpKind::kReduceScatter:
      return strategy::to_string(strategy::CollectiveOp::kReduceScatter);
    case OpKind::kAllGather:
      return strategy::to_string(strategy::CollectiveOp::kAllGather);
    case OpKind::kBroadcast:
      return strategy::to_string(strategy::CollectiveOp::kBroadcast);
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
  }
  return "?";
}

OpKind parse_op_kind(std::string_view text) {
  for (OpKind op : {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast, OpKind::kSend,
                    OpKind::kRecv, OpKind::kBarrier}) {
    if (to_string(op) == text) return op;
  }
  throw ConfigError("op", std::string(text),
                    "one of all-reduce, reduce-scatter, all-gather, broadcast, send, recv, barrier");
}

std::string OpInfo::describe() const {
  std::string s = std::string(to_string(op)) + " #" + std::to_string(seq);
  if (op == OpKind::kSend) s += " to rank " + std::to_string(peer);
  if (op == OpKind::kRecv) s += " from rank " + std::to_string(peer);
  s += " (";
  if (!tag.empty()) s += "tag " + tag + ", ";
  s += units::format_bytes(bytes) + ", group " + group + ")";
  return s;
}

CollectiveError::CollectiveError(OpInfo info, const std::string& message)
    : RuntimeError(message), info_(std::move(info)) {}

namespace {
std::string timeout_message(const OpInfo& info, double timeout_seconds, const std::string& detail) {
  std::string m = info.describe() + " did not complete within " + units::format_seconds(timeout_seconds);
  if (!detail.empty()) m += " (" + detail + ")";
  return m;
}
}  // namespace

CollectiveTimeout::CollectiveTimeout(OpInfo info, double timeout_seconds, const std::string& detail)
    : CollectiveError(info, timeout_message(info, timeout_seconds, detail)), timeout_seconds_(timeout_seconds) {}

CommunicatorAborted::CommunicatorAborted(std::string group, std::string reason)
    : RuntimeError("communicator of group " + group + " is unusable after an earlier failure: " + reason +
                   "; create a new communicator (restart the job from its checkpoint)"),
      group_(std::move(group)),
      reason_(std::move(reason)) {}

UnsupportedOperation::UnsupportedOperation(std::string backend, std::string op, const std::string& group)
    : RuntimeError("backend " + backend + " does not support " + op + " (group " + group + ")"),
      backend_(std::move(backend)),
      op_(std::move(op)) {}

// ---- Work ----

void Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  if (timeout == kWaitForever) {
    cv_.wait(lock, [&] { return done_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return done_; })) {
    throw CollectiveTimeout(info_, std::chrono::duration<double>(timeout).count(),
                            "Work::wait deadline; the op is still running");
  }
  if (error_) std::rethrow_exception(error_);
}

bool Work::completed() const {
  std::lock_guard lock(mu_);
  return done_;
}

bool Work::succeeded() const {
  std::lock_guard lock(mu_);
  return done_ && !error_;
}

double Work::seconds() const {
  std::lock_guard lock(mu_);
  if (!done_) return 0.0;
  return std::chrono::duration<double>(end_ - start_).count();
}

std::optional<double> Work::started_at() const {
  std::lock_guard lock(mu_);
  return started_at_;
}

std::optional<double> Work::finished_at() const {
  std::lock_guard lock(mu_);
  return finished_at_;
}

void Work::start() {
  const double wall = wall_clock_seconds();
  std::lock_guard lock(mu_);
  start_ = std::chrono::steady_clock::now();
  started_at_ = wall;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard lock(mu_);
    end_ = std::chrono::steady_clock::now();
    finished_at_ = wall_clock_seconds();
    if (start_ == std::chrono::steady_clock::time_point{}) {  // never started
      start_ = end_;
      started_at_ = finished_at_;
    }
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
}

// ---- Communicator: shape checks, then the backend ----

namespace {
[[noreturn]] void bad_shape(const std::string& field, std::size_t value, const std::string& rule) {
  throw ConfigError(field, std::to_string(value), rule);
}
}  // namespace

void Communicator::check_peer(int peer, const char* what) const {
  if (peer < 0 || peer >= size() || peer == rank()) {
    throw ConfigError(std::string(what), std::to_string(peer),
                      "must be a group rank in [0, " + std::to_string(size()) + ") other than this rank (" +
                          std::to_string(rank()) + ") of group " + group_name());
  }
}

std::shared_ptr<Work> Communicator::all_reduce(std::span<float> buf, const CollectiveOptions& o) {
  return run_all_reduce(buf, o);
}

std::shared_ptr<Work> Communicator::reduce_scatter(std::span<const float> input, std::span<float> output,
                                                   const CollectiveOptions& o) {
  const std::size_t n = static_cast<std::size_t>(size());
  if (input.size() != n * output.size()) {
    bad_shape("reduce_scatter.input elements", input.size(),
              "must be size() * output elements = " + std::to_string(n) + " * " + std::to_string(output.size()) +
                  " (group " + group_name() + ")");
  }
  return run_reduce_scatter(input, output, o);
}

std::shared_ptr<Work> Communicator::all_gather(std::span<const float> input, std::span<float> output,
                                               const CollectiveOptions& o) {
  const std::size_t n = static_cast<std::size_t>(size());
  if (output.size() != n * input.size()) {
    bad_shape("all_gather.output elements", output.size(),
              "must be size() * input elements = " + std::to_string(n) + " * " + std::to_string(input.size()) +
                  " (group " + group_name() + ")");
  }
  return run_all_gather(input, output, o);
}

std::shared_ptr<Work> Communicator::broadcast(std::span<float> buf, int root, const CollectiveOptions& o) {
  if (root < 0 || root >= size()) {
    throw ConfigError("broadcast.root", std::to_string(root),
                      "must be a group rank in [0, " + std::to_string(size()) + ") of group " + group_name());
  }
  return run_broadcast(buf, root, o);
}

void Communicator::check_counts(std::span<const int64_t> counts, std::size_t elements, const char* what) const {
  if (counts.size() != static_cast<std::size_t>(size()))
    bad_shape(std::string(what) + ".counts entries", counts.size(),
              "must be one count per rank of group " + group_name() + " (" + std::to_string(size()) + ")");
  int64_t total = 0;
  for (int64_t c : counts) {
    if (c < 0) bad_shape(std::string(what) + ".counts", 0, "counts must not be negative");
    total += c;
  }
  if (static_cast<std::size_t>(total) != elements)
    bad_shape(std::string(what) + " elements", elements,
              "must be the sum of counts (" + std::to_string(total) + ", group " + group_name() + ")");
}

std::shared_ptr<Work> Communicator::reduce_scatter_v(std::span<const float> input, std::span<const int64_t> counts,
                                                     std::span<float> output, const CollectiveOptions& o) {
  check_counts(counts, input.size(), "reduce_scatter_v.input");
  if (output.size() != static_cast<std::size_t>(counts[static_cast<std::size_t>(rank())]))
    bad_shape("reduce_scatter_v.output elements", output.size(),
              "must be this rank's count " + std::to_string(counts[static_cast<std::size_t>(rank())]));
  return run_reduce_scatter_v(input, counts, output, o);
}

std::shared_ptr<Work> Communicator::all_gather_v(std::span<const float> input, std::span<float> output,
                                                 std::span<const int64_t> counts, const CollectiveOptions& o) {
  check_counts(counts, output.size(), "all_gather_v.output");
  if (input.size() != static_cast<std::size_t>(counts[static_cast<std::size_t>(rank())]))
    bad_shape("all_gather_v.input elements", input.size(),
              "must be this rank's count " + std::to_string(counts[static_cast<std::size_t>(rank())]));
  return run_all_gather_v(input, output, counts, o);
}

std::shared_ptr<Work> Communicator::send(std::span<const float> buf, int peer, const CollectiveOptions& o) {
  check_peer(peer, "send.peer");
  return run_send(buf, peer, o);
}

std::shared_ptr<Work> Communicator::recv(std::span<float> buf, int peer, const CollectiveOptions& o) {
  check_peer(peer, "recv.peer");
  return run_recv(buf, peer, o);
}

std::shared_ptr<Work> Communicator::barrier(const CollectiveOptions& o) { return run_barrier(o); }

RegisteredBuffer Communicator::allocate_registered(std::size_t elements) {
  if (elements == 0) return {};
  return run_allocate_registered(elements);
}

RegisteredBuffer Communicator::run_allocate_registered(std::size_t elements) {
  const std::size_t bytes = (elements * sizeof(float) + 63) / 64 * 64;
  std::shared_ptr<float> mem(static_cast<float*>(std::aligned_alloc(64, bytes)), [](float* p) { std::free(p); });
  if (!mem) throw std::bad_alloc();
  std::memset(mem.get(), 0, bytes);
  return {std::span<float>(mem.get(), elements), mem};
}

std::unique_ptr<Communicator> Communicator::split(const std::vector<int>& ranks, std::string name) {
  const std::vector<int>& members = world_ranks();
  const int me = members.at(static_cast<std::size_t>(rank()));
  std::string listed;
  for (int r : ranks) listed += (listed.empty() ? "" : ",") + std::to_string(r);
  if (name.empty()) throw ConfigError("split.name", "\"\"", "a group needs a name, e.g. dp.0");
  if (ranks.empty() || !std::is_sorted(ranks.begin(), ranks.end()) ||
      std::adjacent_find(ranks.begin(), ranks.end()) != ranks.end()) {
    throw ConfigError("split.world_ranks", "[" + listed + "]", "must be sorted, unique, non-empty");
  }
  for (int r : ranks) {
    if (std::find(members.begin(), members.end(), r) == members.end()) {
      throw ConfigError("split.world_ranks", "[" + listed + "]",
                        "world rank " + std::to_string(r) + " is not a member of group " + group_name());
    }
  }
  if (!std::binary_search(ranks.begin(), ranks.end(), me)) {
    throw ConfigError("split.world_ranks", "[" + listed + "]",
                      "must contain the calling rank (world rank " + std::to_string(me) +
                          "); only members of the new group call split");
  }
  return run_split(ranks, std::move(name));
}

// ---- defaults: fail loudly ----

void Communicator::unsupported(std::string_view op) const {
  throw UnsupportedOperation(std::string(backend_name()), std::string(op), group_name());
}

std::shared_ptr<Work> Communicator::run_all_reduce(std::span<float>, const CollectiveOptions&) {
  unsupported(to_string(OpKind::kAllReduce));
}
std::shared_ptr<Work> Communicator::run_reduce_scatter(std::span<const float>, std::span<float>,
                                                       const CollectiveOptions&) {
  unsupported(to_string(OpKind::kReduceScatter));
}
std::shared_ptr<Work> Communicator::run_all_gather(std::span<const float>, std::span<float>, const CollectiveOptions&) {
  unsupported(to_string(OpKind::kAllGather));
}
std::shared_ptr<Work> Communicator::run_broadcast(std::span<float>, int, const CollectiveOptions&) {
  unsupported(to_string(OpKind::kBroadcast));
}
std::shared_ptr<Work> Communicator::run_reduce_scatter_v(std::span<const float>, std::span<const int64_t>,
                                                         std::span<float>, const CollectiveOptions&) {
  unsupported(std::string(to_string(OpKind::kReduceScatter)) + " with uneven counts");
}
std::shared_ptr<Work> Communicator::run_all_gather_v(std::span<const float>, std::span<float>, std::span<const int64_t>,
                                                     const CollectiveOptions&) {
  unsupported(std::string(to_string(OpKind::kAllGather)) + " with uneven counts");
}
std::shared_ptr<Work> Communicator::run_send(std::span<const float>, int, const CollectiveOptions&) {
  unsupported(to_string(OpKind::kSend));
}
std::shared_ptr<Work> Communicator::run_recv(std::span<float>, int, const CollectiveOptions&) {
  unsupported(to_string(OpKind::kRecv));
}
std::shared_ptr<Work> Communicator::run_barrier(const CollectiveOptions&) { unsupported(to_string(OpKind::kBarrier)); }
std::unique_ptr<Communicator> Communicator::run_split(const std::vector<int>&, std::string) { unsupported("split"); }

}  // namespace parlab::comm
