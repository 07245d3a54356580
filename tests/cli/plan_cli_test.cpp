// `parlab plan` end to end: the seed's worked example and clear errors for bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

ProcessResult parlab(std::vector<std::string> args) {
  args.insert(args.begin(), parlab_bin());
  return run_process(args);
}

bool has_line(const std::string& text, const std::string& line) {
  return ("\n" + text).find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST(PlanCli, SeedWorkedExamplePrintsTheSeedsVerdicts) {
  const auto r = parlab(
      {"plan", "--ledger-gb", "params=28,grads=28,optimizer=56,activations=18,largest-layer=6", "--device-gb", "80"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_line(r.out, "DDP fits: False")) << r.out;
  EXPECT_TRUE(has_line(r.out, "shard model state: True"));
  EXPECT_TRUE(has_line(r.out, "tensor split needed: False"));
  EXPECT_TRUE(has_line(r.out, "pipeline candidate: False"));
  EXPECT_TRUE(has_line(r.out, "estimated replica GB: 130"));
  EXPECT_TRUE(has_line(r.out, "blocker: total state"));
}

TEST(PlanCli, JsonHasTheLedgerKeys) {
  const auto r = parlab({"plan", "--model", "gpt-175b", "--cluster", "dgx-a100", "--world", "64", "--plan",
                         "tp=8,pp=8,microbatches=16", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["ranks"].size(), 8u);
  for (const char* key : {"params_bytes", "grads_bytes", "optimizer_bytes", "activations_bytes", "temp_bytes",
                          "total_bytes", "device_bytes", "fits"})
    EXPECT_TRUE(j["ranks"][0].contains(key)) << key;
  const auto& r0 = j["ranks"][0];
  EXPECT_DOUBLE_EQ(r0["total_bytes"].get<double>(), r0["params_bytes"].get<double>() + r0["grads_bytes"].get<double>() +
                                                        r0["optimizer_bytes"].get<double>() +
                                                        r0["activations_bytes"].get<double>() +
                                                        r0["temp_bytes"].get<double>());
  EXPECT_EQ(j["plan"]["dp"], 1);
  for (const char* key : {"ddp_fits", "shard_model_state", "tensor_split_needed", "pipeline_candidate"})
    EXPECT_TRUE(j["rule"][key].is_boolean()) << key;
  EXPECT_FALSE(j["rule"]["ddp_fits"].get<bool>());  // 175 B parameters on one 80 GiB device
}

TEST(PlanCli, BareParameterCount) {
  const auto r =
      parlab({"plan", "--params", "7.5e9", "--cluster", "dgx-a100", "--world", "64", "--plan", "zero=3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["ranks"][0]["params_bytes"].get<double>() + j["ranks"][0]["grads_bytes"].get<double>() +
                  j["ranks"][0]["optimizer_bytes"].get<double>(),
              16 * 7.5e9 / 64, 1);
}

TEST(PlanCli, BadInputIsOneClearLineAndNonZero) {
  struct Case {
    std::vector<std::string> args;
    std::string must_mention;
  };
  const std::vector<Case> cases = {
      {{"plan", "--model", "gpt-9000"}, "gpt-9000"},
      {{"plan", "--model", "gpt-175b", "--plan", "tp=three"}, "plan.tp"},
      {{"plan", "--model", "gpt-175b", "--plan", "tp=7", "--world", "7"}, "plan.tp"},
      {{"plan", "--params", "-5"}, "--params"},
      {{"plan", "--model", "gpt-175b", "--plan", "sp=on"}, "plan.sp"},
      {{"plan", "--ledger-gb", "params=28,grads=-1,optimizer=56,activations=18,largest-layer=6", "--device-gb", "80"},
       "grads"},
      {{"plan", "--ledger-gb", "params=28,grads=28,optimizer=56,activations=18,largest-layer=6", "--device-gb", "0"},
       "--device-gb"},
      {{"plan", "--model", "gpt-175b", "--world", "12"}, "world"},
      {{"plan", "--model", "gpt-175b", "--world", "0"}, "--world = 0"},
      {{"simulate", "--model", "gpt-22b", "--world", "-8"}, "--world = -8"},
  };
  for (const auto& c : cases) {
    const auto r = parlab(c.args);
    EXPECT_NE(r.exit_code, 0) << c.must_mention;
    EXPECT_EQ(r.signal, 0) << "crashed: " << c.must_mention;
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos) << r.err;
    // One line: the message and its newline.
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

TEST(PlanCli, OtherCommandsNameTheFlagAndTheValueTheUserTyped) {
  // The value in the message is the one on the command line (ms stays ms), and nothing starts:
  // no banner on stdout, no worker process, no run directory.
  const std::string run_dir = ::testing::TempDir() + "/never-created";
  struct Case {
    std::vector<std::string> args;
    std::string must_mention;
  };
  const std::vector<Case> cases = {
      {{"scaling", "--compute-ms", "-1"}, "--compute-ms = -1:"},
      {{"scaling", "--link", "0"}, "--link = 0:"},
      {{"train", "--nproc", "0", "--run-dir", run_dir}, "--nproc = 0:"},
      {{"train", "--nproc", "2", "--steps", "3", "--run-dir", run_dir, "--fault", "kill:rank=5,step=1"}, "rank 5"},
      {{"train", "--nproc", "4", "--plan", "pp=2,zero=1", "--run-dir", run_dir},
       "with pipeline parallelism for training"},
      {{"proof", "kill-resume", "--nproc", "0", "--work-dir", run_dir}, "--nproc = 0:"},
  };
  for (const auto& c : cases) {
    const auto r = parlab(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.must_mention << ": " << r.err;
    EXPECT_NE(r.err.find(c.must_mention), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "") << c.must_mention;
  }
  EXPECT_FALSE(std::filesystem::exists(run_dir));
}

TEST(PlanCli, TomlWithUnknownKeyIsRejected) {
  const std::string path = ::testing::TempDir() + "/bad-model.toml";
  FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("kind = \"mlp\"\nlayers = 2\nhidden = 8\nffn = 16\nclasses = 4\nwidth = 9\n", f);
  std::fclose(f);
  const auto r = parlab({"plan", "--model", path, "--cluster", "cpu-local", "--world", "1"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("width"), std::string::npos) << r.err;
}

}  // namespace parlab::testing
