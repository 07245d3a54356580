// What only the shared-memory backend has: its segment's permissions and lifetime (nothing left
// in /dev/shm once the ranks mapped it, nor after a kill -9), its fixed summation order (bit for
// bit the rank-order sum, on every run and rank), large messages through the default slots, and
// a killed peer seen as a CollectiveError without waiting out the timeout.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <latch>
#include <numeric>

#include "runtime/comm/backend_choice.h"
#include "runtime/comm/shm/shm_communicator.h"
#include "runtime/comm/shm/shm_segment.h"
#include "tests/runtime/comm/child_process.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::comm {
namespace {

using testing::op_options;

// Entries of /dev/shm whose name starts with "<prefix>.".
std::vector<std::string> segments_named(const std::string& prefix) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix + ".", 0) == 0) found.push_back(name);
  }
  return found;
}

// A prefix no other test (or job) uses, exported for the segments this test makes.
class ScopedPrefix {
 public:
  explicit ScopedPrefix(const std::string& what) : prefix_("parlabtest." + what + "." + std::to_string(::getpid())) {
    ::setenv("PARLAB_SHM_PREFIX", prefix_.c_str(), 1);
  }
  ~ScopedPrefix() {
    shm::remove_segments(prefix_);
    ::unsetenv("PARLAB_SHM_PREFIX");
  }
  const std::string& prefix() const { return prefix_; }

 private:
  std::string prefix_;
};

TEST(ShmSegment, IsOwnerOnlyWhateverTheUmask) {
  ScopedPrefix p("mode");
  const std::string name = shm::new_segment_name();
  const mode_t old = ::umask(0);
  shm::Segment s = shm::Segment::create(name, 2, 4096, 64);
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_uid, ::getuid());
  shm::Segment::unlink(name);
  EXPECT_TRUE(segments_named(p.prefix()).empty());
}

TEST(ShmSegment, RemoveSegmentsTakesOnlyItsPrefix) {
  ScopedPrefix mine("cleanup");
  const std::string a = shm::new_segment_name(), b = shm::new_segment_name();
  auto sa = shm::Segment::create(a, 1, 4096, 64);
  auto sb = shm::Segment::create(b, 1, 4096, 64);
  const std::string other = "/parlabtest.other." + std::to_string(::getpid()) + ".x";
  auto so = shm::Segment::create(other, 1, 4096, 64);
  EXPECT_EQ(segments_named(mine.prefix()).size(), 2u);
  EXPECT_EQ(shm::remove_segments(mine.prefix()), 2);
  EXPECT_TRUE(segments_named(mine.prefix()).empty());
  EXPECT_TRUE(std::filesystem::exists("/dev/shm" + other));
  shm::Segment::unlink(other);
}

// Once every rank mapped the segment its name is gone: a kill -9 from here on leaves nothing.
TEST(ShmSegment, NameIsUnlinkedOnceEveryRankMappedIt) {
  ScopedPrefix p("unlinked");
  testing::run_ranks(3, [&](int r, Communicator& comm) {
    EXPECT_EQ(comm.backend_name(), "shm");
    std::vector<float> buf(10, 1.0f);
    comm.all_reduce(buf, op_options())->wait();  // every rank connected (rank 0 unlinked before)
    EXPECT_EQ(buf[9], 3.0f);
    EXPECT_TRUE(segments_named(p.prefix()).empty()) << "rank " << r;
    auto sub = comm.split({0, 1, 2}, "again");
    sub->barrier(op_options())->wait();
    EXPECT_TRUE(segments_named(p.prefix()).empty()) << "rank " << r;
  });
}

// Non-integer values, so the order of the additions shows in the bits: every rank gets exactly
// ((x0 + x1) + x2) + x3, on every run, and a buffer larger than many default-sized slots (default
// options) ends in a partial slice.
TEST(ShmDeterminism, AllReduceIsTheRankOrderSumBitForBit) {
  constexpr int n = 4;
  const std::size_t count = (3u << 20) / 4 * n + 12345;  // 3 MiB per rank's part, plus a tail
  auto input = [](int r, std::size_t i) {                // a hash of (r, i) as a float in [-13, 13)
    std::uint64_t x = (static_cast<std::uint64_t>(r) << 40) ^ i;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return (static_cast<float>(x >> 40) / 16777216.0f * 2.0f - 1.0f) * (1.0f + static_cast<float>(i % 13));
  };
  std::vector<float> expected(count);
  for (std::size_t i = 0; i < count; ++i) {
    float s = input(0, i);
    for (int r = 1; r < n; ++r) s += input(r, i);
    expected[i] = s;
  }
  for (int run = 0; run < 2; ++run) {
    auto store = make_in_process_store();
    testing::run_rank_threads(n, [&](int r, std::barrier<>& sync) {
      ShmOptions o;
      o.timeout = testing::kTestTimeout;
      auto comm = make_shm_communicator(store, r, n, o);
      std::vector<float> buf(count);
      for (std::size_t i = 0; i < count; ++i) buf[i] = input(r, i);
      comm->all_reduce(buf, op_options("big"))->wait();
      EXPECT_EQ(std::memcmp(buf.data(), expected.data(), count * sizeof(float)), 0)
          << "rank " << r << " run " << run << " max diff " << testing::max_abs_diff(buf, expected);
      sync.arrive_and_wait();
    });
  }
}

// Registered memory (allocate_registered): an all-reduce over any span of it, whole or at an
// offset, odd sizes and 2-4 ranks, is bit for bit the rank-order sum of the staging path, twice in
// a row on the same memory; ordinary memory beside it still works; the names are gone once mapped.
TEST(ShmRegistered, AllReduceInPlaceIsTheRankOrderSumBitForBit) {
  ScopedPrefix p("registered");
  for (int n : {2, 3, 4}) {
    auto input = [](int r, std::size_t i) { return static_cast<float>((r * 7919 + i * 104729) % 1000) / 7.0f; };
    testing::run_ranks(n, [&](int r, Communicator& comm) {
      const std::size_t count = 100003;  // not a multiple of any n: uneven parts
      RegisteredBuffer reg = comm.allocate_registered(count + 77);
      ASSERT_EQ(reg.data.size(), count + 77);
      EXPECT_TRUE(std::all_of(reg.data.begin(), reg.data.end(), [](float v) { return v == 0.0f; }));
      comm.barrier(op_options())->wait();  // rank 0 unlinked the name before it came here
      EXPECT_TRUE(segments_named(p.prefix()).empty()) << "rank " << r << ": the name outlived the mapping";
      for (std::size_t offset : {std::size_t{0}, std::size_t{77}}) {
        std::span<float> buf = reg.data.subspan(offset, count);
        std::vector<float> plain(count);
        for (std::size_t i = 0; i < count; ++i) buf[i] = plain[i] = input(r, i);
        comm.all_reduce(buf, op_options("registered"))->wait();
        comm.all_reduce(plain, op_options("plain"))->wait();
        ASSERT_EQ(std::memcmp(buf.data(), plain.data(), count * sizeof(float)), 0) << "n " << n << " rank " << r;
        float first = input(0, 5);
        for (int q = 1; q < n; ++q) first += input(q, 5);
        EXPECT_EQ(buf[5], first);
        comm.all_reduce(buf, op_options("again"))->wait();  // the sum of n equal sums
        EXPECT_EQ(buf[count - 1], plain[count - 1] * static_cast<float>(n)) << "n " << n;
      }
    });
  }
}

// A rank that passes ordinary memory where its peer passes registered memory issues another
// collective: no data is combined, and the op fails naming the disagreement, as a desync does.
TEST(ShmRegistered, RegisteredOnOneRankOnlyIsADesyncNotASilentMix) {
  testing::run_ranks(2, [&](int r, Communicator& comm) {
    RegisteredBuffer reg = comm.allocate_registered(64);
    std::vector<float> plain(64, 1.0f);
    std::fill(reg.data.begin(), reg.data.end(), 1.0f);
    CollectiveOptions o = op_options("mixed");
    o.timeout = std::chrono::milliseconds(300);
    std::span<float> mine = r == 0 ? reg.data : std::span<float>(plain);
    EXPECT_THROW(comm.all_reduce(mine, o)->wait(), CollectiveTimeout);
    EXPECT_EQ(mine[0], 1.0f) << "nothing was added";
  });
}

// An all-gather whose inputs lie in registered memory (ZeRO-3's parameter shards) at offsets that
// differ by rank, with uneven counts and a rank that contributes nothing (a layer its shard
// misses), gathers exactly what the staging path gathers, twice on the same memory; a rank that
// passes ordinary memory where its peers pass registered memory is a desync, not a silent mix.
TEST(ShmRegistered, AllGatherReadsEachRanksChunkWhereItLies) {
  for (int n : {2, 3}) {
    testing::run_ranks(n, [&](int r, Communicator& comm) {
      std::vector<int64_t> counts;
      for (int q = 0; q < n; ++q) counts.push_back(q == 1 ? 0 : 40000 + 17 * q);
      const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
      RegisteredBuffer reg = comm.allocate_registered(50000);
      const std::size_t offset = 100 + 333 * static_cast<std::size_t>(r);  // where this rank's chunk lies
      const auto mine = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
      std::span<float> in = reg.data.subspan(r == 1 ? 0 : offset, mine);
      for (std::size_t i = 0; i < mine; ++i) in[i] = static_cast<float>(r * 1000003 + i) / 3.0f;
      std::vector<float> gathered(static_cast<std::size_t>(total), -1.0f), staged(gathered.size(), -2.0f);
      const std::vector<float> plain_in(in.begin(), in.end());
      for (int again = 0; again < 2; ++again) {
        comm.all_gather_v(in, gathered, counts, op_options("registered"))->wait();
        comm.all_gather_v(plain_in, staged, counts, op_options("staged"))->wait();
        ASSERT_EQ(std::memcmp(gathered.data(), staged.data(), gathered.size() * sizeof(float)), 0) << "n " << n;
      }
      EXPECT_EQ(gathered[0], 0.0f);
      const int last = counts.back() > 0 ? n - 1 : 0;  // the last rank that contributes
      EXPECT_EQ(gathered.back(), static_cast<float>(last * 1000003 + counts[static_cast<std::size_t>(last)] - 1) / 3.0f)
          << "n " << n;
      CollectiveOptions o = op_options("mixed");
      o.timeout = std::chrono::milliseconds(300);
      std::fill(gathered.begin(), gathered.end(), 7.0f);
      EXPECT_THROW(
          comm.all_gather_v(r == 0 ? std::span<const float>(plain_in) : std::span<const float>(in), gathered, counts, o)
              ->wait(),
          CollectiveTimeout);
      for (int q = 0, at = 0; q < n; at += static_cast<int>(counts[static_cast<std::size_t>(q)]), ++q) {
        if (q != r && counts[static_cast<std::size_t>(q)] > 0) {
          EXPECT_EQ(gathered[static_cast<std::size_t>(at)], 7.0f) << "rank " << q << "'s chunk was gathered";
        }
      }
    });
  }
}

// A reduce-scatter whose input lies in registered memory (ZeRO's gradient buckets), at offsets
// that differ by rank, uneven counts with an empty part, the output in place over the rank's own
// part as the executor reduces: bit for bit the staging path's rank-order sums on 2-4 ranks;
// registered on one rank only is a desync.
TEST(ShmRegistered, ReduceScatterSumsEachRanksBucketWhereItLies) {
  for (int n : {2, 3, 4}) {
    auto input = [](int r, std::size_t i) { return static_cast<float>((r * 7919 + i * 104729) % 1000) / 7.0f; };
    testing::run_ranks(n, [&](int r, Communicator& comm) {
      std::vector<int64_t> counts;
      for (int q = 0; q < n; ++q) counts.push_back(q == 1 ? 0 : 30011 + 5 * q);
      const auto off = static_cast<std::size_t>(std::accumulate(counts.begin(), counts.begin() + r, int64_t{0}));
      const auto total = static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
      const auto mine = static_cast<std::size_t>(counts[static_cast<std::size_t>(r)]);
      RegisteredBuffer reg = comm.allocate_registered(total + 1000);
      std::span<float> bucket = reg.data.subspan(50 * static_cast<std::size_t>(r), total);
      std::vector<float> plain(total), staged(mine);
      for (std::size_t i = 0; i < total; ++i) bucket[i] = plain[i] = input(r, i);
      comm.reduce_scatter_v(bucket, counts, bucket.subspan(off, mine), op_options("registered"))->wait();
      comm.reduce_scatter_v(plain, counts, staged, op_options("staged"))->wait();
      if (mine > 0) {  // (an empty vector's data() may be null, which memcmp must not get)
        ASSERT_EQ(std::memcmp(bucket.data() + off, staged.data(), mine * sizeof(float)), 0) << "n " << n << " r " << r;
        float first = input(0, off);
        for (int q = 1; q < n; ++q) first += input(q, off);
        EXPECT_EQ(bucket[off], first) << "n " << n;
      }
      CollectiveOptions o = op_options("mixed");
      o.timeout = std::chrono::milliseconds(300);
      EXPECT_THROW(comm.reduce_scatter_v(r == 0 ? std::span<const float>(plain) : std::span<const float>(bucket),
                                         counts, staged, o)
                       ->wait(),
                   CollectiveTimeout);
    });
  }
}

// A send is eager up to two channel slices: it completes before its peer posts the recv (a
// pipeline stage's send must not wait for the next stage's scheduling, as the simulator prices
// it), and the message arrives intact later. Three slices wait for the receiver.
TEST(ShmSendRecv, ASendOfTwoSlicesCompletesBeforeItsRecvIsPosted) {
  std::latch sent(1);
  testing::run_ranks(2, [&](int r, Communicator& comm) {
    const std::size_t fits = 2 * 256 / sizeof(float);  // two of the tests' 256-byte slices
    if (r == 0) {
      std::vector<float> out(fits);
      std::iota(out.begin(), out.end(), 1.0f);
      CollectiveOptions o = op_options("eager");
      o.timeout = std::chrono::milliseconds(2000);
      EXPECT_NO_THROW(comm.send(out, 1, o)->wait());  // rank 1 has posted nothing yet
      std::fill(out.begin(), out.end(), -1.0f);       // the caller may reuse its buffer at once
      sent.count_down();
      std::vector<float> longer(fits + 1, 1.0f);
      o.timeout = std::chrono::milliseconds(300);
      EXPECT_THROW(comm.send(longer, 1, o)->wait(), CollectiveTimeout);
    } else {
      sent.wait();
      std::vector<float> in(fits, 0.0f);
      comm.recv(in, 0, op_options("eager"))->wait();
      for (std::size_t i = 0; i < fits; ++i) ASSERT_EQ(in[i], static_cast<float>(i + 1)) << i;
    }
  });
}

// Large point-to-point messages cross many channel slices in both directions.
TEST(ShmSendRecv, LargeMessagesBothWays) {
  testing::run_ranks(2, [](int r, Communicator& comm) {
    const std::size_t count = 3000;  // 256-byte channel slices in the test options: 47 slices
    std::vector<float> out(count), in(count, -1.0f);
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<float>(r * 100000 + i);
    const int peer = 1 - r;
    std::shared_ptr<Work> s, v;
    if (r == 0) {  // even sends first (the ordering contract in communicator.h)
      s = comm.send(out, peer, op_options());
      v = comm.recv(in, peer, op_options());
    } else {
      v = comm.recv(in, peer, op_options());
      s = comm.send(out, peer, op_options());
    }
    s->wait();
    v->wait();
    for (std::size_t i = 0; i < count; ++i) ASSERT_EQ(in[i], static_cast<float>(peer * 100000 + i)) << i;
  });
}

// --comm auto on "two hosts" (ranks 0, 1 on host a; 2, 3 on host b): the world is Gloo, a group
// inside a host is shared memory, a group across hosts Gloo; each still sums correctly. On one
// host the world itself is shared memory; --comm shm across hosts is refused, naming the flag.
TEST(BackendChoice, AutoUsesSharedMemoryInsideAHostAndGlooBetween) {
  auto store = make_in_process_store();
  testing::run_rank_threads(4, [&](int r, std::barrier<>& sync) {
    auto world =
        make_communicator(store, r, 4, testing::test_options(), CommChoice::kAuto, r < 2 ? "host-a" : "host-b");
    EXPECT_EQ(world->backend_name(), "gloo");
    auto node = world->split(r < 2 ? std::vector<int>{0, 1} : std::vector<int>{2, 3}, "node." + std::to_string(r / 2));
    auto across =
        world->split(r % 2 == 0 ? std::vector<int>{0, 2} : std::vector<int>{1, 3}, "x." + std::to_string(r % 2));
    EXPECT_EQ(node->backend_name(), "shm");
    EXPECT_EQ(across->backend_name(), "gloo");
    std::vector<float> a(1000, static_cast<float>(r + 1)), b(1000, static_cast<float>(r + 1));
    node->all_reduce(a, op_options())->wait();
    across->all_reduce(b, op_options())->wait();
    EXPECT_EQ(a[999], r < 2 ? 3.0f : 7.0f);       // 1 + 2, 3 + 4
    EXPECT_EQ(b[999], r % 2 == 0 ? 4.0f : 6.0f);  // 1 + 3, 2 + 4
    sync.arrive_and_wait();
  });
  auto one_host = make_in_process_store();
  testing::run_rank_threads(2, [&](int r, std::barrier<>& sync) {
    auto c = make_communicator(one_host, r, 2, testing::test_options(), CommChoice::kAuto, "host-a");
    EXPECT_EQ(c->backend_name(), "shm");
    sync.arrive_and_wait();
  });
  auto two_hosts = make_in_process_store();
  testing::run_rank_threads(2, [&](int r, std::barrier<>& sync) {
    try {
      make_communicator(two_hosts, r, 2, testing::test_options(), CommChoice::kShm, r == 0 ? "a" : "b");
      ADD_FAILURE() << "--comm shm connected ranks of two hosts";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("--comm"), std::string::npos) << e.what();
    }
    sync.arrive_and_wait();
  });
  EXPECT_EQ(parse_comm_choice("gloo"), CommChoice::kGloo);
  EXPECT_THROW(parse_comm_choice("tcp"), ConfigError);
}

std::filesystem::path fresh_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("parlab_shm_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Real processes: rank 1 is killed with SIGKILL while rank 0 waits for it in an all-reduce.
// Rank 0 learns that its peer is gone (exit 3: a CollectiveError, not the 20 s timeout), and
// /dev/shm holds nothing of the job.
TEST(ShmProcesses, KilledPeerIsACollectiveErrorAndLeavesNothing) {
  ScopedPrefix p("kill9");
  const auto dir = fresh_dir("kill9");
  std::vector<testing::ChildProcess> workers;
  for (int r = 0; r < 2; ++r) {
    workers.emplace_back(std::vector<std::string>{PARLAB_COMM_WORKER, "all-reduce", "--store",
                                                  "file:" + (dir / "store").string(), "--rank", std::to_string(r),
                                                  "--size", "2", "--count", "1000", "--comm", "shm", "--hold-rank", "1",
                                                  "--out", (dir / ("rank" + std::to_string(r) + ".txt")).string()});
  }
  const auto held = dir / "rank1.txt";
  for (int i = 0; i < 4000 && !std::filesystem::exists(held); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(std::filesystem::exists(held)) << "rank 1 never finished its first all-reduce";
  {
    std::ifstream in(held);
    int rank = -1;
    in >> rank;
    EXPECT_EQ(rank, 1);
  }
  ASSERT_EQ(::kill(workers[1].pid(), SIGKILL), 0);
  EXPECT_EQ(workers[1].wait(std::chrono::seconds(5)), std::nullopt);  // reaped; died of a signal
  EXPECT_EQ(workers[0].wait(std::chrono::seconds(15)), 3) << "rank 0 did not see its peer go";
  EXPECT_TRUE(segments_named(p.prefix()).empty());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace parlab::comm
