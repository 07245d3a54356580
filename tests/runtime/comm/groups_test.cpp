// Sub-groups, pipeline send/recv, determinism, and the interface's loud failures.
#include <cmath>
#include <cstring>

#include "runtime/comm/flight_recorder.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

using testing::op_options;
using testing::run_ranks;

// World 4 as DP x TP = 2 x 2: dp groups {0,1}, {2,3}; tp groups {0,2}, {1,3}. Each group sums
// its members' (world rank + 1) * 100 + i, so the sums say exactly which ranks took part.
TEST(Split, DataAndTensorParallelGroups) {
  run_ranks(4, [](int r, Communicator& world) {
    const int dp_index = r / 2, tp_index = r % 2;
    const std::vector<int> dp_ranks = {2 * dp_index, 2 * dp_index + 1};
    const std::vector<int> tp_ranks = {tp_index, tp_index + 2};
    auto dp = world.split(dp_ranks, "dp." + std::to_string(dp_index));
    auto tp = world.split(tp_ranks, "tp." + std::to_string(tp_index));

    EXPECT_EQ(dp->group_name(), "dp." + std::to_string(dp_index));
    EXPECT_EQ(dp->size(), 2);
    EXPECT_EQ(dp->rank(), r % 2);
    EXPECT_EQ(dp->world_ranks(), dp_ranks);
    EXPECT_EQ(tp->group_name(), "tp." + std::to_string(tp_index));
    EXPECT_EQ(tp->rank(), r / 2);
    EXPECT_EQ(tp->world_ranks(), tp_ranks);

    auto group_sum = [](const std::vector<int>& members, std::size_t i) {
      float s = 0;
      for (int m : members) s += static_cast<float>((m + 1) * 100 + i);
      return s;
    };
    std::vector<float> a(100), b(100), c(100);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = b[i] = c[i] = static_cast<float>((r + 1) * 100 + i);
    // Interleave groups: each communicator has its own thread and its own Gloo slots.
    auto wa = dp->all_reduce(a, op_options("dp"));
    auto wb = tp->all_reduce(b, op_options("tp"));
    auto wc = world.all_reduce(c, op_options("world"));
    wa->wait();
    wb->wait();
    wc->wait();
    for (std::size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i], group_sum(dp_ranks, i));
      ASSERT_EQ(b[i], group_sum(tp_ranks, i));
      ASSERT_EQ(c[i], group_sum({0, 1, 2, 3}, i));
    }
    // Sequence numbers are per communicator.
    EXPECT_EQ(wa->info().seq, 0u);
    EXPECT_EQ(wa->info().group, dp->group_name());
    EXPECT_EQ(dp->flight_recorder().identity().rank, r);
    EXPECT_EQ(dp->flight_recorder().identity().group_rank, r % 2);

    // A group can be split again (a group of one takes the same path).
    auto solo = dp->split({r}, "solo." + std::to_string(r));
    std::vector<float> d = {1.5f, 2.5f};
    solo->all_reduce(d, op_options())->wait();
    EXPECT_EQ(d, (std::vector<float>{1.5f, 2.5f}));
  });
}

TEST(Split, RejectsBadMemberLists) {
  run_ranks(2, [](int r, Communicator& world) {
    EXPECT_THROW(world.split({1, 0}, "x"), ConfigError);   // unsorted
    EXPECT_THROW(world.split({0, 5}, "x"), ConfigError);   // not a member
    EXPECT_THROW(world.split({1 - r}, "x"), ConfigError);  // without the caller
    EXPECT_THROW(world.split({0, 1}, ""), ConfigError);    // unnamed
  });
}

// A 4-stage pipeline, two microbatches: activations flow forward (stage s adds s+1), gradients
// flow back (stage s multiplies by 2). Stage 0 sees ((x + 1 + 2 + 3 + 4) * 2^3) back.
TEST(SendRecv, PipelineNeighbours) {
  constexpr int n = 4;
  run_ranks(n, [](int s, Communicator& comm) {
    for (int mb = 0; mb < 2; ++mb) {
      std::vector<float> act(33, 0.0f);
      if (s == 0) {
        for (std::size_t i = 0; i < act.size(); ++i) act[i] = static_cast<float>(i + mb * 100);
      } else {
        comm.recv(act, s - 1, op_options("act.mb" + std::to_string(mb)))->wait();
      }
      for (auto& x : act) x += static_cast<float>(s + 1);
      if (s + 1 < n) comm.send(act, s + 1, op_options("act.mb" + std::to_string(mb)))->wait();

      std::vector<float> grad = act;  // the last stage starts the backward from its activation
      if (s + 1 < n) comm.recv(grad, s + 1, op_options("grad.mb" + std::to_string(mb)))->wait();
      if (s > 0) {
        for (auto& x : grad) x *= 2.0f;
        comm.send(grad, s - 1, op_options("grad.mb" + std::to_string(mb)))->wait();
      } else {
        for (std::size_t i = 0; i < grad.size(); ++i) {
          ASSERT_EQ(grad[i], static_cast<float>((i + mb * 100 + 10) * 8)) << "mb " << mb;
        }
      }
    }
    // Messages are numbered per direction and peer, so send #1 on s matches recv #1 on s+1.
    for (const auto& e : comm.flight_recorder().snapshot().entries) {
      EXPECT_TRUE(e.op == OpKind::kSend || e.op == OpKind::kRecv);
      EXPECT_LE(e.seq, 1u);
      EXPECT_EQ(e.state, OpState::kCompleted);
    }
  });
}

TEST(SendRecv, RejectsSelfAndOutOfRangePeers) {
  run_ranks(2, [](int r, Communicator& comm) {
    std::vector<float> buf(4);
    EXPECT_THROW(comm.send(buf, r), ConfigError);
    EXPECT_THROW(comm.recv(buf, 2), ConfigError);
    EXPECT_THROW(comm.broadcast(buf, -1), ConfigError);
    std::vector<float> small(3);
    EXPECT_THROW(comm.reduce_scatter(buf, small), ConfigError);  // 4 != 2 * 3
    EXPECT_THROW(comm.all_gather(small, buf), ConfigError);      // 4 != 2 * 3
    CollectiveOptions zero;
    zero.timeout = std::chrono::milliseconds(0);  // Gloo would read 0 as "wait forever"
    EXPECT_THROW(comm.all_reduce(buf, zero), ConfigError);
  });
}

// Values spanning 16 orders of magnitude with both signs: the sum depends on the order of
// additions, so equal bits across two independent runs mean the order is fixed.
std::vector<float> awkward_values(int rank, std::size_t count) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i) {
    const double mag = std::pow(10.0, static_cast<double>((i * 7 + rank * 3) % 17) - 8.0);
    v[i] = static_cast<float>(std::sin(1.0 + i * 0.37 + rank * 1.91) * mag);
  }
  return v;
}

std::vector<std::vector<float>> all_reduce_once(int n, std::size_t count) {
  std::vector<std::vector<float>> results(n);
  run_ranks(n, [&](int r, Communicator& comm) {
    std::vector<float> buf = awkward_values(r, count);
    comm.all_reduce(buf, op_options())->wait();
    results[r] = std::move(buf);
  });
  return results;
}

TEST(Determinism, AllReduceIsBitIdenticalAcrossRunsAndRanks) {
  constexpr int n = 3;
  constexpr std::size_t count = 100'003;  // not a multiple of n: ragged chunks and segments
  const auto first = all_reduce_once(n, count);
  const auto second = all_reduce_once(n, count);
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(first[r].size(), count);
    EXPECT_EQ(std::memcmp(first[r].data(), second[r].data(), count * sizeof(float)), 0)
        << "rank " << r << " differs between runs";
    EXPECT_EQ(std::memcmp(first[r].data(), first[0].data(), count * sizeof(float)), 0)
        << "rank " << r << " differs from rank 0";
  }
  // And it is the sum: within fp32 rounding of a double-precision reference.
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(awkward_values(r, count));
  double worst = 0;
  for (std::size_t i = 0; i < count; ++i) {
    double ref = 0, scale = 0;
    for (int r = 0; r < n; ++r) {
      ref += inputs[r][i];
      scale += std::abs(static_cast<double>(inputs[r][i]));
    }
    worst = std::max(worst, std::abs(first[0][i] - ref) / (scale + 1e-30));
  }
  EXPECT_LT(worst, 4 * 6e-8) << "largest relative difference from the double reference";
  // The values are order-sensitive, so equal bits above are evidence and not luck: summing in
  // rank order and in reverse order disagrees on many elements.
  std::size_t order_sensitive = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const float forward = (inputs[0][i] + inputs[1][i]) + inputs[2][i];
    const float backward = (inputs[2][i] + inputs[1][i]) + inputs[0][i];
    order_sensitive += forward != backward;
  }
  EXPECT_GT(order_sensitive, count / 100);
}

// A backend that implements nothing: every op must fail loudly naming backend, op and group.
class NothingCommunicator final : public Communicator {
 public:
  std::string_view backend_name() const override { return "nothing"; }
  int rank() const override { return 0; }
  int size() const override { return 2; }
  const std::string& group_name() const override { return group_; }
  const std::vector<int>& world_ranks() const override { return ranks_; }
  const FlightRecorder& flight_recorder() const override { return recorder_; }

 private:
  std::string group_ = "tp.1";
  std::vector<int> ranks_ = {0, 1};
  FlightRecorder recorder_{RecorderIdentity{"nothing", "tp.1", 0, 2, 0, 2}};
};

TEST(Unsupported, OpsNameBackendAndOp) {
  NothingCommunicator comm;
  std::vector<float> buf(2);
  try {
    comm.all_reduce(buf);
    FAIL() << "all_reduce did not throw";
  } catch (const UnsupportedOperation& e) {
    EXPECT_EQ(e.backend(), "nothing");
    EXPECT_EQ(e.op(), "all-reduce");
    EXPECT_STREQ(e.what(), "backend nothing does not support all-reduce (group tp.1)");
  }
  EXPECT_THROW(comm.recv(buf, 1), UnsupportedOperation);
  EXPECT_THROW(comm.barrier(), UnsupportedOperation);
  try {
    comm.split({0}, "solo");
    FAIL() << "split did not throw";
  } catch (const UnsupportedOperation& e) {
    EXPECT_EQ(e.op(), "split");
  }
}

}  // namespace
}  // namespace parlab::comm
