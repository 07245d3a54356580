// RawRun and SimResult as bytes and back: the pipe between the simulating child and its parent
// (same binary, same machine, so native layouts are fine).
#include <cstring>
#include <type_traits>

#include "sim/executor.h"
#include "sim/result.h"
#include "base/errors.h"

namespace parlab::sim {
namespace {

// Plain bytes for the pipe between the simulating child and its parent (same binary, same
// machine, so native layouts are fine).
class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    out_.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  template <typename T>
  void vec(const std::vector<T>& v) {
    pod(uint64_t(v.size()));
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void str(const std::string& s) {
    pod(uint64_t(s.size()));
    out_ += s;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T pod() {
    T v;
    need(sizeof v);
    std::memcpy(&v, in_.data() + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  template <typename T>
  std::vector<T> vec() {
    const auto n = pod<uint64_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
    if (n) std::memcpy(v.data(), in_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = pod<uint64_t>();
    need(n);
    std::string s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }

 private:
  void need(size_t n) const {
    if (pos_ + n > in_.size()) throw RuntimeError("simulation result truncated (the simulating process died?)");
  }
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace

std::string serialize(const RawRun& r) {
  Writer w;
  w.pod(r.steps);
  w.pod(uint64_t(r.records.size()));
  for (size_t i = 0; i < r.records.size(); ++i) {
    w.vec(r.records[i]);
    w.vec(r.step_start[i]);
  }
  w.vec(r.sent_bytes);
  w.vec(r.stopped);
  w.vec(r.blocked);
  w.pod(uint64_t(r.pending.size()));
  for (const auto& p : r.pending) {
    w.str(p.group);
    w.pod(p.sequence);
    w.vec(p.arrived);
    w.vec(p.ops);
    w.pod(p.mismatch);
  }
  w.pod(r.end_seconds);
  w.pod(r.messages);
  w.pod(r.flows);
  w.pod(r.closed_form_steps);
  w.pod(r.preempted_steps);
  w.pod(r.ops);
  return w.take();
}

RawRun deserialize(const std::string& bytes) {
  Reader rd(bytes);
  RawRun r;
  r.steps = rd.pod<int>();
  const auto n = rd.pod<uint64_t>();
  for (uint64_t i = 0; i < n; ++i) {
    r.records.push_back(rd.vec<OpRecord>());
    r.step_start.push_back(rd.vec<double>());
  }
  r.sent_bytes = rd.vec<double>();
  r.stopped = rd.vec<int>();
  r.blocked = rd.vec<BlockedStream>();
  const auto np = rd.pod<uint64_t>();
  for (uint64_t i = 0; i < np; ++i) {
    PendingCollective p;
    p.group = rd.str();
    p.sequence = rd.pod<int64_t>();
    p.arrived = rd.vec<int>();
    p.ops = rd.vec<int>();
    p.mismatch = rd.pod<bool>();
    r.pending.push_back(std::move(p));
  }
  r.end_seconds = rd.pod<double>();
  r.messages = rd.pod<int64_t>();
  r.flows = rd.pod<int64_t>();
  r.closed_form_steps = rd.pod<int64_t>();
  r.preempted_steps = rd.pod<int64_t>();
  r.ops = rd.pod<int64_t>();
  return r;
}

namespace {

void put(Writer& w, const std::vector<std::string>& v) {
  w.pod(uint64_t(v.size()));
  for (const auto& x : v) w.str(x);
}
std::vector<std::string> strings(Reader& rd) {
  std::vector<std::string> v(rd.pod<uint64_t>());
  for (auto& x : v) x = rd.str();
  return v;
}

void put(Writer& w, const HangReport& h) {
  w.pod(h.deadlock);
  w.pod(h.at_seconds);
  w.vec(h.stopped_ranks);
  w.vec(h.missing_ranks);
  w.pod(uint64_t(h.waiting.size()));
  for (const Waiter& x : h.waiting) {
    w.pod(x.rank), w.str(x.stream), w.pod(x.step), w.pod(x.op_id), w.str(x.op), w.str(x.tag), w.str(x.group);
    w.pod(x.call), w.vec(x.waiting_for), w.pod(x.waiting_on_op), w.pod(x.since_seconds);
  }
  put(w, h.mismatches);
  put(w, h.lines);
}
HangReport hang_of(Reader& rd) {
  HangReport h;
  h.deadlock = rd.pod<bool>();
  h.at_seconds = rd.pod<double>();
  h.stopped_ranks = rd.vec<int>();
  h.missing_ranks = rd.vec<int>();
  h.waiting.resize(rd.pod<uint64_t>());
  for (Waiter& x : h.waiting) {
    x.rank = rd.pod<int>(), x.stream = rd.str(), x.step = rd.pod<int>(), x.op_id = rd.pod<int>();
    x.op = rd.str(), x.tag = rd.str(), x.group = rd.str(), x.call = rd.pod<int>();
    x.waiting_for = rd.vec<int>(), x.waiting_on_op = rd.pod<int>(), x.since_seconds = rd.pod<double>();
  }
  h.mismatches = strings(rd);
  h.lines = strings(rd);
  return h;
}

void put(Writer& w, const std::vector<strategy::CollectiveTiming>& v) {
  w.pod(uint64_t(v.size()));
  for (const auto& c : v) {
    w.pod(c.rank), w.pod(c.op_id), w.str(c.op), w.str(c.group), w.str(c.tag), w.pod(c.bytes), w.pod(c.count);
    w.pod(c.ranks), w.pod(c.start_seconds), w.pod(c.end_seconds), w.pod(c.seconds), w.str(c.algorithm);
  }
}
std::vector<strategy::CollectiveTiming> collectives_of(Reader& rd) {
  std::vector<strategy::CollectiveTiming> v(rd.pod<uint64_t>());
  for (auto& c : v) {
    c.rank = rd.pod<int>(), c.op_id = rd.pod<int>(), c.op = rd.str(), c.group = rd.str(), c.tag = rd.str();
    c.bytes = rd.pod<double>(), c.count = rd.pod<int>(), c.ranks = rd.pod<int>();
    c.start_seconds = rd.pod<double>(), c.end_seconds = rd.pod<double>(), c.seconds = rd.pod<double>();
    c.algorithm = rd.str();
  }
  return v;
}

void put(Writer& w, const std::vector<trace::Event>& v) {
  w.pod(uint64_t(v.size()));
  for (const auto& e : v) {
    w.pod(e.rank), w.str(e.stream), w.str(e.name), w.pod(e.start_seconds), w.pod(e.end_seconds);
    w.pod(uint64_t(e.args.size()));
    for (const auto& [k, x] : e.args) w.str(k), w.str(x);
  }
}
std::vector<trace::Event> events_of(Reader& rd) {
  std::vector<trace::Event> v(rd.pod<uint64_t>());
  for (auto& e : v) {
    e.rank = rd.pod<int>(), e.stream = rd.str(), e.name = rd.str();
    e.start_seconds = rd.pod<double>(), e.end_seconds = rd.pod<double>();
    e.args.resize(rd.pod<uint64_t>());
    for (auto& [k, x] : e.args) k = rd.str(), x = rd.str();
  }
  return v;
}

}  // namespace

std::string serialize(const SimResult& r) {
  static_assert(std::is_trivially_copyable_v<strategy::RankTimes>);
  Writer w;
  w.pod(r.step_seconds);
  w.vec(r.ranks);
  put(w, r.collectives);
  for (double x : {r.bubble_fraction_of_ideal, r.bubble_fraction_of_total, r.walked_bubble_fraction, r.samples_per_s,
                   r.tokens_per_s, r.mfu})
    w.pod(x);
  w.pod(r.warmup_steps), w.pod(r.measured_steps);
  w.vec(r.step_seconds_each);
  w.vec(r.sent_bytes);
  for (int64_t x : {r.messages, r.flows, r.closed_form_steps, r.preempted_steps, r.ops}) w.pod(x);
  w.pod(r.simulated_seconds);
  put(w, r.hang);
  put(w, r.timeline);
  return w.take();
}

SimResult deserialize_result(const std::string& bytes) {
  Reader rd(bytes);
  SimResult r;
  r.step_seconds = rd.pod<double>();
  r.ranks = rd.vec<strategy::RankTimes>();
  r.collectives = collectives_of(rd);
  for (double* x : {&r.bubble_fraction_of_ideal, &r.bubble_fraction_of_total, &r.walked_bubble_fraction,
                    &r.samples_per_s, &r.tokens_per_s, &r.mfu})
    *x = rd.pod<double>();
  r.warmup_steps = rd.pod<int>(), r.measured_steps = rd.pod<int>();
  r.step_seconds_each = rd.vec<double>();
  r.sent_bytes = rd.vec<double>();
  for (int64_t* x : {&r.messages, &r.flows, &r.closed_form_steps, &r.preempted_steps, &r.ops}) *x = rd.pod<int64_t>();
  r.simulated_seconds = rd.pod<double>();
  r.hang = hang_of(rd);
  r.timeline = events_of(rd);
  return r;
}

}  // namespace parlab::sim
