// Never a silent hang: a rank that never joins makes the others raise a typed error naming the
// op, and the communicator refuses further work. Timeouts here are 1 s.
#include <barrier>
#include <chrono>
#include <filesystem>
#include <latch>

#include "runtime/comm/flight_recorder.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

using Clock = std::chrono::steady_clock;
using testing::op_options;

constexpr std::chrono::milliseconds kShort{1000};
// Upper bound for "raised within the timeout": loose on purpose (a loaded CI box), but far below
// the 10 s of kTestTimeout and the hang it guards against.
constexpr double kMarginSeconds = 5.0;

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("parlab_comm_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// World 3; everyone connects and runs all-reduce #0, then rank 2 never issues all-reduce #1.
TEST(Timeout, RankThatNeverJoinsAnAllReduce) {
  constexpr int n = 3;
  const auto dump_dir = fresh_dir("timeout");
  GlooOptions options = testing::test_options();
  options.dump_dir = dump_dir;
  auto store = make_in_process_store();
  std::latch done(n);
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = testing::make_test_communicator(store, r, n, options);
        std::vector<float> buf(1000, 1.0f);
        comm->all_reduce(buf, op_options("warmup"))->wait();
        if (r == 2) {  // the straggler: alive, connected, never calls
          done.arrive_and_wait();
          return;
        }
        CollectiveOptions o;
        o.timeout = kShort;
        o.tag = "grad.bucket3";
        const auto t0 = Clock::now();
        auto work = comm->all_reduce(buf, o);
        try {
          work->wait();
          failures[r] = "all-reduce #1 completed without rank 2";
        } catch (const CollectiveTimeout& e) {
          const double waited = std::chrono::duration<double>(Clock::now() - t0).count();
          EXPECT_GE(waited, 0.9 * 1.0) << "rank " << r << " gave up before its timeout";
          EXPECT_LT(waited, 1.0 + kMarginSeconds) << "rank " << r;
          EXPECT_EQ(e.op(), OpKind::kAllReduce);
          EXPECT_EQ(e.seq(), 1u);
          EXPECT_EQ(e.group(), "world");
          EXPECT_EQ(e.bytes(), 4000.0);
          EXPECT_EQ(e.tag(), "grad.bucket3");
          EXPECT_EQ(e.timeout_seconds(), 1.0);
          EXPECT_EQ(std::string(e.what()).rfind("all-reduce #1 (tag grad.bucket3, 4.00 kB, group "
                                                "world) did not complete within 1.00 s",
                                                0),
                    0u)
              << e.what();
        }
        EXPECT_TRUE(work->completed());
        EXPECT_FALSE(work->succeeded());

        // The recorder shows #0 completed and #1 timed out, never completed.
        const auto entries = comm->flight_recorder().snapshot().entries;
        EXPECT_EQ(entries.size(), 2u);
        if (entries.size() == 2) {
          EXPECT_EQ(entries[0].state, OpState::kCompleted);
          EXPECT_EQ(entries[1].seq, 1u);
          EXPECT_EQ(entries[1].state, OpState::kTimedOut);
          EXPECT_EQ(entries[1].tag, "grad.bucket3");
          EXPECT_NE(entries[1].error.find("did not complete"), std::string::npos);
        }
        // ... and was dumped on failure, for `parlab analyze hang`.
        const auto dump = FlightRecorder::load(dump_dir / flight_recorder_file_name("world", r));
        EXPECT_EQ(dump.identity.rank, r);
        EXPECT_EQ(dump.identity.world_size, n);
        EXPECT_EQ(dump.entries.back().state, OpState::kTimedOut);

        // Poisoned: further ops throw at once, saying why.
        try {
          comm->barrier(op_options());
          failures[r] = "barrier on a poisoned communicator did not throw";
        } catch (const CommunicatorAborted& e) {
          EXPECT_EQ(e.group(), "world");
          EXPECT_NE(e.reason().find("all-reduce #1"), std::string::npos) << e.what();
        }
        EXPECT_THROW(comm->split({r}, "late"), CommunicatorAborted);
        done.arrive_and_wait();  // nobody closes connections while a peer is still timing out
      } catch (const std::exception& e) {
        failures[r] = e.what();
        done.count_down();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
  std::filesystem::remove_all(dump_dir);
}

// Ops queued behind a timed-out op fail without touching the transport.
TEST(Timeout, QueuedOpsFailWithTheFirstReason) {
  auto store = make_in_process_store();
  std::latch done(2);
  std::vector<std::string> failures(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        auto comm = testing::make_test_communicator(store, r, 2, testing::test_options());
        if (r == 0) {
          std::vector<float> a(10), b(10);
          CollectiveOptions o;
          o.timeout = kShort;
          auto first = comm->all_reduce(a, o);
          auto second = comm->all_reduce(b, o);
          EXPECT_THROW(first->wait(), CollectiveTimeout);
          EXPECT_THROW(second->wait(), CommunicatorAborted);
          const auto entries = comm->flight_recorder().snapshot().entries;
          EXPECT_EQ(entries.at(1).state, OpState::kFailed);
          EXPECT_NE(entries.at(1).error.find("not run"), std::string::npos);
        }
        done.arrive_and_wait();
      } catch (const std::exception& e) {
        failures[r] = e.what();
        done.count_down();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

// Every op kind raises CollectiveTimeout when its peer never calls (rank 1 stays idle). A
// shared-memory send is eager up to two channel slices, so its send here is longer than that.
TEST(Timeout, EveryOpKindRaises) {
  const std::vector<OpKind> kinds = {OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast,
                                     OpKind::kBarrier,       OpKind::kSend,      OpKind::kRecv};
  for (OpKind kind : kinds) {
    SCOPED_TRACE(std::string(to_string(kind)));
    testing::run_ranks(2, [&](int r, Communicator& comm) {
      if (r == 1) return;  // idle; run_ranks keeps it connected until rank 0 is done
      CollectiveOptions o;
      o.timeout = std::chrono::milliseconds(300);
      o.tag = "t";
      std::vector<float> a(64, 1.0f), b(32), message(1000, 1.0f);  // 4000 B: 16 slices of the tests' 256
      std::shared_ptr<Work> w;
      switch (kind) {
        case OpKind::kReduceScatter:
          w = comm.reduce_scatter(a, b, o);
          break;
        case OpKind::kAllGather:
          w = comm.all_gather(b, a, o);
          break;
        case OpKind::kBroadcast:
          w = comm.broadcast(a, 0, o);
          break;
        case OpKind::kBarrier:
          w = comm.barrier(o);
          break;
        case OpKind::kSend:
          w = comm.send(message, 1, o);
          break;
        case OpKind::kRecv:
          w = comm.recv(a, 1, o);
          break;
        default:
          break;
      }
      try {
        w->wait();
        ADD_FAILURE() << "completed without its peer";
      } catch (const CollectiveTimeout& e) {
        EXPECT_EQ(e.op(), kind);
        EXPECT_EQ(e.timeout_seconds(), 0.3);
      }
    });
  }
}

// A peer that goes away (closes its connections) is a CollectiveError, not a timeout: the
// survivors learn at once instead of waiting out their timeout.
TEST(Failure, PeerThatLeavesIsACollectiveError) {
  auto store = make_in_process_store();
  std::latch left(1);
  std::string outcome;
  std::thread leaver([&] {
    auto comm = testing::make_test_communicator(store, 1, 2, testing::test_options());
    comm.reset();
    left.count_down();
  });
  std::thread survivor([&] {
    auto comm = testing::make_test_communicator(store, 0, 2, testing::test_options());
    left.wait();
    std::vector<float> buf(1000, 1.0f);
    try {
      comm->all_reduce(buf, op_options("after.leave"))->wait();
      outcome = "completed";
    } catch (const CollectiveTimeout& e) {
      outcome = std::string("timeout: ") + e.what();
    } catch (const CollectiveError& e) {
      outcome = "error";
      EXPECT_EQ(e.op(), OpKind::kAllReduce);
      EXPECT_NE(std::string(e.what()).find("all-reduce #0 (tag after.leave"), std::string::npos) << e.what();
      EXPECT_EQ(comm->flight_recorder().snapshot().entries.back().state, OpState::kFailed);
    }
  });
  leaver.join();
  survivor.join();
  EXPECT_EQ(outcome, "error");
}

// A caller-side deadline shorter than the op's own: wait() gives up, the op keeps running and
// completes once the peer arrives.
TEST(Timeout, WaitDeadlineLeavesTheOpRunning) {
  std::atomic<bool> rank0_gave_up{false};
  testing::run_ranks(2, [&](int r, Communicator& comm) {
    std::vector<float> buf(10, 1.0f);
    if (r == 0) {
      auto work = comm.all_reduce(buf, op_options());
      EXPECT_THROW(work->wait(std::chrono::milliseconds(50)), CollectiveTimeout);
      rank0_gave_up = true;
      work->wait();
    } else {
      while (!rank0_gave_up) std::this_thread::yield();
      comm.all_reduce(buf, op_options())->wait();
    }
    EXPECT_EQ(buf[0], 2.0f);
  });
}

// Rendezvous: ranks 0 and 1 of 3 raise, naming rank 2, instead of waiting forever.
TEST(Timeout, RankThatNeverJoinsTheRendezvous) {
  auto store = make_in_process_store();
  GlooOptions options;
  options.timeout = kShort;
  std::vector<std::string> messages(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      const auto t0 = Clock::now();
      try {
        testing::make_test_communicator(store, r, 3, options);
        messages[r] = "connected without rank 2";
      } catch (const RendezvousError& e) {
        EXPECT_TRUE(e.timed_out());
        EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 1.0 + kMarginSeconds);
        messages[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_NE(messages[r].find("rank 2 of 3 never joined"), std::string::npos) << messages[r];
    EXPECT_NE(messages[r].find("attempt 0"), std::string::npos) << messages[r];
  }
}

// Attempt k never reads attempt k-1's keys: the same directory serves a restarted job, and
// reusing an attempt is refused rather than connecting to dead addresses.
TEST(Rendezvous, AttemptsAreIsolatedInOneFileStore) {
  const auto dir = fresh_dir("attempts");
  auto run_attempt = [&](int attempt, float value) {
    GlooOptions options = testing::test_options();
    options.attempt = attempt;
    testing::run_ranks(
        2,
        [&](int r, Communicator& comm) {
          std::vector<float> buf(5, value + r);
          comm.all_reduce(buf, op_options())->wait();
          EXPECT_EQ(buf[4], 2 * value + 1);
        },
        options, make_file_store(dir));
  };
  run_attempt(0, 1.0f);
  run_attempt(1, 10.0f);
  // Attempt 0 again: its keys are still there, so joining is refused loudly.
  GlooOptions options = testing::test_options();
  auto store = make_file_store(dir);
  try {
    testing::make_test_communicator(store, 0, 2, options);
    FAIL() << "a reused attempt connected";
  } catch (const RendezvousError& e) {
    EXPECT_FALSE(e.timed_out());
    EXPECT_NE(std::string(e.what()).find("new attempt"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace parlab::comm
