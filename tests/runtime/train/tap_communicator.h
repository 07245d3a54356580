#pragma once
// A communicator that passes every op to a real one and notes the tag of each op issued on it or
// on any group split off it, so a test can tell which world (host or "device") a step's
// collectives, TP reductions and pipeline sends went over; it can also hold each collective's
// issue call (TapLog::issue_delay). Thread-safe: the split groups of one rank share the log.
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"

namespace parlab::train::testing {

// "s<digits>/...": the executor's tag of a step's op (executor.h).
inline bool is_step_tag(const std::string& tag) {
  size_t i = 1;
  while (i < tag.size() && tag[i] >= '0' && tag[i] <= '9') ++i;
  return tag.size() > 2 && tag[0] == 's' && i > 1 && i < tag.size() && tag[i] == '/';
}

struct TapLog {
  std::mutex mu;
  // How long each collective's issue call takes before it reaches the real communicator (a slow
  // issue: the calling thread is held, as a busy core's would be).
  std::chrono::microseconds issue_delay{0};
  std::vector<std::string> tags;                           // in issue order, "<kind> <tag>", e.g. "send s0/act.mb1.vs0"
  std::vector<std::span<const float>> registered;          // what allocate_registered handed out
  std::vector<std::string> all_reduces_in_registered;      // tags of all-reduces over a span of it
  std::vector<std::string> all_gathers_in_registered;      // tags of all-gathers whose input lies in it
  std::vector<std::string> reduce_scatters_in_registered;  // tags of reduce-scatters whose input lies in it
  void note(const char* kind, const comm::CollectiveOptions& o) {
    std::lock_guard lock(mu);
    tags.push_back(std::string(kind) + " " + o.tag);
  }
  void note_all_reduce(std::span<const float> buf, const comm::CollectiveOptions& o) {
    std::lock_guard lock(mu);
    tags.push_back("all-reduce " + o.tag);
    if (in_registered(buf)) all_reduces_in_registered.push_back(o.tag);
  }
  void note_all_gather(std::span<const float> in, const comm::CollectiveOptions& o) {
    std::lock_guard lock(mu);
    tags.push_back("all-gather " + o.tag);
    if (in_registered(in)) all_gathers_in_registered.push_back(o.tag);
  }
  void note_reduce_scatter(std::span<const float> in, const comm::CollectiveOptions& o) {
    std::lock_guard lock(mu);
    tags.push_back("reduce-scatter " + o.tag);
    if (in_registered(in)) reduce_scatters_in_registered.push_back(o.tag);
  }
  // Within one allocation (an empty span at its start or inside it counts).
  bool in_registered(std::span<const float> buf) const {
    for (const auto& r : registered)
      if (buf.data() >= r.data() && buf.data() + buf.size() <= r.data() + r.size() &&
          (!buf.empty() || buf.data() < r.data() + r.size()))
        return true;
    return false;
  }
  // Entries of the step programs (executor tags start "s<step>/") whose kind is `kind`, or any.
  int64_t step_ops(const std::string& kind = "") {
    std::lock_guard lock(mu);
    int64_t n = 0;
    for (const std::string& t : tags) {
      const size_t space = t.find(' ');
      if ((kind.empty() || t.compare(0, space, kind) == 0) && is_step_tag(t.substr(space + 1))) ++n;
    }
    return n;
  }
};

class TapCommunicator final : public comm::Communicator {
 public:
  TapCommunicator(std::unique_ptr<comm::Communicator> inner, std::shared_ptr<TapLog> log)
      : inner_(std::move(inner)), log_(std::move(log)) {}
  std::string_view backend_name() const override { return inner_->backend_name(); }
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& group_name() const override { return inner_->group_name(); }
  const std::vector<int>& world_ranks() const override { return inner_->world_ranks(); }
  const comm::FlightRecorder& flight_recorder() const override { return inner_->flight_recorder(); }

 protected:
  using Options = comm::CollectiveOptions;
  std::shared_ptr<comm::Work> run_all_reduce(std::span<float> buf, const Options& o) override {
    log_->note_all_reduce(buf, o);
    hold();
    return inner_->all_reduce(buf, o);
  }
  comm::RegisteredBuffer run_allocate_registered(std::size_t elements) override {
    comm::RegisteredBuffer b = inner_->allocate_registered(elements);
    std::lock_guard lock(log_->mu);
    log_->registered.push_back(b.data);
    return b;
  }
  std::shared_ptr<comm::Work> run_reduce_scatter(std::span<const float> in, std::span<float> out,
                                                 const Options& o) override {
    log_->note_reduce_scatter(in, o);
    return inner_->reduce_scatter(in, out, o);
  }
  std::shared_ptr<comm::Work> run_all_gather(std::span<const float> in, std::span<float> out,
                                             const Options& o) override {
    log_->note("all-gather", o);
    return inner_->all_gather(in, out, o);
  }
  std::shared_ptr<comm::Work> run_broadcast(std::span<float> buf, int root, const Options& o) override {
    log_->note("broadcast", o);
    return inner_->broadcast(buf, root, o);
  }
  std::shared_ptr<comm::Work> run_reduce_scatter_v(std::span<const float> in, std::span<const int64_t> counts,
                                                   std::span<float> out, const Options& o) override {
    log_->note_reduce_scatter(in, o);
    hold();
    return inner_->reduce_scatter_v(in, counts, out, o);
  }
  std::shared_ptr<comm::Work> run_all_gather_v(std::span<const float> in, std::span<float> out,
                                               std::span<const int64_t> counts, const Options& o) override {
    log_->note_all_gather(in, o);
    hold();
    return inner_->all_gather_v(in, out, counts, o);
  }
  std::shared_ptr<comm::Work> run_send(std::span<const float> buf, int peer, const Options& o) override {
    log_->note("send", o);
    return inner_->send(buf, peer, o);
  }
  std::shared_ptr<comm::Work> run_recv(std::span<float> buf, int peer, const Options& o) override {
    log_->note("recv", o);
    return inner_->recv(buf, peer, o);
  }
  std::shared_ptr<comm::Work> run_barrier(const Options& o) override {
    log_->note("barrier", o);
    return inner_->barrier(o);
  }
  std::unique_ptr<comm::Communicator> run_split(const std::vector<int>& ranks, std::string name) override {
    return std::make_unique<TapCommunicator>(inner_->split(ranks, std::move(name)), log_);
  }

 private:
  void hold() const {
    if (log_->issue_delay.count() > 0) std::this_thread::sleep_for(log_->issue_delay);
  }

  std::unique_ptr<comm::Communicator> inner_;
  std::shared_ptr<TapLog> log_;
};

}  // namespace parlab::train::testing
