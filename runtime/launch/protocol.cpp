#include "runtime/launch/protocol.h"

#include <array>
#include <utility>

#include "base/errors.h"

namespace parlab::launch::protocol {

using nlohmann::json;

namespace {

constexpr std::array<std::pair<MessageType, std::string_view>, 9> kTypes{{
    {MessageType::kStarted, "started"},
    {MessageType::kResume, "resume"},
    {MessageType::kStep, "step"},
    {MessageType::kCheckpoint, "checkpoint"},
    {MessageType::kFault, "fault"},
    {MessageType::kFinal, "final"},
    {MessageType::kMemory, "memory"},
    {MessageType::kExport, "export"},
    {MessageType::kError, "error"},
}};

constexpr std::string_view kHangKind = "hang";  // an error's "kind" when it is a hang

std::string allowed_types() {
  std::string s = "one of";
  for (const auto& [t, name] : kTypes) s += std::string(s.size() == 6 ? " " : ", ") + std::string(name);
  return s;
}

std::string excerpt(const json& j) {
  const std::string s = j.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

// Reads the fields of one message; a field of the wrong JSON type is a ConfigError naming the
// message and the key, a missing one keeps its default (optional) or is one too (required).
class Reader {
 public:
  Reader(const json& j, MessageType type) : Reader(j, to_string(type)) {}
  Reader(const json& j, std::string_view name) : j_(j), name_(name) {
    if (!j.is_object()) throw ConfigError("worker message", excerpt(j), "must be a JSON object");
  }
  template <class T>
  void optional(const char* key, T& out) const {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return;
    try {
      it->get_to(out);
    } catch (const json::exception& e) {
      throw bad(key, e.what());
    }
  }
  template <class T>
  void optional(const char* key, std::optional<T>& out) const {
    if (!has(key)) return;
    T v{};
    optional(key, v);
    out = std::move(v);
  }
  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const json& required(const char* key) const {
    if (!has(key)) throw ConfigError(field(key), "(missing)", "is required");
    return j_.at(key);
  }
  ConfigError bad(const char* key, const std::string& why) const {
    return ConfigError(field(key), j_.contains(key) ? excerpt(j_.at(key)) : "(missing)", why);
  }

 private:
  std::string field(const char* key) const { return "worker message '" + std::string(name_) + "'." + key; }
  const json& j_;
  std::string_view name_;
};

// "type", "rank", "seconds": what every line starts with.
json start(MessageType type, const Header& from) {
  json j = from;
  j["type"] = std::string(to_string(type));
  return j;
}

void read_header(const json& j, std::string_view name, Header& from) {
  const Reader r(j, name);
  r.optional("rank", from.rank);
  r.optional("seconds", from.seconds);
}
void read_header(const json& j, MessageType type, Header& from) { read_header(j, to_string(type), from); }

FaultKind parse_fault_kind(const Reader& r, const std::string& name) {
  for (int k = 0; k <= static_cast<int>(FaultKind::kExit); ++k)
    if (name == fault_kind_name(static_cast<FaultKind>(k))) return static_cast<FaultKind>(k);
  throw r.bad("kind", "not a fault kind (faults.h)");
}

}  // namespace

std::string_view to_string(MessageType type) {
  for (const auto& [t, name] : kTypes)
    if (t == type) return name;
  return "?";
}

MessageType parse_message_type(std::string_view text) {
  for (const auto& [t, name] : kTypes)
    if (name == text) return t;
  throw ConfigError("worker message.type", "'" + std::string(text) + "'", allowed_types());
}

MessageType type_of(const json& line) {
  const auto it = line.is_object() ? line.find("type") : line.end();
  if (!line.is_object() || it == line.end()) throw ConfigError("worker message.type", "(missing)", allowed_types());
  if (!it->is_string()) throw ConfigError("worker message.type", excerpt(*it), allowed_types());
  return parse_message_type(it->get<std::string>());
}

void to_json(json& j, const Header& m) { j = {{"rank", m.rank}, {"seconds", m.seconds}}; }
void from_json(const json& j, Header& m) { read_header(j, "header", m); }

void to_json(json& j, const Started& m) {
  j = start(MessageType::kStarted, m.from);
  j["world"] = m.world;
  j["attempt"] = m.attempt;
  j["pid"] = m.pid;
  j["comms"] = m.comms;
}
void from_json(const json& j, Started& m) {
  const Reader r(j, MessageType::kStarted);
  read_header(j, MessageType::kStarted, m.from);
  r.optional("world", m.world);
  r.optional("attempt", m.attempt);
  r.optional("pid", m.pid);
  r.optional("comms", m.comms);
}

void to_json(json& j, const SkippedCheckpoint& m) { j = {{"step", m.step}, {"path", m.path}, {"reason", m.reason}}; }
void from_json(const json& j, SkippedCheckpoint& m) {
  const Reader r(j, MessageType::kResume);
  r.optional("step", m.step);
  r.optional("path", m.path);
  r.optional("reason", m.reason);
}

void to_json(json& j, const Resume& m) {
  j = start(MessageType::kResume, m.from);
  j["step"] = m.step;
  j["resumed"] = m.resumed;
  j["summary"] = m.summary;
  j["path"] = m.path;
  j["skipped"] = m.skipped;
  j["written_by_world"] = m.written_by_world;
  j["load_seconds"] = m.load_seconds;
}
void from_json(const json& j, Resume& m) {
  const Reader r(j, MessageType::kResume);
  read_header(j, MessageType::kResume, m.from);
  r.optional("step", m.step);
  r.optional("resumed", m.resumed);
  r.optional("summary", m.summary);
  r.optional("path", m.path);
  r.optional("skipped", m.skipped);
  r.optional("written_by_world", m.written_by_world);
  r.optional("load_seconds", m.load_seconds);
}

json to_json(const checkpoint::SaveTimings& t) {
  return {{"prepare_seconds", t.prepare_seconds},         {"shard_write_seconds", t.shard_write_seconds},
          {"shard_fsync_seconds", t.shard_fsync_seconds}, {"gather_seconds", t.gather_seconds},
          {"manifest_seconds", t.manifest_seconds},       {"commit_seconds", t.commit_seconds},
          {"retention_seconds", t.retention_seconds},     {"total_seconds", t.total_seconds}};
}

void to_json(json& j, const Checkpoint& m) {
  j = start(MessageType::kCheckpoint, m.from);
  j["step"] = m.step;
  j["path"] = m.path;
  j["bytes"] = m.bytes;
  j["checksum"] = m.checksum;
  j["save_seconds"] = m.save_seconds;
  j["timings"] = to_json(m.timings);
}
void from_json(const json& j, Checkpoint& m) {
  const Reader r(j, MessageType::kCheckpoint);
  read_header(j, MessageType::kCheckpoint, m.from);
  r.optional("step", m.step);
  r.optional("path", m.path);
  r.optional("bytes", m.bytes);
  r.optional("checksum", m.checksum);
  r.optional("save_seconds", m.save_seconds);
  if (!r.has("timings")) return;
  const Reader t(r.required("timings"), MessageType::kCheckpoint);
  checkpoint::SaveTimings& x = m.timings;
  t.optional("prepare_seconds", x.prepare_seconds);
  t.optional("shard_write_seconds", x.shard_write_seconds);
  t.optional("shard_fsync_seconds", x.shard_fsync_seconds);
  t.optional("gather_seconds", x.gather_seconds);
  t.optional("manifest_seconds", x.manifest_seconds);
  t.optional("commit_seconds", x.commit_seconds);
  t.optional("retention_seconds", x.retention_seconds);
  t.optional("total_seconds", x.total_seconds);
}

void to_json(json& j, const Fault& m) {
  j = start(MessageType::kFault, m.from);
  j["kind"] = fault_kind_name(m.kind);
  j["step"] = m.step;
  j["spec"] = m.spec;
  j["lost"] = m.lost;
  if (m.file) j["file"] = *m.file;
  if (m.offset) j["offset"] = *m.offset;
}
void from_json(const json& j, Fault& m) {
  const Reader r(j, MessageType::kFault);
  read_header(j, MessageType::kFault, m.from);
  std::string kind;
  r.optional("kind", kind);
  m.kind = parse_fault_kind(r, kind);
  r.optional("step", m.step);
  r.optional("spec", m.spec);
  r.optional("lost", m.lost);
  r.optional("file", m.file);
  r.optional("offset", m.offset);
}

void to_json(json& j, const Final& m) {
  j = start(MessageType::kFinal, m.from);
  j["state"] = m.state.to_json();
}
void from_json(const json& j, Final& m) {
  const Reader r(j, MessageType::kFinal);
  read_header(j, MessageType::kFinal, m.from);
  m.state = train::StateFingerprint::from_json(r.required("state"));
}

void to_json(json& j, const Memory& m) {
  j = start(MessageType::kMemory, m.from);
  j["report"] = m.report.to_json();
}
void from_json(const json& j, Memory& m) {
  const Reader r(j, MessageType::kMemory);
  read_header(j, MessageType::kMemory, m.from);
  m.report = train::MemoryReport::from_json(r.required("report"));
}

void to_json(json& j, const Export& m) {
  j = start(MessageType::kExport, m.from);
  j["path"] = m.path;
  j["bytes"] = m.bytes;
}
void from_json(const json& j, Export& m) {
  const Reader r(j, MessageType::kExport);
  read_header(j, MessageType::kExport, m.from);
  r.optional("path", m.path);
  r.optional("bytes", m.bytes);
}

// A hang's fields sit beside the error's own ("kind": "hang", "detector", "op", ...): the wire
// of the workers and of the tests' fake workers.
void to_json(json& j, const Error& m) {
  j = start(MessageType::kError, m.from);
  j["comm"] = m.comm;
  j["fatal"] = m.fatal;
  j["message"] = m.message;
  if (!m.hang) return;
  const Hang& h = *m.hang;
  j["kind"] = std::string(kHangKind);
  if (!h.detector.empty()) j["detector"] = h.detector;
  if (h.silent) j["silent"] = true;
  if (!h.collective) return;
  const TimedOutCollective& c = *h.collective;
  j["op"] = c.op;
  j["seq"] = c.seq;
  j["group"] = c.group;
  j["tag"] = c.tag;
  j["bytes"] = c.bytes;
  j["collective"] = c.collective;
  j["timeout_seconds"] = c.timeout_seconds;
}
void from_json(const json& j, Error& m) {
  const Reader r(j, MessageType::kError);
  read_header(j, MessageType::kError, m.from);
  r.optional("comm", m.comm);
  r.optional("fatal", m.fatal);
  r.optional("message", m.message);
  std::string kind;
  r.optional("kind", kind);
  if (kind.empty()) return;
  if (kind != kHangKind) throw r.bad("kind", "an error's kind is '" + std::string(kHangKind) + "' or absent");
  Hang h;
  r.optional("detector", h.detector);
  r.optional("silent", h.silent);
  if (r.has("op")) {
    TimedOutCollective c;
    r.optional("op", c.op);
    r.optional("seq", c.seq);
    r.optional("group", c.group);
    r.optional("tag", c.tag);
    r.optional("bytes", c.bytes);
    r.optional("collective", c.collective);
    r.optional("timeout_seconds", c.timeout_seconds);
    h.collective = std::move(c);
  }
  m.hang = std::move(h);
}

MessageType type_of(const Message& m) {
  // The variant's alternatives are in MessageType's order.
  return static_cast<MessageType>(m.index());
}
static_assert(std::variant_size_v<Message> == kTypes.size());

json encode(const Message& m) {
  return std::visit(
      [](const auto& x) -> json {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, train::StepRecord>)
          return train::to_json(x, false);
        else
          return json(x);
      },
      m);
}

Message decode(const json& line) {
  switch (type_of(line)) {
    case MessageType::kStarted:
      return line.get<Started>();
    case MessageType::kResume:
      return line.get<Resume>();
    case MessageType::kStep:
      return train::step_record_from_json(line);
    case MessageType::kCheckpoint:
      return line.get<Checkpoint>();
    case MessageType::kFault:
      return line.get<Fault>();
    case MessageType::kFinal:
      return line.get<Final>();
    case MessageType::kMemory:
      return line.get<Memory>();
    case MessageType::kExport:
      return line.get<Export>();
    case MessageType::kError:
      return line.get<Error>();
  }
  throw ConfigError("worker message.type", excerpt(line), allowed_types());  // not reached
}

}  // namespace parlab::launch::protocol
