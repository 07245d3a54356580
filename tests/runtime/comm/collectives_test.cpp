// Closed-form checks of every collective over world size x element count x op, as Gloo's own
// tests do: rank r contributes values whose sum (or gathered layout) is known by hand. All
// values are integers below 2^24, so fp32 sums are exact in any order.
#include <cmath>
#include <tuple>

#include "runtime/comm/flight_recorder.h"
#include "runtime/comm/gloo/gloo_algorithms.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

using testing::op_options;
using testing::run_ranks;

enum class Op { kAllReduce, kReduceScatter, kAllGather, kBroadcast };

const char* name(Op op) {
  switch (op) {
    case Op::kAllReduce:
      return "AllReduce";
    case Op::kReduceScatter:
      return "ReduceScatter";
    case Op::kAllGather:
      return "AllGather";
    case Op::kBroadcast:
      return "Broadcast";
  }
  return "?";
}

class Collectives : public ::testing::TestWithParam<std::tuple<int, int, Op>> {};

// all_reduce: rank r holds r + 1 + i + round  ->  sum_r = n(n+1)/2 + n(i + round).
void check_all_reduce(int r, int n, std::size_t count, Communicator& comm) {
  for (int round = 0; round < 2; ++round) {
    std::vector<float> buf(count);
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(r + 1 + i + round);
    comm.all_reduce(buf, op_options("round" + std::to_string(round)))->wait();
    std::vector<float> expected(count);
    for (std::size_t i = 0; i < count; ++i) {
      expected[i] = static_cast<float>(n * (n + 1) / 2 + n * (i + round));
    }
    ASSERT_EQ(buf, expected) << "max diff " << testing::max_abs_diff(buf, expected);
  }
}

// reduce_scatter: input[j] = r + 1 + j for j < n*count; rank q keeps chunk q:
//   out[i] = sum_r (r + 1 + q*count + i) = n(n+1)/2 + n(q*count + i).
void check_reduce_scatter(int r, int n, std::size_t count, Communicator& comm) {
  std::vector<float> in(count * n), out(count, -1.0f);
  for (std::size_t j = 0; j < in.size(); ++j) in[j] = static_cast<float>(r + 1 + j);
  comm.reduce_scatter(in, out, op_options("rs"))->wait();
  std::vector<float> expected(count);
  for (std::size_t i = 0; i < count; ++i) {
    expected[i] = static_cast<float>(n * (n + 1) / 2 + n * (r * count + i));
  }
  ASSERT_EQ(out, expected) << "max diff " << testing::max_abs_diff(out, expected);
}

// all_gather: rank r contributes in[i] = r*count + i, so the gathered buffer is 0, 1, 2, ...
void check_all_gather(int r, int n, std::size_t count, Communicator& comm) {
  std::vector<float> in(count), out(count * n, -1.0f);
  for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>(r * count + i);
  comm.all_gather(in, out, op_options("ag"))->wait();
  for (std::size_t j = 0; j < out.size(); ++j) {
    ASSERT_EQ(out[j], static_cast<float>(j)) << "element " << j;
  }
}

// broadcast from the last rank (not 0, so the root argument matters): buf[i] = i + 0.25.
void check_broadcast(int r, int n, std::size_t count, Communicator& comm) {
  const int root = n - 1;
  std::vector<float> buf(count, -7.0f);
  if (r == root) {
    for (std::size_t i = 0; i < count; ++i) buf[i] = static_cast<float>(i) + 0.25f;
  }
  comm.broadcast(buf, root, op_options("bc"))->wait();
  for (std::size_t i = 0; i < count; ++i) {
    ASSERT_EQ(buf[i], static_cast<float>(i) + 0.25f) << "element " << i;
  }
}

TEST_P(Collectives, MatchClosedForm) {
  const auto [n, count_int, op] = GetParam();
  const auto count = static_cast<std::size_t>(count_int);
  run_ranks(n, [&, n = n, op = op](int r, Communicator& comm) {
    EXPECT_EQ(comm.rank(), r);
    EXPECT_EQ(comm.size(), n);
    EXPECT_EQ(comm.group_name(), "world");
    switch (op) {
      case Op::kAllReduce:
        check_all_reduce(r, n, count, comm);
        break;
      case Op::kReduceScatter:
        check_reduce_scatter(r, n, count, comm);
        break;
      case Op::kAllGather:
        check_all_gather(r, n, count, comm);
        break;
      case Op::kBroadcast:
        check_broadcast(r, n, count, comm);
        break;
    }
    // Every op went through the recorder and completed.
    for (const auto& e : comm.flight_recorder().snapshot().entries) {
      EXPECT_EQ(e.state, OpState::kCompleted) << to_string(e.op) << " #" << e.seq;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(WorldTimesCountTimesOp, Collectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Values(1, 7, 1000, 1 << 18),
                                            ::testing::Values(Op::kAllReduce, Op::kReduceScatter, Op::kAllGather,
                                                              Op::kBroadcast)),
                         [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) + "_count" +
                                  std::to_string(std::get<1>(info.param)) + "_" + name(std::get<2>(info.param));
                         });

// Uneven chunks, as ZeRO cuts a bucket at shard boundaries: rank q's chunk has counts[q]
// elements (some 0). reduce_scatter_v: input[j] = r + 1 + j, so rank q's out[i] =
// n(n+1)/2 + n(offset_q + i); all_gather_v: rank r's in[i] = offset_r + i, so the gathered
// buffer is 0, 1, 2, ... Both run in place (output aliasing the rank's own chunk) and not.
// `scale` multiplies every count (chunks of several 1 MiB segments, which the rings forward
// segment by segment, at scale 100003).
void check_uneven(int n, bool in_place, int64_t scale) {
  std::vector<int64_t> counts;
  for (int q = 0; q < n; ++q) counts.push_back(q == 1 ? 0 : (3 + 5 * q) * scale);  // rank 1 owns nothing
  std::vector<std::size_t> offset(n + 1, 0);
  for (int q = 0; q < n; ++q) offset[q + 1] = offset[q] + static_cast<std::size_t>(counts[q]);
  const std::size_t total = offset[n];
  run_ranks(n, [&, n = n, in_place = in_place](int r, Communicator& comm) {
    for (int round = 0; round < 2; ++round) {  // a second call reuses the first one's buffers
      std::vector<float> in(total), out_own(static_cast<std::size_t>(counts[r]));
      for (std::size_t j = 0; j < total; ++j) in[j] = static_cast<float>(r + 1 + j);
      std::span<float> out = in_place ? std::span<float>(in).subspan(offset[r], counts[r]) : std::span<float>(out_own);
      comm.reduce_scatter_v(in, counts, out, op_options("rsv"))->wait();
      for (std::size_t i = 0; i < out.size(); ++i)
        ASSERT_EQ(out[i], static_cast<float>(n * (n + 1) / 2 + n * (offset[r] + i)))
            << "rank " << r << " element " << i;

      std::vector<float> gathered(total, -1.0f), mine(static_cast<std::size_t>(counts[r]));
      for (std::size_t i = 0; i < mine.size(); ++i) mine[i] = static_cast<float>(offset[r] + i);
      if (in_place) std::copy(mine.begin(), mine.end(), gathered.begin() + offset[r]);
      std::span<const float> src =
          in_place ? std::span<const float>(gathered).subspan(offset[r], counts[r]) : std::span<const float>(mine);
      comm.all_gather_v(src, gathered, counts, op_options("agv"))->wait();
      for (std::size_t j = 0; j < total; ++j) ASSERT_EQ(gathered[j], static_cast<float>(j)) << "rank " << r;
    }
    // The recorder counts what the program counts: the whole bucket's bytes for both.
    for (const auto& e : comm.flight_recorder().snapshot().entries) {
      EXPECT_EQ(e.state, OpState::kCompleted);
      EXPECT_EQ(e.bytes, static_cast<double>(total * sizeof(float))) << to_string(e.op);
    }
  });
}

class UnevenCollectives : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(UnevenCollectives, MatchClosedForm) {
  const auto [n, in_place] = GetParam();
  check_uneven(n, in_place, 1);
}

// Chunks of up to 7 MB (one rank owns nothing, the others unequal shares, as a ZeRO layer cut at
// shard boundaries): every segment of every hop lands where it belongs, and the sums are exact.
TEST(UnevenCollectivesInSegments, MatchClosedForm) {
  for (int n : {2, 3, 4})
    for (bool in_place : {false, true}) check_uneven(n, in_place, 100003);
}

INSTANTIATE_TEST_SUITE_P(WorldTimesInPlace, UnevenCollectives,
                         ::testing::Combine(::testing::Values(1, 2, 3, 4), ::testing::Bool()), [](const auto& info) {
                           return "n" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_in_place" : "_copy");
                         });

// Build once, run many: the ring ops register a caller's buffer the first time they see it and
// reuse the registration on every later call, as a ZeRO step reduce-scatters the same buckets.
TEST(UnevenCollectivesReuse, RepeatedCallsOnTheSameBuffersRegisterNothingNew) {
  if (testing::kBackend != "gloo") GTEST_SKIP() << "Gloo's registrations; shared memory registers nothing";
  run_ranks(3, [](int r, Communicator& comm) {
    const std::vector<int64_t> counts = {4, 0, 5};
    std::vector<float> bucket(9, 1.0f), shard(static_cast<size_t>(counts[r]));
    comm.reduce_scatter_v(bucket, counts, shard, op_options("first"))->wait();
    const std::uint64_t after_first = gloo_ring_registrations(comm);
    EXPECT_GE(after_first, 1u);
    for (int k = 0; k < 5; ++k) comm.reduce_scatter_v(bucket, counts, shard, op_options("again"))->wait();
    EXPECT_EQ(gloo_ring_registrations(comm), after_first);
  });
}

TEST(UnevenCollectivesShape, CountsMustCoverTheBuffer) {
  run_ranks(2, [](int, Communicator& comm) {
    std::vector<float> in(5), out(2);
    const std::vector<int64_t> wrong_total = {2, 2}, wrong_ranks = {5};
    EXPECT_THROW(comm.reduce_scatter_v(in, wrong_total, out), ConfigError);
    EXPECT_THROW(comm.all_gather_v(out, in, wrong_ranks), ConfigError);
  });
}

// A barrier lets no rank through before every rank arrived.
TEST(Barrier, NoRankPassesEarly) {
  constexpr int n = 4;
  std::atomic<int> arrived{0};
  run_ranks(n, [&](int, Communicator& comm) {
    for (int round = 1; round <= 3; ++round) {
      arrived.fetch_add(1);
      comm.barrier(op_options())->wait();
      EXPECT_GE(arrived.load(), round * n);
      comm.barrier(op_options())->wait();  // nobody starts the next round before all checked
    }
  });
}

// Issue returns before the op completes: rank 0's all-reduce cannot finish until rank 1 joins,
// and rank 1 only joins after rank 0 has looked at its Work.
TEST(Async, IssueReturnsBeforeCompletion) {
  std::atomic<bool> rank0_checked{false};
  run_ranks(2, [&](int r, Communicator& comm) {
    std::vector<float> buf(1000, static_cast<float>(r + 1));
    if (r == 0) {
      auto work = comm.all_reduce(buf, op_options());
      EXPECT_FALSE(work->completed());
      rank0_checked = true;
      work->wait();
      EXPECT_TRUE(work->completed());
      EXPECT_TRUE(work->succeeded());
      EXPECT_GT(work->seconds(), 0.0);
    } else {
      while (!rank0_checked) std::this_thread::yield();
      comm.all_reduce(buf, op_options())->wait();
    }
    EXPECT_EQ(buf[999], 3.0f);
  });
}

// A Work carries its own wall-clock stamps (c10d's WorkInfo): when the op thread started and
// ended it, so the executor no longer matches flight-recorder entries to find them.
TEST(Async, WorkCarriesTheStartAndEndItsRecorderEntryHas) {
  run_ranks(2, [&](int r, Communicator& comm) {
    std::vector<float> buf(1 << 16, static_cast<float>(r + 1));
    const double before = wall_clock_seconds();
    auto work = comm.all_reduce(buf, op_options("stamped"));
    work->wait();
    const double after = wall_clock_seconds();
    ASSERT_TRUE(work->started_at() && work->finished_at());
    EXPECT_LE(before, *work->started_at());
    EXPECT_LE(*work->started_at(), *work->finished_at());
    EXPECT_LE(*work->finished_at(), after);
    const auto entries = comm.flight_recorder().snapshot().entries;
    ASSERT_EQ(entries.size(), 1u);
    // The op thread stamps the recorder, then the Work, at each end of the op: the two
    // intervals interleave in that order, whatever the machine's load.
    EXPECT_LE(*entries[0].start_seconds, *work->started_at());
    EXPECT_LE(*work->started_at(), *entries[0].end_seconds);
    EXPECT_LE(*entries[0].end_seconds, *work->finished_at());
  });
}

// Many ops in flight run in issue order: each result is right and sequence numbers follow the
// issue order in the recorder.
TEST(Async, QueuedOpsRunInIssueOrder) {
  constexpr int n = 3, kOps = 20;
  run_ranks(n, [&](int r, Communicator& comm) {
    std::vector<std::vector<float>> bufs(kOps, std::vector<float>(257));
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < kOps; ++k) {
      for (auto& x : bufs[k]) x = static_cast<float>(k * 10 + r);
      works.push_back(comm.all_reduce(bufs[k], op_options("bucket" + std::to_string(k))));
    }
    for (int k = 0; k < kOps; ++k) {
      works[k]->wait();
      EXPECT_EQ(works[k]->info().seq, static_cast<std::uint64_t>(k));
      // sum_r (10k + r) = 10kn + n(n-1)/2
      EXPECT_EQ(bufs[k][256], static_cast<float>(10 * k * n + n * (n - 1) / 2));
    }
    const auto entries = comm.flight_recorder().snapshot().entries;
    ASSERT_EQ(entries.size(), static_cast<std::size_t>(kOps));
    for (int k = 0; k < kOps; ++k) {
      EXPECT_EQ(entries[k].seq, static_cast<std::uint64_t>(k));
      EXPECT_EQ(entries[k].tag, "bucket" + std::to_string(k));
      EXPECT_EQ(entries[k].bytes, 257.0 * 4);
      ASSERT_TRUE(entries[k].start_seconds && entries[k].end_seconds);
      if (k > 0) {
        EXPECT_GE(*entries[k].start_seconds, *entries[k - 1].end_seconds);
      }
    }
  });
}

}  // namespace
}  // namespace parlab::comm
