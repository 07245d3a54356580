// Desynchronised ranks never pair up: two ranks that issue collective #k with different tags (one
// skipped a step: "s6/grad.bucket0" where the others issue "s5/grad.bucket0") both fail, a
// timeout first (the other may then see the connection close), their buffers untouched, instead
// of silently summing different steps' gradients. The same call with equal tags sums as usual.
#include <chrono>

#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

using testing::op_options;

constexpr std::chrono::milliseconds kShort{500};

TEST(Desync, DifferentTagsAtTheSameSequenceNumberTimeOutInsteadOfPairing) {
  std::vector<std::string> outcome(2);
  std::vector<float> seen(2, 0.0f);
  testing::run_ranks(2, [&](int r, Communicator& comm) {
    std::vector<float> warm(8, 1.0f);
    comm.all_reduce(warm, op_options("warmup"))->wait();  // #0: connected, agreeing
    std::vector<float> buf(1024, static_cast<float>(r + 1));
    CollectiveOptions o;
    o.timeout = kShort;
    o.tag = r == 0 ? "s5/grad.bucket0" : "s6/grad.bucket0";
    try {
      comm.all_reduce(buf, o)->wait();
      outcome[r] = "completed";
    } catch (const CollectiveTimeout& e) {
      outcome[r] = "timed out at #" + std::to_string(e.seq()) + " " + e.tag();
    } catch (const CollectiveError& e) {
      // The rank that timed out first may close its connections before the other's timeout.
      outcome[r] = "failed at #" + std::to_string(e.seq()) + " " + e.tag();
    }
    seen[r] = buf[0];
  });
  const bool first = outcome[0].rfind("timed out", 0) == 0, second = outcome[1].rfind("timed out", 0) == 0;
  EXPECT_TRUE(first || second) << outcome[0] << "; " << outcome[1];
  EXPECT_TRUE(outcome[0] == "timed out at #1 s5/grad.bucket0" || outcome[0] == "failed at #1 s5/grad.bucket0")
      << outcome[0];
  EXPECT_TRUE(outcome[1] == "timed out at #1 s6/grad.bucket0" || outcome[1] == "failed at #1 s6/grad.bucket0")
      << outcome[1];
  // Nothing was summed: each rank still holds its own value (1 and 2, not 3).
  EXPECT_EQ(seen[0], 1.0f);
  EXPECT_EQ(seen[1], 2.0f);
}

TEST(Desync, EqualTagsAtTheSameSequenceNumberSum) {
  std::vector<float> seen(2, 0.0f);
  testing::run_ranks(2, [&](int r, Communicator& comm) {
    std::vector<float> buf(1024, static_cast<float>(r + 1));
    comm.all_reduce(buf, op_options("s5/grad.bucket0"))->wait();
    seen[r] = buf[1023];
  });
  EXPECT_EQ(seen[0], 3.0f);  // 1 + 2
  EXPECT_EQ(seen[1], 3.0f);
}

}  // namespace
}  // namespace parlab::comm
