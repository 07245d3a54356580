#pragma once
// Typed failures of the communication layer. Every message names the op the way a person
// debugging a hang needs it: which collective, its sequence number on this communicator, the
// group, the bytes and the tag, e.g.
//   "all-reduce #41 (tag grad.bucket3, 12.6 MB, group dp.0) did not complete within 30.0 s"
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/errors.h"

namespace parlab::comm {

// What a communicator can be asked to do. Names print as in nccl-tests ("all-reduce").
enum class OpKind { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kSend, kRecv, kBarrier };

std::string_view to_string(OpKind op);
// Inverse of to_string (used when flight-recorder dumps are read back); throws ConfigError.
OpKind parse_op_kind(std::string_view text);
inline bool is_point_to_point(OpKind op) { return op == OpKind::kSend || op == OpKind::kRecv; }

// Identity of one issued op. `seq` counts collectives on one communicator (0, 1, 2, ... in issue
// order, identical on every member, so ranks can be compared op by op); for send/recv it counts
// the messages of that direction with that peer, so send #k on A matches recv #k on B.
struct OpInfo {
  OpKind op = OpKind::kBarrier;
  std::uint64_t seq = 0;
  std::string group;
  double bytes = 0;
  std::string tag;
  int peer = -1;  // group rank of the other side for send/recv; -1 for collectives
  std::chrono::milliseconds timeout{0};

  // "all-reduce #41 (tag grad.bucket3, 12.6 MB, group dp.0)"; send/recv add "to/from rank 3".
  std::string describe() const;
};

// An op failed (a peer closed its connection, Gloo reported an error, ...).
class CollectiveError : public RuntimeError {
 public:
  CollectiveError(OpInfo info, const std::string& message);
  const OpInfo& info() const { return info_; }
  OpKind op() const { return info_.op; }
  std::uint64_t seq() const { return info_.seq; }
  const std::string& group() const { return info_.group; }
  double bytes() const { return info_.bytes; }
  const std::string& tag() const { return info_.tag; }

 private:
  OpInfo info_;
};

// An op made no progress within its timeout (or a caller's Work::wait(timeout) ran out).
// Never a silent hang: this is what a rank whose peer never joined gets.
class CollectiveTimeout : public CollectiveError {
 public:
  CollectiveTimeout(OpInfo info, double timeout_seconds, const std::string& detail = "");
  double timeout_seconds() const { return timeout_seconds_; }

 private:
  double timeout_seconds_;
};

// Thrown when an op is issued on (or was queued behind a failure of) a communicator that is no
// longer usable. After a timeout the peers' Gloo state is unknown, so every later op fails fast
// with the first failure as its reason; recovery means a new communicator (a restarted job).
class CommunicatorAborted : public RuntimeError {
 public:
  CommunicatorAborted(std::string group, std::string reason);
  const std::string& group() const { return group_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string group_, reason_;
};

// The backend cannot run this op ("backend nccl does not support recv on group tp.0").
class UnsupportedOperation : public RuntimeError {
 public:
  UnsupportedOperation(std::string backend, std::string op, const std::string& group);
  const std::string& backend() const { return backend_; }
  const std::string& op() const { return op_; }

 private:
  std::string backend_, op_;
};

// Ranks could not find each other: a store timed out, or a rank never joined.
class RendezvousError : public RuntimeError {
 public:
  RendezvousError(const std::string& message, bool timed_out) : RuntimeError(message), timed_out_(timed_out) {}
  bool timed_out() const { return timed_out_; }

 private:
  bool timed_out_;
};

}  // namespace parlab::comm
