// `parlab simulate` end to end: JSON in the analytic model's keys, deterministic output, a trace
// file, the hang report, and `simulate collective`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

// PARLAB_BIN when CTest sets it, else the path CMake compiled in.
std::string binary() {
  const char* p = std::getenv("PARLAB_BIN");
  return p && *p ? p : PARLAB_SIM_TEST_BIN;
}

ProcessResult parlab(std::vector<std::string> args) {
  args.insert(args.begin(), binary());
  return run_process(args);
}

std::string temp_path(const std::string& name) {
  return (::testing::TempDir().empty() ? std::string("/tmp/") : ::testing::TempDir()) + name + "." +
         std::to_string(::getpid());
}

const std::vector<std::string> kPipeline = {
    "simulate", "--model", "lab-mlp", "--cluster", "cpu-local", "--plan", "pp=2,dp=2,microbatches=2"};

TEST(SimulateCli, JsonIsDeterministicAndCarriesTheAnalyticKeys) {
  auto args = kPipeline;
  args.push_back("--json");
  const auto a = parlab(args);
  const auto b = parlab(args);
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  const auto j = nlohmann::json::parse(a.out);
  for (const char* key : {"step_seconds", "ranks", "collectives", "bubble_fraction_of_total", "analytic", "hang"})
    EXPECT_TRUE(j.contains(key)) << key;
  ASSERT_EQ(j["ranks"].size(), 4u);
  for (const char* key : {"compute_seconds", "exposed_comm_seconds", "bubble_seconds"}) {
    EXPECT_TRUE(j["ranks"][0].contains(key)) << key;
    EXPECT_TRUE(j["analytic"]["ranks"][0].contains(key)) << key;
  }
  EXPECT_GT(j["step_seconds"].get<double>(), 0);
  EXPECT_FALSE(j["hang"]["deadlock"].get<bool>());
}

TEST(SimulateCli, WritesAChromeTrace) {
  const std::string path = temp_path("parlab-sim-trace.json");
  auto args = kPipeline;
  args.insert(args.end(), {"--trace", path});
  const auto r = parlab(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Step time: simulated"), std::string::npos) << r.out;
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  const auto j = nlohmann::json::parse(text.str());
  std::set<int> pids;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X") pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, (std::set<int>{0, 1, 2, 3}));
}

TEST(SimulateCli, StoppedRankPrintsTheHang) {
  const auto r = parlab(
      {"simulate", "--model", "lab-mlp", "--cluster", "cpu-local", "--plan", "dp=4", "--fault", "stop:rank=2,step=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("HANG"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing rank(s): 2"), std::string::npos) << r.out;
}

TEST(SimulateCli, CollectiveLineBesideTheAnalyticTime) {
  const auto r = parlab({"simulate", "collective", "--op", "allreduce", "--bytes", "64M", "--ranks", "8", "--cluster",
                         "dgx-a100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["bytes"].get<double>(), 64.0 * 1024 * 1024);
  EXPECT_EQ(j["algorithm"], "ring");
  // One DGX A100 node: the preset's measured nccl-tests curve, 200.91 GB/s busbw at 64 MiB.
  EXPECT_EQ(j["protocol"], "measured");
  EXPECT_NEAR(j["busbw_bytes_per_s"].get<double>(), 200.91e9, 0.01 * 200.91e9);
  EXPECT_NEAR(j["seconds"].get<double>(), j["analytic"]["seconds"].get<double>(), 0.01 * j["seconds"].get<double>());
  // dgx-h100 has no measured curve: NCCL's Simple protocol on 369.9 GB/s (450 x 0.822): 8.4 us,
  // 14 steps of 3.4 us, plus 2 x 7/8 x 64 MiB at 369.9 GB/s.
  const auto h = parlab({"simulate", "collective", "--op", "allreduce", "--bytes", "64M", "--ranks", "8", "--cluster",
                         "dgx-h100", "--json"});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const auto jh = nlohmann::json::parse(h.out);
  EXPECT_EQ(jh["protocol"], "Simple");
  const double ring_seconds = 8.4e-6 + 14 * 3.4e-6 + 1.75 * 64.0 * 1024 * 1024 / 369.9e9;
  EXPECT_NEAR(jh["busbw_bytes_per_s"].get<double>(), 1.75 * 64.0 * 1024 * 1024 / ring_seconds, 0.01 * 314e9);
  // The text table names the protocol too.
  const auto text = parlab(
      {"simulate", "collective", "--op", "allreduce", "--bytes", "64M", "--ranks", "8", "--cluster", "dgx-a100"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("protocol"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" measured "), std::string::npos) << text.out;
}

TEST(SimulateCli, BadFaultNamesTheKey) {
  auto args = kPipeline;
  args.insert(args.end(), {"--fault", "slow:rank=1"});
  const auto r = parlab(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("factor"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace parlab::testing
