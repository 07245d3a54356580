// The worker -> supervisor protocol (runtime/launch/protocol.h) and the incident kinds
// (runtime/launch/incident_kind.h): every message type survives JSON and keeps the wire's keys
// (what the supervisor, the job runner, the tests' fake worker and scripts read); every incident
// kind reaches the results database as itself and reads back equal; an unknown type or kind is a
// ConfigError that names it.
#include "runtime/launch/protocol.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "base/errors.h"
#include "db/results_store.h"
#include "db/sqlite.h"
#include "record/run_recorder.h"
#include "runtime/launch/incident_kind.h"
#include "runtime/launch/run_training.h"
#include "tests/support/scratch_dir.h"

namespace parlab::launch::protocol {
namespace {

using nlohmann::json;

// One message of each type, every field set to something other than its default.
std::vector<Message> one_of_each() {
  const Header h{.rank = 3, .seconds = 1700000000.25};
  train::StepRecord step;
  step.rank = 3;
  step.world = 4;
  step.step = 7;
  step.global_batch = 16;
  step.samples = 4;
  step.loss_sum = 9.5;
  step.times.step_seconds = 0.5;
  step.end_seconds = 1700000001.0;
  checkpoint::SaveTimings timings{.prepare_seconds = 0.1,
                                  .shard_write_seconds = 0.2,
                                  .shard_fsync_seconds = 0.3,
                                  .gather_seconds = 0.4,
                                  .manifest_seconds = 0.5,
                                  .commit_seconds = 0.6,
                                  .retention_seconds = 0.7,
                                  .total_seconds = 2.8};
  train::StateFingerprint state;
  state.step = 8;
  state.optimizer_step = 8;
  state.tensors = {{"fc1.weight", 0x1234}, {"fc1.bias", 0x5678}};
  state.combined = 0xabcdef;
  train::MemoryReport memory;
  memory.rank = 3;
  memory.measured_peak_bytes[0] = 1024;
  memory.ledger_bytes[0] = 1000;
  memory.measured_peak_total_bytes = 4096;
  memory.resident_peak_bytes = 1 << 20;
  return {
      Started{.from = h, .world = 4, .attempt = 1, .pid = 4242, .comms = {{"world", "shm"}, {"p2p.0>1", "gloo"}}},
      Resume{.from = h,
             .step = 6,
             .resumed = true,
             .summary = "resumed from step 6 (ckpt/step-000006)",
             .path = "ckpt/step-000006",
             .skipped = {{9, "ckpt/step-000009", "incomplete: no manifest"}},
             .written_by_world = 2,
             .load_seconds = 0.75},
      step,
      Checkpoint{.from = h,
                 .step = 6,
                 .path = "ckpt/step-000006",
                 .bytes = 123456,
                 .checksum = "xxh3_64:00ff",
                 .save_seconds = 2.8,
                 .timings = timings},
      Fault{.from = h,
            .kind = FaultKind::kCorruptCheckpoint,
            .step = 6,
            .spec = "corrupt-checkpoint:step=6,shard=0",
            .lost = false,
            .file = "ckpt/step-000006/shard-0.safetensors",
            .offset = 77},
      Final{.from = h, .state = state},
      Memory{.from = h, .report = memory},
      Export{.from = h, .path = "model.safetensors", .bytes = 999},
      Error{.from = h,
            .comm = true,
            .fatal = false,
            .message = "all-reduce #7 did not complete within 2.00 s",
            .hang = Hang{.detector = "collective-timeout",
                         .silent = false,
                         .collective = TimedOutCollective{.op = "all-reduce",
                                                          .seq = 7,
                                                          .group = "world",
                                                          .tag = "s5/grad.bucket0",
                                                          .bytes = 12582912,
                                                          .collective = "all-reduce #7 (s5/grad.bucket0)",
                                                          .timeout_seconds = 2}}},
  };
}

std::set<std::string> keys_of(const json& j) {
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  return keys;
}

TEST(ProtocolTest, EveryMessageTypeRoundTripsThroughJson) {
  const std::vector<Message> messages = one_of_each();
  std::set<MessageType> seen;
  for (const Message& m : messages) {
    const json wire = encode(m);
    const std::string type = wire.at("type").get<std::string>();
    SCOPED_TRACE(type);
    EXPECT_EQ(type, to_string(type_of(m)));
    EXPECT_EQ(parse_message_type(type), type_of(m));
    // Through text, as the records file carries it.
    const Message back = decode(json::parse(wire.dump()));
    EXPECT_EQ(type_of(back), type_of(m));
    EXPECT_EQ(encode(back), wire);
    seen.insert(type_of(m));
  }
  EXPECT_EQ(seen.size(), std::variant_size_v<Message>);  // every type once
  // The typed fields themselves, where the structs compare.
  const Started started = std::get<Started>(decode(encode(messages[0])));
  EXPECT_EQ(started.from.rank, 3);
  EXPECT_DOUBLE_EQ(started.from.seconds, 1700000000.25);
  EXPECT_EQ(started.comms.at("p2p.0>1"), "gloo");
  const Resume resume = std::get<Resume>(decode(encode(messages[1])));
  ASSERT_EQ(resume.skipped.size(), 1u);
  EXPECT_EQ(resume.skipped[0].reason, "incomplete: no manifest");
  const Checkpoint ckpt = std::get<Checkpoint>(decode(encode(messages[3])));
  EXPECT_DOUBLE_EQ(ckpt.timings.retention_seconds, 0.7);
  EXPECT_EQ(ckpt.bytes, 123456u);
  const Fault fault = std::get<Fault>(decode(encode(messages[4])));
  EXPECT_EQ(fault.kind, FaultKind::kCorruptCheckpoint);
  EXPECT_EQ(fault.offset, 77u);
  EXPECT_EQ(std::get<Final>(decode(encode(messages[5]))).state.combined, 0xabcdefu);
  EXPECT_EQ(std::get<Memory>(decode(encode(messages[6]))).report.measured_peak_total_bytes, 4096);
  const Error error = std::get<Error>(decode(encode(messages[8])));
  ASSERT_TRUE(error.hang && error.hang->collective);
  EXPECT_EQ(error.hang->collective->tag, "s5/grad.bucket0");
  EXPECT_EQ(error.hang->collective->seq, 7u);
  EXPECT_TRUE(error.comm);
}

// The keys each line had before the protocol was typed (worker.h documents them): readers that
// are not C++ (scripts/slurm-check.sh, people with jq) and older run directories depend on them.
TEST(ProtocolTest, TheWireKeepsItsKeys) {
  const std::vector<Message> m = one_of_each();
  using Keys = std::set<std::string>;
  EXPECT_EQ(keys_of(encode(m[0])), (Keys{"type", "rank", "seconds", "world", "attempt", "pid", "comms"}));
  EXPECT_EQ(keys_of(encode(m[1])), (Keys{"type", "rank", "seconds", "step", "resumed", "summary", "path", "skipped",
                                         "written_by_world", "load_seconds"}));
  EXPECT_EQ(keys_of(encode(m[3])),
            (Keys{"type", "rank", "seconds", "step", "path", "bytes", "checksum", "save_seconds", "timings"}));
  EXPECT_EQ(keys_of(encode(m[3]).at("timings")),
            (Keys{"prepare_seconds", "shard_write_seconds", "shard_fsync_seconds", "gather_seconds", "manifest_seconds",
                  "commit_seconds", "retention_seconds", "total_seconds"}));
  EXPECT_EQ(keys_of(encode(m[4])), (Keys{"type", "rank", "seconds", "kind", "step", "spec", "lost", "file", "offset"}));
  EXPECT_EQ(encode(m[4]).at("kind"), "corrupt-checkpoint");
  EXPECT_EQ(keys_of(encode(m[5])), (Keys{"type", "rank", "seconds", "state"}));
  EXPECT_EQ(keys_of(encode(m[6])), (Keys{"type", "rank", "seconds", "report"}));
  EXPECT_EQ(keys_of(encode(m[7])), (Keys{"type", "rank", "seconds", "path", "bytes"}));
  EXPECT_EQ(keys_of(encode(m[8])), (Keys{"type", "rank", "seconds", "comm", "fatal", "message", "kind", "detector",
                                         "op", "seq", "group", "tag", "bytes", "collective", "timeout_seconds"}));
  EXPECT_EQ(encode(m[8]).at("kind"), "hang");
  // An error that is not a hang has no kind at all.
  EXPECT_EQ(keys_of(encode(Error{.message = "boom"})), (Keys{"type", "rank", "seconds", "comm", "fatal", "message"}));
}

// What the tests' fake worker writes (fake_worker.cpp): few keys, read with their defaults.
TEST(ProtocolTest, ALineWithFewKeysReadsWithDefaults) {
  const json line = json::parse(
      R"({"type":"error","rank":1,"comm":true,"kind":"hang","seconds":12.5,"message":"all-reduce #7 did not complete"})");
  const Error e = std::get<Error>(decode(line));
  EXPECT_EQ(e.from.rank, 1);
  EXPECT_TRUE(e.comm);
  EXPECT_FALSE(e.fatal);
  ASSERT_TRUE(e.hang.has_value());
  EXPECT_EQ(e.hang->detector, "");
  EXPECT_FALSE(e.hang->collective.has_value());
}

TEST(ProtocolTest, AnUnknownTypeIsAClearError) {
  try {
    decode(json{{"type", "heartbeat"}, {"rank", 0}});
    FAIL() << "decoded an unknown type";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "worker message.type");
    EXPECT_EQ(e.value(), "'heartbeat'");
    EXPECT_EQ(e.allowed(), "one of started, resume, step, checkpoint, fault, final, memory, export, error");
  }
  EXPECT_THROW(decode(json{{"rank", 0}}), ConfigError);   // no type
  EXPECT_THROW(decode(json{{"type", 3}}), ConfigError);   // not a string
  EXPECT_THROW(decode(json::array()), ConfigError);       // not an object
  EXPECT_THROW(parse_message_type("Step"), ConfigError);  // spellings are exact
  // A field of the wrong JSON type names the message and the key.
  try {
    decode(json{{"type", "checkpoint"}, {"step", "six"}});
    FAIL() << "decoded a malformed checkpoint";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "worker message 'checkpoint'.step");
    EXPECT_EQ(e.value(), "\"six\"");
  }
  EXPECT_THROW(decode(json{{"type", "fault"}, {"kind", "meteor"}}), ConfigError);
  EXPECT_THROW(decode(json{{"type", "error"}, {"kind", "oom"}}), ConfigError);  // only hangs have a kind
  EXPECT_THROW(decode(json{{"type", "final"}}), ConfigError);                   // the fingerprint is required
}

}  // namespace
}  // namespace parlab::launch::protocol

namespace parlab::launch {
namespace {

constexpr IncidentKind kAllKinds[] = {IncidentKind::kCrash,     IncidentKind::kKilled, IncidentKind::kLost,
                                      IncidentKind::kUnhealthy, IncidentKind::kHang,   IncidentKind::kStraggler};

TEST(IncidentKindTest, EveryKindHasOneSpellingAndParsesBack) {
  std::set<std::string> names;
  for (IncidentKind k : kAllKinds) {
    const std::string name(to_string(k));
    EXPECT_NE(name, "?");
    EXPECT_EQ(parse_incident_kind(name), k) << name;
    names.insert(name);
  }
  EXPECT_EQ(names.size(), std::size(kAllKinds));
  try {
    parse_incident_kind("meltdown");
    FAIL() << "parsed an unknown kind";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "incident.kind");
    EXPECT_EQ(e.allowed(), "one of crash, killed, lost, unhealthy, hang, straggler");
  }
}

// Each kind the runtime reports is written through the recorder's mapping, read back from the
// database and equal: same spelling, and no two kinds share a database kind.
TEST(IncidentKindTest, EveryKindReachesTheDatabaseWithoutLoss) {
  parlab::testing::ScratchDir dir;
  db::ResultsStore store = db::ResultsStore::open(dir / "kinds.db");
  const db::RunId run =
      store.begin_run({.kind = db::RunKind::kMeasured, .model = "m", .cluster = "c", .world_size = 2});
  for (IncidentKind k : kAllKinds) {
    IncidentReport i;
    i.kind = k;
    i.rank = 1;
    i.failed_at_step = 4;
    store.add_incident(run, record::to_incident_record(i));
  }
  const std::vector<db::IncidentRecord> rows = store.incidents(run);
  ASSERT_EQ(rows.size(), std::size(kAllKinds));
  std::set<db::IncidentKind> stored;
  for (size_t n = 0; n < rows.size(); ++n) {
    const IncidentKind k = kAllKinds[n];
    EXPECT_EQ(rows[n].kind, record::to_db(k)) << to_string(k);
    EXPECT_EQ(db::to_string(rows[n].kind), to_string(k));
    EXPECT_EQ(parse_incident_kind(db::to_string(rows[n].kind)), k);  // and back to the runtime's
    EXPECT_EQ(rows[n].rank, 1);
    EXPECT_EQ(rows[n].step, 4);
    stored.insert(rows[n].kind);
  }
  EXPECT_EQ(stored.size(), std::size(kAllKinds));
  // The database refuses a kind it does not know, and the reader names one it cannot parse.
  EXPECT_THROW(
      store.connection().statement("INSERT INTO incidents(run_id, kind) VALUES (?, 'meltdown')").bind_all(run).run(),
      db::DbError);
  EXPECT_THROW(db::parse_incident_kind("meltdown"), ConfigError);
}

}  // namespace
}  // namespace parlab::launch
