#pragma once
// Flight recorder: the last `capacity` ops of one communicator, kept in a ring so that a hung or
// failed job can say what every rank was doing (PyTorch's NCCL flight recorder, in small).
// Each rank dumps its own file; `parlab analyze hang` reads every rank's dump and finds the first
// sequence number where the ranks disagree (one rank still in all-reduce #41 while the others
// completed it, or never scheduled it).
//
// Dump format (JSON, version 1):
//   { "version": 1, "backend": "gloo", "group": "dp.0", "rank": 2, "world_size": 4,
//     "group_rank": 1, "group_size": 2, "capacity": 256, "dropped": 0, "dumped_seconds": 1.7e9,
//     "entries": [ { "seq": 41, "op": "all-reduce", "group": "dp.0", "bytes": 12600000,
//                    "tag": "grad.bucket3", "peer": -1, "state": "timed_out",
//                    "start_seconds": 1.7e9, "end_seconds": 1.7e9, "error": "..." }, ... ] }
// Entries are oldest first; times are wall-clock seconds since the Unix epoch (comparable across
// ranks on NTP-synchronised hosts), null while not reached. "dumped_seconds" (optional) is when
// the snapshot was taken: an op still running then had been waiting since its start.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/errors.h"

namespace parlab::comm {

enum class OpState { kScheduled, kStarted, kCompleted, kFailed, kTimedOut };
std::string_view to_string(OpState state);      // "scheduled", "started", "completed", ...
OpState parse_op_state(std::string_view text);  // throws ConfigError

struct FlightRecord {
  std::uint64_t seq = 0;
  OpKind op = OpKind::kBarrier;
  std::string group;
  double bytes = 0;
  std::string tag;
  int peer = -1;
  OpState state = OpState::kScheduled;
  std::optional<double> start_seconds, end_seconds;  // wall clock, seconds since epoch
  std::string error;                                 // set when failed or timed out
};

// Who wrote a dump.
struct RecorderIdentity {
  std::string backend;
  std::string group;
  int rank = 0;  // world rank
  int world_size = 1;
  int group_rank = 0;
  int group_size = 1;
};

struct FlightRecorderDump {
  RecorderIdentity identity;
  std::size_t capacity = 0;
  std::uint64_t dropped = 0;             // entries overwritten by the ring before this dump
  std::vector<FlightRecord> entries;     // oldest first
  std::optional<double> dumped_seconds;  // wall clock of the snapshot (absent in older dumps)
};

inline constexpr std::size_t kDefaultFlightRecorderCapacity = 256;

// Thread-safe: the issuing thread records, the communication thread updates, anyone may dump.
class FlightRecorder {
 public:
  explicit FlightRecorder(RecorderIdentity identity, std::size_t capacity = kDefaultFlightRecorderCapacity);

  // Appends an entry in state `scheduled`; returns its id for later updates. When the ring is
  // full the oldest entry is overwritten.
  std::uint64_t record(const OpInfo& info);
  void started(std::uint64_t id);
  // `state` is completed, failed or timed_out; `error` says why for the last two.
  void ended(std::uint64_t id, OpState state, const std::string& error = "");

  FlightRecorderDump snapshot() const;
  std::string to_json() const;
  // Atomic: writes `path`.tmp.<pid>.<n> then renames over `path`. Throws RuntimeError.
  void dump(const std::filesystem::path& path) const;
  // Reads a dump written by dump(); throws RuntimeError (unreadable) or ConfigError (malformed).
  static FlightRecorderDump load(const std::filesystem::path& path);
  static FlightRecorderDump from_json(const std::string& text);

  const RecorderIdentity& identity() const { return identity_; }
  std::size_t capacity() const { return slots_.size(); }

 private:
  struct Slot {
    std::uint64_t id = 0;  // 0: empty; ids start at 1
    FlightRecord record;
  };
  Slot* find(std::uint64_t id);  // null once the ring overwrote it

  const RecorderIdentity identity_;
  mutable std::mutex mu_;
  std::vector<Slot> slots_;
  std::uint64_t next_id_ = 1;
};

// Seconds since the Unix epoch, as a double (microsecond resolution is plenty for ordering).
double wall_clock_seconds();

}  // namespace parlab::comm
