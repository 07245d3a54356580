// RawRun as bytes and back: the pipe between the simulating child and its parent (same binary,
// same machine, so native layouts are fine).
#include <cstring>

#include "sim/executor.h"
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

}  // namespace parlab::sim
