// Shared memory under the supervisor: a local job's groups use it by default (--comm auto), the
// run says so, and a job whose rank is killed leaves nothing in /dev/shm once the supervisor
// tore it down, even when a segment's name was still there (a rank killed while connecting;
// PARLAB_SHM_KEEP_NAMES keeps every name to make that the case for the whole run).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_fixture.h"
#include "runtime/launch/process.h"

namespace parlab::launch {
namespace {

using CliShmTest = CliTest;

int entries_named(const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/dev/shm"))
    if (e.path().filename().string().rfind(prefix + ".", 0) == 0) ++n;
  return n;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST_F(CliShmTest, AKilledRankAndTheTeardownLeaveNothingInDevShm) {
  const std::string prefix = "parlabtest.cli." + std::to_string(::getpid());
  const fs::path run = dir_ / "killed";
  ChildProcess job(
      {bin_, "train", "--model", (dir_ / "tiny.toml").string(), "--nproc", "2", "--plan", "gbs=8,mb=4", "--steps", "40",
       "--checkpoint-every", "0", "--timeout", "20", "--fault", "kill:rank=1,step=30", "--run-dir", run.string()},
      {{"PARLAB_SHM_PREFIX", prefix}, {"PARLAB_SHM_KEEP_NAMES", "1"}}, dir_ / "killed.log");
  // The names are there while the job runs (kept on purpose) ...
  int seen = 0;
  for (int i = 0; i < 6000 && job.running() && seen == 0; ++i) {
    seen = entries_named(prefix);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    (void)job.wait_for(std::chrono::milliseconds(0));
  }
  const auto status = job.wait_for(std::chrono::seconds(90));
  ASSERT_TRUE(status.has_value()) << "the job did not end";
  EXPECT_FALSE(status->ok()) << text_of(dir_ / "killed.log");
  EXPECT_GT(seen, 0) << "no segment of the job was ever named in /dev/shm";
  // ... and gone after rank 1's kill -9 and the supervisor's teardown.
  EXPECT_EQ(entries_named(prefix), 0);
  EXPECT_NE(text_of(dir_ / "killed.log").find("groups   world shm"), std::string::npos) << text_of(dir_ / "killed.log");
}

// --comm is honoured: the groups line of each run names the backend asked for.
TEST_F(CliShmTest, CommFlagChoosesTheBackend) {
  std::string shm_out, gloo_out;
  const std::vector<std::string> common = {
      "train",   "--model", (dir_ / "tiny.toml").string(), "--nproc", "2", "--plan", "gbs=8,mb=4",
      "--steps", "3",       "--checkpoint-every",          "0"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  ASSERT_TRUE(parlab(with({"--run-dir", (dir_ / "shm").string(), "--comm", "shm"}), shm_out).ok()) << shm_out;
  ASSERT_TRUE(parlab(with({"--run-dir", (dir_ / "gloo").string(), "--comm", "gloo"}), gloo_out).ok()) << gloo_out;
  EXPECT_NE(shm_out.find("groups   world shm"), std::string::npos) << shm_out;
  EXPECT_NE(gloo_out.find("groups   world gloo"), std::string::npos) << gloo_out;
  EXPECT_NE(gloo_out.find("Comm     --comm gloo"), std::string::npos) << gloo_out;
}

// ZeRO-3 on shared memory gathers each layer from the peers' shards in registered memory (layer 0
// lies wholly in rank 0's shard: rank 1 contributes an empty chunk); on 2 ranks every sum is one
// addition, so the run ends on Gloo's state hash bit for bit.
TEST_F(CliShmTest, ZeroThreeOnSharedMemoryEndsOnGloosStateHash) {
  auto final_hash = [&](const std::string& comm) {
    std::string out;
    const auto st = parlab(
        {"train", "--model", (dir_ / "tiny.toml").string(), "--nproc", "2", "--plan", "gbs=8,mb=4,zero=3", "--steps",
         "3", "--checkpoint-every", "0", "--comm", comm, "--run-dir", (dir_ / ("z3-" + comm)).string()},
        out);
    EXPECT_TRUE(st.ok()) << out;
    EXPECT_NE(out.find("groups   world " + comm), std::string::npos) << out;
    const auto at = out.find("state hash ");
    return at == std::string::npos ? std::string("none") : out.substr(at + 11, 16);
  };
  const std::string shm = final_hash("shm");
  EXPECT_NE(shm, "none");
  EXPECT_EQ(shm, final_hash("gloo"));
}

}  // namespace
}  // namespace parlab::launch
