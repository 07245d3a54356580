#pragma once
// The worker -> supervisor protocol: what a rank appends to <run_dir>/rank-<r>.jsonl, one JSON
// object per line, told apart by its "type". One struct per message with its to_json/from_json
// (nlohmann's ADL pair: `json j = msg;`, `j.get<Checkpoint>()`); the keys are spelled here and
// nowhere else. The worker writes them (worker.cpp), the supervisor reads "error" and "step"
// (supervisor.cpp), the job runner the rest (run_training.cpp).
//
//   type        struct       written by               what it says
//   started     Started      every rank, connected    world, attempt, pid, group -> backend
//   resume      Resume       every rank, state loaded the step resumed from, the checkpoints skipped
//   step        StepRecord   every rank, every step   runtime/train/telemetry.h (its own to_json)
//   checkpoint  Checkpoint   rank 0, each commit      path, bytes, checksum, save timings
//   fault       Fault        the faulty rank          an injected fault is about to act
//   final       Final        rank 0, at the end       the state fingerprint
//   memory      Memory       every rank, at the end   the memory report (peak by category)
//   export      Export       rank 0, after --export   the safetensors file written
//   error       Error        a failing rank, last     what failed; a collective timeout's Hang
//
// Every line carries the writer's rank and the wall clock it was written at ("rank", "seconds":
// seconds since the Unix epoch, the clock the supervisor shares), filled by the writer: the
// Header. Reading is lenient where the wire always was (a missing field takes its default, so
// test doubles may write the few keys they need); a "type" this file does not name, or a field
// of the wrong JSON type, is a ConfigError that names the message, the key and the value.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/checkpoint/save.h"
#include "runtime/launch/faults.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/telemetry.h"
#include "runtime/train/trainer_checkpoint.h"

namespace parlab::launch::protocol {

enum class MessageType { kStarted, kResume, kStep, kCheckpoint, kFault, kFinal, kMemory, kExport, kError };

// The "type" spellings ("started", ..., "error") and back; parse throws ConfigError listing them.
std::string_view to_string(MessageType type);
MessageType parse_message_type(std::string_view text);
// The "type" of a line (ConfigError when it has none or one not listed above).
MessageType type_of(const nlohmann::json& line);

// Who wrote a line and when.
struct Header {
  int rank = -1;
  double seconds = 0;
};

struct Started {
  Header from{};
  int world = 0;
  int attempt = 0;
  int64_t pid = 0;
  std::map<std::string, std::string> comms{};  // group -> backend ({"world": "shm", ...})
};

struct SkippedCheckpoint {
  int64_t step = 0;
  std::string path{};
  std::string reason{};
};

struct Resume {
  Header from{};
  int64_t step = 0;       // the step training continues from (0: fresh)
  bool resumed = false;   // loaded from a checkpoint
  std::string summary{};  // "resumed from step 3 (<path>)" or "no checkpoint: starting fresh"
  std::string path{};     // the checkpoint loaded ("" when none)
  std::vector<SkippedCheckpoint> skipped{};
  int written_by_world = 0;
  double load_seconds = 0;
};

struct Checkpoint {
  Header from{};
  int64_t step = 0;
  std::string path{};
  uint64_t bytes = 0;
  std::string checksum{};  // "xxh3_64:<hash of manifest.json>"
  double save_seconds = 0;
  checkpoint::SaveTimings timings{};  // rank 0's
};

struct Fault {
  Header from{};
  FaultKind kind = FaultKind::kKill;
  int64_t step = 0;
  std::string spec{};  // FaultSpec::to_string()
  bool lost = false;   // lose-rank: the device is gone with the process
  // corrupt-checkpoint: the byte flipped.
  std::optional<std::string> file{};
  std::optional<uint64_t> offset{};
};

struct Final {
  Header from{};
  train::StateFingerprint state{};
};

struct Memory {
  Header from{};
  train::MemoryReport report{};
};

struct Export {
  Header from{};
  std::string path{};
  uint64_t bytes = 0;
};

// A collective that did not complete in time, as the rank that waited saw it.
struct TimedOutCollective {
  std::string op{};  // comm::to_string(OpKind): "all-reduce", ...
  uint64_t seq = 0;
  std::string group{}, tag{};
  double bytes = 0;          // as comm::OpInfo counts them
  std::string collective{};  // CollectiveInfo::describe()
  double timeout_seconds = 0;
};

// Why an error is a hang ("kind": "hang" on the wire): the detector that fired, whether the rank
// was named for its silence (the supervisor's own verdict), the collective when one timed out.
struct Hang {
  std::string detector{};  // kCollectiveTimeoutDetector, kHeartbeatDetector; "" when not said
  bool silent = false;
  std::optional<TimedOutCollective> collective{};
};

struct Error {
  Header from{};
  bool comm = false;   // a communication failure: probably a consequence of another rank's
  bool fatal = false;  // a configuration error, which a restart cannot fix
  std::string message{};
  std::optional<Hang> hang{};
};

void to_json(nlohmann::json& j, const Header& m);
void from_json(const nlohmann::json& j, Header& m);
void to_json(nlohmann::json& j, const Started& m);
void from_json(const nlohmann::json& j, Started& m);
void to_json(nlohmann::json& j, const SkippedCheckpoint& m);
void from_json(const nlohmann::json& j, SkippedCheckpoint& m);
void to_json(nlohmann::json& j, const Resume& m);
void from_json(const nlohmann::json& j, Resume& m);
void to_json(nlohmann::json& j, const Checkpoint& m);
void from_json(const nlohmann::json& j, Checkpoint& m);
void to_json(nlohmann::json& j, const Fault& m);
void from_json(const nlohmann::json& j, Fault& m);
void to_json(nlohmann::json& j, const Final& m);
void from_json(const nlohmann::json& j, Final& m);
void to_json(nlohmann::json& j, const Memory& m);
void from_json(const nlohmann::json& j, Memory& m);
void to_json(nlohmann::json& j, const Export& m);
void from_json(const nlohmann::json& j, Export& m);
void to_json(nlohmann::json& j, const Error& m);
void from_json(const nlohmann::json& j, Error& m);
// The save timings as the "timings" object of a checkpoint line (CheckpointReport keeps it).
nlohmann::json to_json(const checkpoint::SaveTimings& t);

// Any message; the step record is telemetry's (it writes its own lines).
using Message = std::variant<Started, Resume, train::StepRecord, Checkpoint, Fault, Final, Memory, Export, Error>;

MessageType type_of(const Message& m);
nlohmann::json encode(const Message& m);
// Reads any line; throws ConfigError on an unknown type or a malformed field (see above).
Message decode(const nlohmann::json& line);

}  // namespace parlab::launch::protocol
