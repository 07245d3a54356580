#include "runtime/comm/flight_recorder.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

namespace parlab::comm {
namespace {

using nlohmann::json;

constexpr int kDumpVersion = 1;

json to_json_value(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> optional_double(const json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<double>();
}

json record_to_json(const FlightRecord& r) {
  return json{{"seq", r.seq},
              {"op", std::string(to_string(r.op))},
              {"group", r.group},
              {"bytes", r.bytes},
              {"tag", r.tag},
              {"peer", r.peer},
              {"state", std::string(to_string(r.state))},
              {"start_seconds", to_json_value(r.start_seconds)},
              {"end_seconds", to_json_value(r.end_seconds)},
              {"error", r.error}};
}

FlightRecord record_from_json(const json& j) {
  FlightRecord r;
  r.seq = j.at("seq").get<std::uint64_t>();
  r.op = parse_op_kind(j.at("op").get<std::string>());
  r.group = j.at("group").get<std::string>();
  r.bytes = j.at("bytes").get<double>();
  r.tag = j.value("tag", "");
  r.peer = j.value("peer", -1);
  r.state = parse_op_state(j.at("state").get<std::string>());
  r.start_seconds = optional_double(j, "start_seconds");
  r.end_seconds = optional_double(j, "end_seconds");
  r.error = j.value("error", "");
  return r;
}

}  // namespace

double wall_clock_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string_view to_string(OpState state) {
  switch (state) {
    case OpState::kScheduled:
      return "scheduled";
    case OpState::kStarted:
      return "started";
    case OpState::kCompleted:
      return "completed";
    case OpState::kFailed:
      return "failed";
    case OpState::kTimedOut:
      return "timed_out";
  }
  return "?";
}

OpState parse_op_state(std::string_view text) {
  for (OpState s :
       {OpState::kScheduled, OpState::kStarted, OpState::kCompleted, OpState::kFailed, OpState::kTimedOut}) {
    if (to_string(s) == text) return s;
  }
  throw ConfigError("flight_recorder.entries.state", std::string(text),
                    "one of scheduled, started, completed, failed, timed_out");
}

FlightRecorder::FlightRecorder(RecorderIdentity identity, std::size_t capacity) : identity_(std::move(identity)) {
  if (capacity == 0) {
    throw ConfigError("flight_recorder.capacity", "0", "must be at least 1");
  }
  slots_.resize(capacity);
}

FlightRecorder::Slot* FlightRecorder::find(std::uint64_t id) {
  Slot& s = slots_[id % slots_.size()];
  return s.id == id ? &s : nullptr;
}

std::uint64_t FlightRecorder::record(const OpInfo& info) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_id_++;
  Slot& s = slots_[id % slots_.size()];
  s.id = id;
  s.record =
      FlightRecord{info.seq, info.op, info.group, info.bytes, info.tag, info.peer, OpState::kScheduled, {}, {}, {}};
  return id;
}

void FlightRecorder::started(std::uint64_t id) {
  std::lock_guard lock(mu_);
  if (Slot* s = find(id)) {
    s->record.state = OpState::kStarted;
    s->record.start_seconds = wall_clock_seconds();
  }
}

void FlightRecorder::ended(std::uint64_t id, OpState state, const std::string& error) {
  std::lock_guard lock(mu_);
  if (Slot* s = find(id)) {
    s->record.state = state;
    s->record.end_seconds = wall_clock_seconds();
    s->record.error = error;
  }
}

FlightRecorderDump FlightRecorder::snapshot() const {
  std::lock_guard lock(mu_);
  FlightRecorderDump d;
  d.identity = identity_;
  d.capacity = slots_.size();
  d.dumped_seconds = wall_clock_seconds();
  const std::uint64_t recorded = next_id_ - 1;
  d.dropped = recorded > slots_.size() ? recorded - slots_.size() : 0;
  // Oldest surviving id is dropped + 1; walk the ring from there.
  for (std::uint64_t id = d.dropped + 1; id <= recorded; ++id) {
    d.entries.push_back(slots_[id % slots_.size()].record);
  }
  return d;
}

std::string FlightRecorder::to_json() const {
  const FlightRecorderDump d = snapshot();
  json entries = json::array();
  for (const FlightRecord& r : d.entries) entries.push_back(record_to_json(r));
  const RecorderIdentity& id = d.identity;
  json j{{"version", kDumpVersion},
         {"backend", id.backend},
         {"group", id.group},
         {"rank", id.rank},
         {"world_size", id.world_size},
         {"group_rank", id.group_rank},
         {"group_size", id.group_size},
         {"capacity", d.capacity},
         {"dropped", d.dropped},
         {"dumped_seconds", to_json_value(d.dumped_seconds)},
         {"entries", std::move(entries)}};
  return j.dump(1);
}

void FlightRecorder::dump(const std::filesystem::path& path) const {
  const std::string text = to_json();
  // Unique per call: a failing op's own dump and a dump on SIGTERM may run at once in one process.
  static std::atomic<std::uint64_t> calls{0};
  std::filesystem::path tmp = path;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls.fetch_add(1));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {
      throw RuntimeError("flight recorder: cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw RuntimeError("flight recorder: cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
}

FlightRecorderDump FlightRecorder::load(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("flight recorder: cannot read " + path.string());
  std::stringstream text;
  text << in.rdbuf();
  return from_json(text.str());
}

FlightRecorderDump FlightRecorder::from_json(const std::string& text) {
  try {
    const json j = json::parse(text);
    const int version = j.at("version").get<int>();
    if (version != kDumpVersion) {
      throw ConfigError("flight_recorder.version", std::to_string(version),
                        "this parlab reads version " + std::to_string(kDumpVersion));
    }
    FlightRecorderDump d;
    d.identity = RecorderIdentity{
        j.at("backend").get<std::string>(), j.at("group").get<std::string>(), j.at("rank").get<int>(),
        j.at("world_size").get<int>(),      j.at("group_rank").get<int>(),    j.at("group_size").get<int>()};
    d.capacity = j.at("capacity").get<std::size_t>();
    d.dropped = j.at("dropped").get<std::uint64_t>();
    d.dumped_seconds = optional_double(j, "dumped_seconds");
    for (const json& e : j.at("entries")) d.entries.push_back(record_from_json(e));
    return d;
  } catch (const json::exception& e) {
    throw ConfigError("flight_recorder", "<dump>", std::string("not a valid dump: ") + e.what());
  }
}

}  // namespace parlab::comm
