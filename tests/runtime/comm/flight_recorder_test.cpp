#include "runtime/comm/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace parlab::comm {
namespace {

OpInfo op(std::uint64_t seq, OpKind kind = OpKind::kAllReduce) {
  return OpInfo{kind, seq, "dp.0", 1000.0 * seq, "bucket" + std::to_string(seq), -1, {}};
}

RecorderIdentity identity() { return RecorderIdentity{"gloo", "dp.0", 5, 8, 1, 2}; }

TEST(FlightRecorder, RingKeepsTheNewestEntriesOldestFirst) {
  FlightRecorder rec(identity(), 4);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t s = 0; s < 10; ++s) ids.push_back(rec.record(op(s)));
  rec.started(ids[9]);
  rec.ended(ids[9], OpState::kCompleted);
  rec.ended(ids[2], OpState::kFailed, "overwritten long ago");  // must not touch a live slot

  const auto d = rec.snapshot();
  EXPECT_EQ(d.capacity, 4u);
  EXPECT_EQ(d.dropped, 6u);  // 10 recorded, 4 kept
  ASSERT_EQ(d.entries.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(d.entries[i].seq, 6 + i);
    EXPECT_EQ(d.entries[i].tag, "bucket" + std::to_string(6 + i));
    EXPECT_TRUE(d.entries[i].error.empty());
  }
  EXPECT_EQ(d.entries[0].state, OpState::kScheduled);
  EXPECT_FALSE(d.entries[0].start_seconds.has_value());
  EXPECT_EQ(d.entries[3].state, OpState::kCompleted);
  ASSERT_TRUE(d.entries[3].start_seconds && d.entries[3].end_seconds);
  EXPECT_LE(*d.entries[3].start_seconds, *d.entries[3].end_seconds);
}

TEST(FlightRecorder, PartiallyFilledRing) {
  FlightRecorder rec(identity(), 256);
  rec.record(op(0));
  rec.record(op(1, OpKind::kSend));
  const auto d = rec.snapshot();
  EXPECT_EQ(d.dropped, 0u);
  ASSERT_EQ(d.entries.size(), 2u);
  EXPECT_EQ(d.entries[1].op, OpKind::kSend);
}

TEST(FlightRecorder, DumpAndLoadRoundTrip) {
  FlightRecorder rec(identity(), 3);
  const auto a = rec.record(op(40));
  const auto b = rec.record(op(41));
  rec.record(op(42));
  rec.started(a);
  rec.ended(a, OpState::kCompleted);
  rec.started(b);
  rec.ended(b, OpState::kTimedOut, "all-reduce #41 (...) did not complete within 30.0 s");

  const auto dir = std::filesystem::temp_directory_path() / ("parlab_fr_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / "flight_recorder.dp.0.rank5.json";
  rec.dump(path);
  rec.dump(path);  // overwriting an existing dump is fine (rename over it)
  // Atomic write: only the final file remains, no temporaries.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1);

  const auto loaded = FlightRecorder::load(path);
  const auto original = rec.snapshot();
  EXPECT_EQ(loaded.identity.backend, "gloo");
  EXPECT_EQ(loaded.identity.group, "dp.0");
  EXPECT_EQ(loaded.identity.rank, 5);
  EXPECT_EQ(loaded.identity.world_size, 8);
  EXPECT_EQ(loaded.identity.group_rank, 1);
  EXPECT_EQ(loaded.identity.group_size, 2);
  EXPECT_EQ(loaded.capacity, 3u);
  ASSERT_EQ(loaded.entries.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& x = loaded.entries[i];
    const auto& y = original.entries[i];
    EXPECT_EQ(x.seq, y.seq);
    EXPECT_EQ(x.op, y.op);
    EXPECT_EQ(x.group, y.group);
    EXPECT_EQ(x.bytes, y.bytes);
    EXPECT_EQ(x.tag, y.tag);
    EXPECT_EQ(x.state, y.state);
    EXPECT_EQ(x.start_seconds, y.start_seconds);
    EXPECT_EQ(x.end_seconds, y.end_seconds);
    EXPECT_EQ(x.error, y.error);
  }
  EXPECT_EQ(loaded.entries[1].state, OpState::kTimedOut);
  EXPECT_FALSE(loaded.entries[2].start_seconds.has_value());

  std::ofstream(dir / "bad.json") << "{\"version\": 1, \"entries\": 3}";
  EXPECT_THROW(FlightRecorder::load(dir / "bad.json"), ConfigError);
  EXPECT_THROW(FlightRecorder::load(dir / "missing.json"), RuntimeError);
  std::filesystem::remove_all(dir);
}

TEST(FlightRecorder, ConcurrentRecordersStayConsistent) {
  FlightRecorder rec(identity(), 64);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        const auto id = rec.record(op(static_cast<std::uint64_t>(i)));
        rec.started(id);
        rec.ended(id, OpState::kCompleted);
        if (i % 50 == 0) (void)rec.to_json();
      }
    });
  }
  for (auto& th : threads) th.join();
  const auto d = rec.snapshot();
  EXPECT_EQ(d.dropped, 2000u - 64u);
  EXPECT_EQ(d.entries.size(), 64u);
  for (const auto& e : d.entries) EXPECT_EQ(e.state, OpState::kCompleted);
}

TEST(FlightRecorder, ZeroCapacityIsAConfigError) { EXPECT_THROW(FlightRecorder(identity(), 0), ConfigError); }

}  // namespace
}  // namespace parlab::comm
