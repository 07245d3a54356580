// Step records survive the JSON lines the supervisor reads, and measured events become Chrome
// trace events in the simulator's naming.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "runtime/train/telemetry.h"
#include "base/errors.h"

namespace parlab::train {
namespace {

StepRecord sample_record() {
  StepRecord r;
  r.rank = 1;
  r.world = 2;
  r.step = 7;
  r.epoch = 2;
  r.global_batch = 13;
  r.samples = 6;
  r.loss_sum = 8.25;
  r.times = {.data_seconds = 0.001,
             .forward_seconds = 0.01,
             .backward_seconds = 0.02,
             .exposed_comm_seconds = 0.003,
             .optimizer_seconds = 0.004,
             .idle_seconds = 0.0005,
             .step_seconds = 0.0385,
             .comm_seconds = 0.012};
  r.events.push_back(OpEvent{1, 7, 12, "comm", "all-reduce", "grad.bucket0", "dp.0", 4096, 100.5, 100.75, ""});
  r.events.push_back(OpEvent{1, 7, 3, "compute", "forward", "fwd.mb0.c0", "", 0, 100.25, 100.5, ""});
  return r;
}

TEST(TelemetryTest, StepRecordsRoundTripThroughJson) {
  const StepRecord r = sample_record();
  const StepRecord back = step_record_from_json(nlohmann::json::parse(to_json(r, true).dump()));
  EXPECT_EQ(back.rank, 1);
  EXPECT_EQ(back.step, 7);
  EXPECT_EQ(back.epoch, 2);
  EXPECT_EQ(back.global_batch, 13);
  EXPECT_EQ(back.samples, 6);
  EXPECT_DOUBLE_EQ(back.loss_sum, 8.25);
  EXPECT_DOUBLE_EQ(back.times.exposed_comm_seconds, 0.003);
  EXPECT_DOUBLE_EQ(back.times.comm_seconds, 0.012);
  ASSERT_EQ(back.events.size(), 2u);
  EXPECT_EQ(back.events[0].group, "dp.0");
  EXPECT_DOUBLE_EQ(back.events[0].bytes, 4096);
  EXPECT_EQ(back.events[1].tag, "fwd.mb0.c0");
  // Without events the line stays small, and reads back with none.
  EXPECT_TRUE(step_record_from_json(to_json(r, false)).events.empty());
  EXPECT_THROW(step_record_from_json(nlohmann::json{{"rank", 0}}), ConfigError);
}

TEST(TelemetryTest, EventsBecomeTraceEventsFromTimeZero) {
  const StepRecord r = sample_record();
  const auto t = to_trace_events(r.events, 100.25);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "all-reduce grad.bucket0");
  EXPECT_EQ(t[0].stream, "comm");
  EXPECT_DOUBLE_EQ(t[0].start_seconds, 0.25);
  EXPECT_DOUBLE_EQ(t[0].end_seconds, 0.5);
  EXPECT_EQ(t[1].name, "forward fwd.mb0.c0");
  EXPECT_DOUBLE_EQ(t[1].start_seconds, 0.0);

  const auto path = std::filesystem::temp_directory_path() / ("parlab_trace_" + std::to_string(::getpid()) + ".json");
  write_measured_trace(path.string(), r.events);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str());
  int complete = 0;
  for (const auto& e : j.at("traceEvents"))
    if (e.at("ph") == "X") {
      ++complete;
      if (e.at("name") == "forward fwd.mb0.c0") {
        EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 0.0);
      }
      if (e.at("name") == "all-reduce grad.bucket0") {
        EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 250000.0);
      }
    }
  EXPECT_EQ(complete, 2);
  std::filesystem::remove(path);
}

TEST(TelemetryTest, JsonlSinkWritesOneFlushedLinePerStep) {
  const auto dir = std::filesystem::temp_directory_path() / ("parlab_jsonl_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    JsonlSink sink(dir / "rank-1.jsonl", dir / "rank-1.events.jsonl");
    StepRecord r = sample_record();
    sink.on_step(r);
    r.step = 8;
    sink.on_step(r);
    // Readable while the sink is still open: the supervisor tails it live.
    std::ifstream in(dir / "rank-1.jsonl");
    std::string a, b;
    ASSERT_TRUE(std::getline(in, a));
    ASSERT_TRUE(std::getline(in, b));
    EXPECT_EQ(step_record_from_json(nlohmann::json::parse(b)).step, 8);
    std::ifstream ev(dir / "rank-1.events.jsonl");
    std::string line;
    ASSERT_TRUE(std::getline(ev, line));
    EXPECT_EQ(nlohmann::json::parse(line).size(), 2u);
  }
  std::filesystem::remove_all(dir);
}

// The measured bubble of an idealised GPipe of p stages and m microbatches with equal slots:
// stage s runs forward k in slot s + k and backward k in slot (m + p - 1) + (p - 1 - s) + k, so
// each stage is busy 2m of 2(m + p - 1) slots: the bubble is (p - 1)/(m + p - 1) exactly.
TEST(TelemetryTest, MeasuredBubbleOfAnIdealGPipeIsTheFormulas) {
  const int p = 4, m = 8;
  std::vector<OpEvent> events;
  for (int64_t step : {0, 1})
    for (int s = 0; s < p; ++s)
      for (int k = 0; k < m; ++k) {
        const double base = 1000.0 * static_cast<double>(step);
        const double f = base + s + k, b = base + (m + p - 1) + (p - 1 - s) + k;
        events.push_back(OpEvent{s, step, k, "compute", "forward", "", "", 0, f, f + 1, "warmup"});
        events.push_back(OpEvent{s, step, m + k, "compute", "backward", "", "", 0, b, b + 1, "cooldown"});
      }
  const MeasuredBubble bubble = measured_bubble(events);
  EXPECT_EQ(bubble.steps, 1);  // step 0 is the warm-up
  EXPECT_NEAR(bubble.mean, double(p - 1) / (m + p - 1), 1e-12);
  EXPECT_NEAR(bubble.max_rank, double(p - 1) / (m + p - 1), 1e-12);
}

}  // namespace
}  // namespace parlab::train
