// Output: byte-identical JSON for identical inputs, and Chrome trace files that parse.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/simulate.h"
#include "trace/trace.h"
#include "strategy/io.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::resolved;
using testing::timed_from_start;

std::string trace_text(const std::vector<trace::Event>& events) {
  std::ostringstream o;
  trace::write_chrome_trace(o, events, "test");
  return o.str();
}

TEST(Output, SameInputsGiveByteIdenticalJsonAndTraces) {
  const auto cluster = testing::uniform_cluster(4, 2);
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  const auto plan = resolved("tp=2,pp=2,dp=2,zero=1,microbatches=4", model, cluster, 8);
  SimOptions o;
  o.steps = 2;
  o.timeline = true;
  o.faults = {parse_fault("slow:rank=5,factor=1.7")};
  const auto a = simulate_plan(model, plan, cluster, o);
  const auto b = simulate_plan(model, plan, cluster, o);
  EXPECT_EQ(to_json(a).dump(2), to_json(b).dump(2));
  EXPECT_EQ(trace_text(a.timeline), trace_text(b.timeline));
  EXPECT_GT(a.step_seconds, 0);
  EXPECT_EQ(a.measured_steps, 2);
  EXPECT_EQ(a.step_seconds_each.size(), 3u);
}

// simulate_plan builds, runs and summarizes in its simulating child and sends the result back as
// bytes: what arrives is what simulating the parent's own programs gives, bit for bit (the JSON,
// the trace, the hang report of a stopped rank), and the bytes round-trip.
TEST(Output, TheChildsSummaryIsTheParentsBitForBit) {
  const auto cluster = testing::uniform_cluster(4, 2);
  const auto model = testing::mlp(8, 512, 2048, 16, 32);
  const auto plan = resolved("tp=2,pp=2,dp=2,zero=1,microbatches=4", model, cluster, 8);
  for (const char* fault : {"slow:rank=5,factor=1.7", "stop:rank=3,step=1"}) {
    SimOptions o;
    o.steps = 2;
    o.timeline = true;
    o.faults = {parse_fault(fault)};
    const auto child = simulate_plan(model, plan, cluster, o);
    const auto parent = simulate_programs(build_programs(model, plan), model, cluster, o);
    EXPECT_EQ(to_json(child).dump(2), to_json(parent).dump(2)) << fault;
    EXPECT_EQ(trace_text(child.timeline), trace_text(parent.timeline)) << fault;
    EXPECT_EQ(child.hang.lines, parent.hang.lines) << fault;
    EXPECT_EQ(child.hang.deadlock, std::string(fault).starts_with("stop")) << fault;
    if (!child.hang.deadlock) {
      EXPECT_FALSE(child.collectives.empty()) << fault;
    }
    EXPECT_EQ(serialize(deserialize_result(serialize(child))), serialize(child)) << fault;
  }
}

TEST(Output, JsonUsesTheAnalyticKeys) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 256, 1024, 16, 16);
  const auto plan = resolved("pp=2,dp=2,microbatches=2", model, cluster, 4);
  const auto sim = to_json(simulate_plan(model, plan, cluster));
  const auto est = estimate_to_json(strategy::estimate_step(model, plan, strategy::with_world(cluster, 4)));
  for (const auto& [key, value] : est.items()) EXPECT_TRUE(sim.contains(key)) << key;
  for (const auto& [key, value] : est["ranks"][0].items()) EXPECT_TRUE(sim["ranks"][0].contains(key)) << key;
  for (const auto& [key, value] : est["collectives"][0].items())
    EXPECT_TRUE(sim["collectives"][0].contains(key)) << key;
  EXPECT_EQ(sim["ranks"].size(), 4u);
}

TEST(Output, ChromeTraceHasOneProcessPerRankAndCompleteEvents) {
  const auto cluster = testing::uniform_cluster();
  const auto model = testing::mlp(4, 256, 1024, 16, 16);
  const auto plan = resolved("pp=2,microbatches=2", model, cluster, 2);
  const auto r = timed_from_start(model, plan, cluster);
  const auto j = nlohmann::json::parse(trace_text(r.timeline));
  size_t complete = 0;
  std::set<std::pair<int, std::string>> threads;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") threads.insert({e["pid"].get<int>(), e["args"]["name"]});
    if (e["ph"] != "X") continue;
    ++complete;
    EXPECT_GE(e["dur"].get<double>(), 0.0);
    EXPECT_TRUE(e["tid"] == 0 || e["tid"] == 1);
  }
  size_t ops = 0;
  for (int rank : {0, 1}) ops += strategy::build_step(model, plan, rank).ops.size();
  EXPECT_EQ(complete, ops);
  EXPECT_EQ(threads, (std::set<std::pair<int, std::string>>{{0, "compute"}, {0, "comm"}, {1, "compute"}, {1, "comm"}}));
}

TEST(Output, TraceEscapesAndOrdersEvents) {
  std::vector<trace::Event> events = {{1, "comm", "b", 2e-6, 3e-6, {}},
                                      {0, "compute", "say \"hi\"", 1e-6, 1.5e-6, {{"k", "v\n"}}}};
  const std::string text = trace_text(events);
  const auto j = nlohmann::json::parse(text);
  std::vector<std::string> names;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") names.push_back(e["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"say \"hi\"", "b"}));
  EXPECT_NE(text.find("\"ts\": 1.000, \"dur\": 0.500"), std::string::npos);
}

}  // namespace
}  // namespace parlab::sim
