// Real processes: N copies of comm_worker meet through a file store in a temp dir (or through
// torchrun-style variables and rank 0's TCP store), all-reduce, and write what they got.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "runtime/comm/store_token.h"
#include "tests/runtime/comm/child_process.h"
#include "tests/support/ports.h"

namespace parlab::comm {
namespace {

constexpr int kCount = 10'000;

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("parlab_mp_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Reads a worker's output and checks it against sum_r (r + 1 + i) = n(n+1)/2 + n*i.
void check_result(const std::filesystem::path& path, int expected_rank, int n, const std::string& launcher) {
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no result from rank " << expected_rank;
  int rank = -1, size = -1;
  std::string got_launcher;
  in >> rank >> size >> got_launcher;
  EXPECT_EQ(rank, expected_rank);
  EXPECT_EQ(size, n);
  EXPECT_EQ(got_launcher, launcher);
  for (int i = 0; i < kCount; ++i) {
    double x = 0;
    ASSERT_TRUE(in >> x) << "rank " << rank << " wrote only " << i << " values";
    ASSERT_EQ(x, n * (n + 1) / 2.0 + n * static_cast<double>(i)) << "rank " << rank << " i " << i;
  }
}

void run_file_store_job(int n) {
  const auto dir = fresh_dir("n" + std::to_string(n));
  std::vector<testing::ChildProcess> workers;
  for (int r = 0; r < n; ++r) {
    workers.emplace_back(std::vector<std::string>{PARLAB_COMM_WORKER, "all-reduce", "--store",
                                                  "file:" + (dir / "store").string(), "--rank", std::to_string(r),
                                                  "--size", std::to_string(n), "--count", std::to_string(kCount),
                                                  "--out", (dir / ("rank" + std::to_string(r) + ".txt")).string()});
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(workers[r].wait(std::chrono::seconds(40)), 0) << "rank " << r << " failed";
  }
  for (int r = 0; r < n; ++r) {
    check_result(dir / ("rank" + std::to_string(r) + ".txt"), r, n, "flags");
  }
  std::filesystem::remove_all(dir);
}

TEST(MultiProcess, FileStoreTwoRanks) { run_file_store_job(2); }
TEST(MultiProcess, FileStoreFourRanks) { run_file_store_job(4); }

// torchrun conventions: RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT, rank 0 hosts the TCP store.
TEST(MultiProcess, TorchrunVariablesAndTcpStore) {
  constexpr int n = 3;
  const std::string port = std::to_string(parlab::testing::unused_loopback_port());  // rank 0 binds it

  const auto dir = fresh_dir("torchrun");
  const std::string token = random_store_token();  // what torchrun users export to every rank
  std::vector<testing::ChildProcess> workers;
  for (int r = 0; r < n; ++r) {
    workers.emplace_back(
        std::vector<std::string>{PARLAB_COMM_WORKER, "all-reduce", "--store", "env", "--count", std::to_string(kCount),
                                 "--out", (dir / ("rank" + std::to_string(r) + ".txt")).string()},
        std::map<std::string, std::string>{{"RANK", std::to_string(r)},
                                           {"WORLD_SIZE", std::to_string(n)},
                                           {"LOCAL_RANK", std::to_string(r)},
                                           {"MASTER_ADDR", "127.0.0.1"},
                                           {"MASTER_PORT", port},
                                           {"PARLAB_STORE_TOKEN", token}});
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(workers[r].wait(std::chrono::seconds(40)), 0) << "rank " << r << " failed";
  }
  for (int r = 0; r < n; ++r) {
    check_result(dir / ("rank" + std::to_string(r) + ".txt"), r, n, "torchrun");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace parlab::comm
