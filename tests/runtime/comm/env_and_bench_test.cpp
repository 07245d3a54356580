// Launcher variables, size ranges and the collective benchmark's bookkeeping.
#include <map>

#include "runtime/comm/collective_bench.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

RendezvousEnv env_of(const std::map<std::string, std::string>& vars) {
  return from_env([&](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  });
}

std::string config_error_field(const std::map<std::string, std::string>& vars) {
  try {
    env_of(vars);
  } catch (const ConfigError& e) {
    return e.field();
  }
  return "<no error>";
}

TEST(FromEnv, Torchrun) {
  const auto env = env_of(
      {{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "node0");
  EXPECT_EQ(env.master_port, 29500);
}

TEST(FromEnv, Slurm) {
  const auto env = env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "16"}, {"SLURM_LOCALID", "1"}});
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 16);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_TRUE(env.master_addr.empty());
  EXPECT_EQ(env.master_port, 0);
}

// srun sets no MASTER_ADDR/MASTER_PORT: they come from the step's first node and the job id, as
// PyTorch Lightning derives them, and the same on every task; given ones still win.
TEST(FromEnv, SlurmDerivesTheStoreAddressFromTheStep) {
  const auto env = env_of({{"SLURM_PROCID", "1"},
                           {"SLURM_NTASKS", "2"},
                           {"SLURM_JOB_ID", "4711234"},
                           {"SLURM_STEP_NODELIST", "gpu[07-09,12],cpu1"},
                           {"SLURM_JOB_NODELIST", "other"}});
  EXPECT_EQ(env.master_addr, "gpu07");
  EXPECT_EQ(env.master_port, 15000 + 1234);
  EXPECT_EQ(env.master_derived, "MASTER_ADDR from SLURM_STEP_NODELIST, MASTER_PORT from SLURM_JOB_ID");
  const auto given = env_of({{"SLURM_PROCID", "0"},
                             {"SLURM_NTASKS", "2"},
                             {"SLURM_JOB_ID", "77"},
                             {"SLURM_STEP_NODELIST", "n1"},
                             {"MASTER_ADDR", "10.0.0.9"},
                             {"MASTER_PORT", "29500"}});
  EXPECT_EQ(given.master_addr, "10.0.0.9");
  EXPECT_EQ(given.master_port, 29500);
  EXPECT_EQ(given.master_derived, "");
  EXPECT_EQ(
      env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_JOB_ID", "12"}, {"SLURM_NODELIST", "localhost"}})
          .master_port,
      15012);
  EXPECT_EQ(first_slurm_host("node[001-004]-ib,x"), "node001-ib");
  EXPECT_EQ(first_slurm_host("solo"), "solo");
  EXPECT_EQ(first_slurm_host("a,b"), "a");
  // A torchrun-launched rank never reads Slurm's list.
  EXPECT_TRUE(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_STEP_NODELIST", "n1"}, {"SLURM_JOB_ID", "5"}})
                  .master_addr.empty());
}

TEST(FromEnv, TorchrunWinsOverSlurm) {
  EXPECT_EQ(env_of({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "7"}, {"SLURM_NTASKS", "9"}}).launcher,
            "torchrun");
}

TEST(FromEnv, ErrorsNameTheVariable) {
  EXPECT_EQ(config_error_field({}), "RANK");
  EXPECT_EQ(config_error_field({{"RANK", "0"}}), "WORLD_SIZE");
  EXPECT_EQ(config_error_field({{"RANK", "abc"}, {"WORLD_SIZE", "2"}}), "RANK");
  EXPECT_EQ(config_error_field({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), "RANK");  // out of range
  EXPECT_EQ(config_error_field({{"RANK", "0"}, {"WORLD_SIZE", "0"}}), "WORLD_SIZE");
  EXPECT_EQ(config_error_field({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}),
            "MASTER_PORT");
  EXPECT_EQ(config_error_field({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}), "MASTER_PORT");
  EXPECT_EQ(config_error_field({{"SLURM_PROCID", "1"}}), "SLURM_NTASKS");
  try {
    env_of({{"RANK", "x1"}, {"WORLD_SIZE", "4"}});
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "RANK = \"x1\": must be an integer in [0, WORLD_SIZE = 4)");
  }
}

TEST(SizeRange, PowersOfTwoLikeNcclTests) {
  const auto sizes = parse_size_range("1K..16K");
  EXPECT_EQ(sizes, (std::vector<double>{1024, 2048, 4096, 8192, 16384}));
  EXPECT_EQ(parse_size_range("256M"), (std::vector<double>{256.0 * 1024 * 1024}));
  EXPECT_EQ(parse_size_range("1MB"), (std::vector<double>{1e6}));  // decimal when spelled MB
  EXPECT_EQ(parse_size_range("2GiB"), (std::vector<double>{2.0 * 1024 * 1024 * 1024}));
  EXPECT_EQ(parse_size_range("8..8"), (std::vector<double>{8}));
  EXPECT_EQ(parse_size_range("1K..256M").size(), 19u);  // 2^10 .. 2^28
}

TEST(SizeRange, RejectsNonsenseNamingTheField) {
  for (const char* bad : {"", "K", "1X", "16K..1K", "-1K", "1K..", "..1K", "1K...2K"}) {
    try {
      parse_size_range(bad, "bench.sizes");
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.field(), "bench.sizes") << bad;
    }
  }
}

// The bench's arithmetic, on a real 2-rank run: bytes are rounded to whole elements per rank,
// and busbw = algbw * factor with the factors worked out by hand for n = 2:
// all-reduce 2(n-1)/n = 1, all-gather (n-1)/n = 0.5, broadcast 1.
TEST(CollectiveBench, RowsFollowTheBusBandwidthFactors) {
  testing::run_ranks(2, [](int, Communicator& comm) {
    const std::vector<double> sizes = {4096, 1000};
    for (auto [op, factor] :
         {std::pair{strategy::CollectiveOp::kAllReduce, 1.0}, std::pair{strategy::CollectiveOp::kAllGather, 0.5},
          std::pair{strategy::CollectiveOp::kBroadcast, 1.0}}) {
      const auto rows = run_collective_bench(comm, op, sizes, 1, 3, testing::op_options());
      ASSERT_EQ(rows.size(), 2u);
      EXPECT_EQ(rows[0].bytes, 4096.0);
      EXPECT_EQ(rows[1].bytes, 1000.0);  // 250 floats, even: unchanged
      for (const auto& row : rows) {
        ASSERT_GT(row.seconds, 0.0);
        EXPECT_DOUBLE_EQ(row.algbw_bytes_per_s, row.bytes / row.seconds);
        EXPECT_DOUBLE_EQ(row.busbw_bytes_per_s, row.algbw_bytes_per_s * factor);
      }
      const std::string table = format_collective_bench(rows, op, comm.size());
      EXPECT_NE(table.find("busbw"), std::string::npos);
    }
    // 6 bytes on 2 ranks rounds down to one float: not even one element per rank.
    EXPECT_THROW(run_collective_bench(comm, strategy::CollectiveOp::kAllReduce, {6}, 0, 1), ConfigError);
  });
}

// A communicator that runs every collective on the real one and then, on rank 1, changes one
// element of what its all-reduce returned: the bench must count it in its checked run.
class CorruptingComm final : public Communicator {
 public:
  explicit CorruptingComm(Communicator& inner) : inner_(inner) {}
  std::string_view backend_name() const override { return "corrupting"; }
  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  const std::string& group_name() const override { return inner_.group_name(); }
  const std::vector<int>& world_ranks() const override { return inner_.world_ranks(); }
  const FlightRecorder& flight_recorder() const override { return inner_.flight_recorder(); }

 protected:
  std::shared_ptr<Work> run_all_reduce(std::span<float> buf, const CollectiveOptions& o) override {
    auto w = inner_.all_reduce(buf, o);
    w->wait();
    if (rank() == 1) buf[buf.size() / 2] += 1.0f;
    return w;
  }
  std::shared_ptr<Work> run_all_gather(std::span<const float> in, std::span<float> out,
                                       const CollectiveOptions& o) override {
    return inner_.all_gather(in, out, o);
  }
  std::shared_ptr<Work> run_barrier(const CollectiveOptions& o) override { return inner_.barrier(o); }

 private:
  Communicator& inner_;
};

// Every op's result is checked against the closed-form sums of the rank-dependent fill: a
// correct communicator has no wrong element in any row, and the #wrong column is printed.
TEST(CollectiveBench, ChecksEveryResultAndCountsWrongElements) {
  testing::run_ranks(3, [](int, Communicator& comm) {
    for (auto op : {strategy::CollectiveOp::kAllReduce, strategy::CollectiveOp::kReduceScatter,
                    strategy::CollectiveOp::kAllGather, strategy::CollectiveOp::kBroadcast}) {
      const auto rows = run_collective_bench(comm, op, {1200, 96}, 1, 2, testing::op_options());
      ASSERT_EQ(rows.size(), 2u);
      for (const auto& row : rows) EXPECT_EQ(row.wrong, 0) << strategy::to_string(op) << " " << row.bytes;
      EXPECT_NE(format_collective_bench(rows, op, comm.size()).find("#wrong"), std::string::npos);
    }
    CorruptingComm bad(comm);
    const auto rows =
        run_collective_bench(bad, strategy::CollectiveOp::kAllReduce, {1200}, 2, 3, testing::op_options());
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows[0].wrong, 1) << "one wrong element on one rank in the one checked run";
  });
}

}  // namespace
}  // namespace parlab::comm
