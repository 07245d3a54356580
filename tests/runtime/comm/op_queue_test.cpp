// OpQueue: ops run one at a time in issue order; a caller that waits at once may run its op on
// its own thread, but only when nothing is queued or running ahead of it.
#include "runtime/comm/op_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "runtime/comm/errors.h"

namespace parlab::comm {
namespace {

OpInfo op(std::uint64_t seq) { return OpInfo{OpKind::kAllReduce, seq, "tp.0", 4.0, "t" + std::to_string(seq), -1, {}}; }

RecorderIdentity identity() { return RecorderIdentity{"shm", "tp.0", 0, 2, 0, 2}; }

TEST(OpQueue, ACallerThatWaitsRunsItsOpOnItsOwnThreadWhenNothingIsAhead) {
  FlightRecorder rec(identity(), 16);
  OpQueue q("tp.0", rec);
  std::thread::id ran_on;
  auto w = q.submit(
      op(0), [&] { ran_on = std::this_thread::get_id(); }, /*caller_waits=*/true);
  EXPECT_TRUE(w->completed());  // ended before submit returned
  EXPECT_TRUE(w->succeeded());
  EXPECT_EQ(ran_on, std::this_thread::get_id());
  const auto d = rec.snapshot();
  ASSERT_EQ(d.entries.size(), 1u);
  EXPECT_EQ(d.entries[0].state, OpState::kCompleted);
  EXPECT_TRUE(d.entries[0].start_seconds.has_value());

  // Without caller_waits the op runs on the queue's thread.
  auto queued = q.submit(op(1), [&] { ran_on = std::this_thread::get_id(); });
  queued->wait();
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(OpQueue, ACallerThatWaitsQueuesBehindARunningOpAndKeepsTheOrder) {
  FlightRecorder rec(identity(), 16);
  OpQueue q("tp.0", rec);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<bool> first_started{false};
  std::vector<int> order;
  auto first = q.submit(op(0), [&] {
    first_started = true;
    gate.wait();
    order.push_back(0);
  });
  while (!first_started) std::this_thread::yield();
  std::thread::id ran_on;
  auto second = q.submit(
      op(1),
      [&] {
        ran_on = std::this_thread::get_id();
        order.push_back(1);
      },
      /*caller_waits=*/true);
  EXPECT_FALSE(second->completed());  // queued: the first still runs
  release.set_value();
  second->wait();
  EXPECT_TRUE(first->completed());
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_NE(ran_on, std::this_thread::get_id());
}

TEST(OpQueue, AnOpRunOnTheCallersThreadFailsAndPoisonsLikeAQueuedOne) {
  FlightRecorder rec(identity(), 16);
  OpQueue q("tp.0", rec);
  auto w = q.submit(
      op(0), [] { throw CollectiveError(op(0), "peer gone"); }, /*caller_waits=*/true);
  EXPECT_TRUE(w->completed());
  EXPECT_FALSE(w->succeeded());
  EXPECT_THROW(w->wait(), CollectiveError);
  EXPECT_EQ(rec.snapshot().entries.at(0).state, OpState::kFailed);
  EXPECT_THROW(q.submit(
                   op(1), [] {}, true),
               CommunicatorAborted);
}

}  // namespace
}  // namespace parlab::comm
