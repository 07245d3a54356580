// The NCCL backend. Without a GPU only the boundary checks run (error text, argument checks,
// "no device" message); with one GPU a world of size 1 goes down the same path as N (issue,
// events, recorder, timeout + abort via a stalled stream, split); with two or more, threads-as-
// ranks check every collective against closed forms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/comm/nccl/nccl_check.h"
#include "runtime/comm/nccl/nccl_communicator.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/gpu/memory.h"
#include "tests/runtime/gpu/gpu_test_support.h"

namespace parlab::comm {
namespace {

namespace cuda = compute::cuda;
using ::testing::HasSubstr;

constexpr std::chrono::milliseconds kTestTimeout{20'000};

CollectiveOptions op(std::string tag = "", std::chrono::milliseconds timeout = kTestTimeout) {
  CollectiveOptions o;
  o.timeout = timeout;
  o.tag = std::move(tag);
  return o;
}

NcclOptions options_on(cudaStream_t compute) {
  NcclOptions o;
  o.timeout = kTestTimeout;
  o.compute_stream = compute;
  return o;
}

std::vector<float> iota(std::size_t n, float start) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
  return v;
}

std::vector<float> host_copy(const cuda::DeviceBuffer<float>& buf, cudaStream_t s) {
  std::vector<float> v(buf.size());
  buf.download(v, s);
  return v;
}

// ---- no device needed ----

TEST(NcclCheck, ErrorNamesTheCallAndNcclsText) {
  try {
    PARLAB_NCCL_CHECK(ncclInvalidArgument);
    FAIL() << "no exception";
  } catch (const NcclError& e) {
    std::printf("  %s\n", e.what());
    EXPECT_EQ(e.code(), ncclInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("invalid argument"));  // ncclGetErrorString's words
    EXPECT_THAT(e.what(), HasSubstr("tests/runtime/gpu/nccl_test.cpp:"));
  }
  EXPECT_NO_THROW(PARLAB_NCCL_CHECK_ASYNC(ncclInProgress));  // nonblocking: not a failure
  EXPECT_THROW(PARLAB_NCCL_CHECK(ncclInProgress), NcclError);
}

TEST(NcclFactory, RejectsBadArgumentsBeforeTouchingAnyDevice) {
  auto store = make_in_process_store();
  EXPECT_THROW(make_nccl_communicator(nullptr, 0, 1, 0), ConfigError);
  EXPECT_THROW(make_nccl_communicator(store, 0, 0, 0), ConfigError);
  EXPECT_THROW(make_nccl_communicator(store, 1, 1, 0), ConfigError);
  NcclOptions zero;
  zero.timeout = std::chrono::milliseconds(0);
  EXPECT_THROW(make_nccl_communicator(store, 0, 1, 0, zero), ConfigError);
}

TEST(NcclFactory, ADeviceThatDoesNotExistIsNamedWithTheReason) {
  const auto& list = gpu_test::devices();
  const int missing = static_cast<int>(list.devices.size());  // one past the last ordinal
  try {
    make_nccl_communicator(make_in_process_store(), 0, 1, missing);
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    std::printf("  %s\n", e.what());
    EXPECT_EQ(e.field(), "device");
    EXPECT_EQ(e.value(), std::to_string(missing));
    if (list.devices.empty()) {
      EXPECT_THAT(e.what(), HasSubstr(list.reason));
    }
  }
}

// ---- one GPU: world size 1 ----

class SingleRank : public ::testing::Test {
 protected:
  void SetUp() override {
    PARLAB_REQUIRE_CUDA_DEVICES(1);
    guard_ = std::make_unique<cuda::DeviceGuard>(0);
    compute_ = std::make_unique<cuda::Stream>();
    comm_ = make_nccl_communicator(make_in_process_store(), 0, 1, 0, options_on(s()));
  }
  void TearDown() override { comm_.reset(); }
  cudaStream_t s() const { return compute_->get(); }
  cuda::DeviceBuffer<float> device_iota(std::size_t n, float start) {
    cuda::DeviceBuffer<float> buf(n);
    buf.upload(iota(n, start), s());
    return buf;
  }

  std::unique_ptr<cuda::DeviceGuard> guard_;
  std::unique_ptr<cuda::Stream> compute_;
  std::unique_ptr<NcclCommunicator> comm_;
};

TEST_F(SingleRank, CollectivesOnDeviceBuffers) {
  EXPECT_EQ(comm_->backend_name(), "nccl");
  EXPECT_EQ(comm_->rank(), 0);
  EXPECT_EQ(comm_->size(), 1);
  EXPECT_EQ(comm_->world_ranks(), std::vector<int>{0});
  const std::size_t n = 1000;
  // One rank: the sum over ranks is the buffer itself; gathers and scatters are copies.
  auto buf = device_iota(n, 1.0f);
  auto w0 = comm_->all_reduce(buf.span(), op("grads"));
  auto out = device_iota(n, -5.0f);
  auto w1 = comm_->reduce_scatter(buf.span(), out.span(), op());
  auto gathered = device_iota(n, -7.0f);
  auto w2 = comm_->all_gather(buf.span(), gathered.span(), op());
  auto w3 = comm_->broadcast(buf.span(), 0, op());
  auto w4 = comm_->barrier(op());
  for (const auto& w : {w0, w1, w2, w3, w4}) {
    w->wait();
    EXPECT_TRUE(w->completed());
    EXPECT_TRUE(w->succeeded());
    EXPECT_GE(w->seconds(), 0.0);
  }
  EXPECT_EQ(host_copy(buf, s()), iota(n, 1.0f));
  EXPECT_EQ(host_copy(out, s()), iota(n, 1.0f));
  EXPECT_EQ(host_copy(gathered, s()), iota(n, 1.0f));
  // The recorder: five ops, numbered in issue order, all completed.
  const auto entries = comm_->flight_recorder().snapshot().entries;
  ASSERT_EQ(entries.size(), 5u);
  const OpKind kinds[] = {OpKind::kAllReduce, OpKind::kReduceScatter, OpKind::kAllGather, OpKind::kBroadcast,
                          OpKind::kBarrier};
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(entries[i].seq, i);
    EXPECT_EQ(entries[i].op, kinds[i]);
    EXPECT_EQ(entries[i].state, OpState::kCompleted);
  }
  EXPECT_EQ(entries[0].tag, "grads");
  EXPECT_EQ(entries[0].bytes, 4000.0);
  EXPECT_EQ(comm_->flight_recorder().identity().backend, "nccl");
}

TEST_F(SingleRank, OpsWaitForTheComputeStream) {
  // Hold the compute stream, queue a copy of new values on it, then all-gather them out of place:
  // the op must deliver the NEW values, i.e. it waited for the compute stream. (The copy is
  // device-to-device: a copy from pageable host memory may synchronise with the held stream.)
  const std::size_t n = 256;
  auto src = device_iota(n, 0.0f);
  auto fresh = device_iota(n, 100.0f);
  cuda::DeviceBuffer<float> dst(n);
  compute_->synchronize();
  std::shared_ptr<Work> work;
  {
    cuda::StreamStall stall(s(), /*max_seconds=*/30.0);
    cuda::copy_on_device(src.data(), fresh.data(), src.bytes(), s());
    work = comm_->all_gather(src.span(), dst.span(), op("ordered"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(work->completed());  // the stall lasts until release
    stall.release();
  }
  work->wait();
  EXPECT_EQ(host_copy(dst, s()), iota(n, 100.0f));
}

TEST_F(SingleRank, WaitDeadlineLeavesTheOpRunning) {
  auto buf = device_iota(64, 1.0f);
  std::shared_ptr<Work> work;
  {
    cuda::StreamStall stall(s(), 30.0);
    work = comm_->all_reduce(buf.span(), op("slow"));
    try {
      work->wait(std::chrono::milliseconds(100));
      ADD_FAILURE() << "wait returned while the stream was held";
    } catch (const CollectiveTimeout& e) {
      EXPECT_THAT(e.what(), HasSubstr("Work::wait deadline"));
    }
    EXPECT_FALSE(work->completed());
    stall.release();
  }
  work->wait();  // the op itself was never aborted
  EXPECT_TRUE(work->succeeded());
  EXPECT_NO_THROW(comm_->barrier(op())->wait());
}

TEST_F(SingleRank, OpTimeoutAbortsTheCommunicatorWithATypedError) {
  auto buf = device_iota(1000, 1.0f);
  cuda::StreamStall stall(s(), 30.0);
  // ncclCommAbort may wait for the device, which the stall holds: let go of it soon after the
  // deadline from another thread, so nothing here can hang.
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    stall.release();
  });
  auto work = comm_->all_reduce(buf.span(), op("grad.bucket3", std::chrono::milliseconds(300)));
  try {
    work->wait();
    ADD_FAILURE() << "all-reduce completed behind a held stream";
  } catch (const CollectiveTimeout& e) {
    std::printf("  %s\n", e.what());
    EXPECT_EQ(e.op(), OpKind::kAllReduce);
    EXPECT_EQ(e.seq(), 0u);
    EXPECT_EQ(e.group(), "world");
    EXPECT_EQ(e.bytes(), 4000.0);
    EXPECT_EQ(e.tag(), "grad.bucket3");
    EXPECT_EQ(e.timeout_seconds(), 0.3);
    EXPECT_THAT(e.what(), HasSubstr("all-reduce #0 (tag grad.bucket3, 4.00 kB, group world)"));
  }
  release.join();
  EXPECT_TRUE(work->completed());
  EXPECT_FALSE(work->succeeded());
  const auto entries = comm_->flight_recorder().snapshot().entries;
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].state, OpState::kTimedOut);
  // Poisoned: every later op fails at once, naming the first failure.
  try {
    comm_->barrier(op());
    ADD_FAILURE() << "barrier on an aborted communicator did not throw";
  } catch (const CommunicatorAborted& e) {
    EXPECT_THAT(e.reason(), HasSubstr("all-reduce #0"));
  }
  EXPECT_THROW(comm_->split({0}, "late"), CommunicatorAborted);
}

TEST_F(SingleRank, SplitMakesAnIndependentCommunicator) {
  auto sub = comm_->split({0}, "solo");
  EXPECT_EQ(sub->group_name(), "solo");
  EXPECT_EQ(sub->size(), 1);
  auto buf = device_iota(10, 3.0f);
  sub->all_reduce(buf.span(), op())->wait();
  comm_->all_reduce(buf.span(), op())->wait();
  EXPECT_EQ(host_copy(buf, s()), iota(10, 3.0f));
  EXPECT_EQ(sub->flight_recorder().snapshot().entries.size(), 1u);
}

TEST_F(SingleRank, PeersMustBeOtherRanks) {
  auto buf = device_iota(4, 0.0f);
  EXPECT_THROW(comm_->send(buf.span(), 0, op()), ConfigError);
  const P2POp self{OpKind::kRecv, buf.span(), 0};
  EXPECT_THROW(comm_->batch_send_recv(std::span(&self, 1), op()), ConfigError);
  EXPECT_TRUE(comm_->batch_send_recv({}, op()).empty());
}

// ---- two or more GPUs: threads as ranks ----

// Runs body(rank, comm, compute stream) on n threads, rank r on device r; reports failures by
// rank. Ranks line up at the end, so no one destroys a communicator a peer still uses.
void run_ranks(int n, const std::function<void(int, NcclCommunicator&, cudaStream_t)>& body) {
  auto store = make_in_process_store();
  std::mutex mu;
  std::vector<std::string> failures;
  std::latch done(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        cuda::DeviceGuard guard(r);
        cuda::Stream compute;
        auto comm = make_nccl_communicator(store, r, n, r, options_on(compute.get()));
        body(r, *comm, compute.get());
        done.arrive_and_wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
        done.count_down();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

int ranks_to_use() { return static_cast<int>(std::min<std::size_t>(gpu_test::devices().devices.size(), 4)); }

TEST(MultiGpu, CollectivesMatchClosedForms) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  const int n = ranks_to_use();
  const std::size_t c = 1024;  // elements per rank chunk
  run_ranks(n, [&](int r, NcclCommunicator& comm, cudaStream_t s) {
    // all-reduce: rank r holds r + i  ->  sum_r (r + i) = n(n-1)/2 + n i
    cuda::DeviceBuffer<float> buf(c);
    buf.upload(iota(c, static_cast<float>(r)), s);
    comm.all_reduce(buf.span(), op("ar"))->wait();
    std::vector<float> want(c);
    for (std::size_t i = 0; i < c; ++i) want[i] = n * (n - 1) / 2.0f + n * static_cast<float>(i);
    EXPECT_EQ(host_copy(buf, s), want) << "all-reduce, rank " << r;
    // reduce-scatter: input[j] = j on every rank -> out[i] = n * (r c + i)
    cuda::DeviceBuffer<float> in(n * c), out(c);
    in.upload(iota(n * c, 0.0f), s);
    comm.reduce_scatter(in.span(), out.span(), op("rs"))->wait();
    for (std::size_t i = 0; i < c; ++i) want[i] = n * static_cast<float>(r * c + i);
    EXPECT_EQ(host_copy(out, s), want) << "reduce-scatter, rank " << r;
    // all-gather: rank q contributes q * 1000 + i -> gathered[q c + i]
    cuda::DeviceBuffer<float> mine(c), all(n * c);
    mine.upload(iota(c, 1000.0f * r), s);
    comm.all_gather(mine.span(), all.span(), op("ag"))->wait();
    std::vector<float> want_all(n * c);
    for (int q = 0; q < n; ++q)
      for (std::size_t i = 0; i < c; ++i) want_all[q * c + i] = 1000.0f * q + i;
    EXPECT_EQ(host_copy(all, s), want_all) << "all-gather, rank " << r;
    // broadcast from the last rank
    buf.upload(iota(c, 7.0f * r), s);
    comm.broadcast(buf.span(), n - 1, op("bc"))->wait();
    EXPECT_EQ(host_copy(buf, s), iota(c, 7.0f * (n - 1))) << "broadcast, rank " << r;
    comm.barrier(op())->wait();
  });
}

// Uneven chunks as ZeRO cuts them: rank q's chunk has 100 q + 37 elements, except rank 1's which
// is EMPTY (a shard boundary inside another rank's part of a bucket). Checked against closed
// forms, in place (the output aliases the rank's own chunk, as the executor calls it) and not.
TEST(MultiGpu, UnevenReduceScatterAndAllGatherMatchClosedFormsWithAnEmptyChunk) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  const int n = ranks_to_use();
  std::vector<int64_t> counts(n), offsets(n, 0);
  for (int q = 0; q < n; ++q) counts[q] = q == 1 ? 0 : 100 * q + 37;
  for (int q = 1; q < n; ++q) offsets[q] = offsets[q - 1] + counts[q - 1];
  const auto total = static_cast<std::size_t>(offsets[n - 1] + counts[n - 1]);
  run_ranks(n, [&](int r, NcclCommunicator& comm, cudaStream_t s) {
    const auto mine = static_cast<std::size_t>(counts[r]);
    // reduce-scatter: rank q holds q + j at j -> chunk r of the sum holds sum_q (q + j).
    std::vector<float> want(mine);
    for (std::size_t i = 0; i < mine; ++i)
      want[i] = n * (n - 1) / 2.0f + n * static_cast<float>(offsets[r] + static_cast<int64_t>(i));
    for (bool in_place : {false, true}) {
      cuda::DeviceBuffer<float> in(total), out(std::max<std::size_t>(mine, 1));
      in.upload(iota(total, static_cast<float>(r)), s);
      const std::span<float> dst = in_place ? in.span().subspan(offsets[r], mine) : out.span().subspan(0, mine);
      comm.reduce_scatter_v(in.span(), counts, dst, op("rsv"))->wait();
      std::vector<float> got(mine);
      if (mine > 0) compute::cuda::copy_to_host_sync(got.data(), dst.data(), mine * sizeof(float), s);
      EXPECT_EQ(got, want) << "reduce_scatter_v, in place " << in_place << ", rank " << r;
    }
    // all-gather: rank q contributes 1000 q + i -> out[offset_q + i].
    std::vector<float> want_all(total);
    for (int q = 0; q < n; ++q)
      for (int64_t i = 0; i < counts[q]; ++i) want_all[offsets[q] + i] = 1000.0f * q + static_cast<float>(i);
    for (bool in_place : {false, true}) {
      cuda::DeviceBuffer<float> all(total), src(std::max<std::size_t>(mine, 1));
      all.upload(std::vector<float>(total, -1.0f), s);
      const std::vector<float> contribution = iota(mine, 1000.0f * r);
      const std::span<float> from = in_place ? all.span().subspan(offsets[r], mine) : src.span().subspan(0, mine);
      if (mine > 0) compute::cuda::copy_to_device(from.data(), contribution.data(), mine * sizeof(float), s);
      comm.all_gather_v(from, all.span(), counts, op("agv"))->wait();
      EXPECT_EQ(host_copy(all, s), want_all) << "all_gather_v, in place " << in_place << ", rank " << r;
    }
  });
}

TEST(MultiGpu, RingExchangeInOneGroupCannotDeadlock) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  const int n = ranks_to_use();
  run_ranks(n, [&](int r, NcclCommunicator& comm, cudaStream_t s) {
    // Everyone sends to the right and receives from the left in one group.
    cuda::DeviceBuffer<float> out(100), in(100);
    out.upload(iota(100, 100.0f * r), s);
    const int right = (r + 1) % n, left = (r + n - 1) % n;
    const P2POp ops[] = {{OpKind::kSend, out.span(), right}, {OpKind::kRecv, in.span(), left}};
    for (const auto& w : comm.batch_send_recv(ops, op("ring"))) w->wait();
    EXPECT_EQ(host_copy(in, s), iota(100, 100.0f * left)) << "rank " << r;
    const auto entries = comm.flight_recorder().snapshot().entries;
    ASSERT_EQ(entries.size(), 2u);
    EXPECT_EQ(entries[0].op, OpKind::kSend);
    EXPECT_EQ(entries[0].peer, right);
    EXPECT_EQ(entries[1].op, OpKind::kRecv);
    EXPECT_EQ(entries[1].peer, left);
  });
}

TEST(MultiGpu, RankThatNeverJoinsAnAllReduceTimesOut) {
  PARLAB_REQUIRE_CUDA_DEVICES(2);
  run_ranks(2, [&](int r, NcclCommunicator& comm, cudaStream_t s) {
    cuda::DeviceBuffer<float> buf(1000);
    buf.upload(iota(1000, 1.0f), s);
    comm.all_reduce(buf.span(), op("warmup"))->wait();
    if (r == 1) {  // the straggler: connected, never calls all-reduce #1
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
      comm.abort("test over");
      return;
    }
    auto work = comm.all_reduce(buf.span(), op("grad.bucket3", std::chrono::milliseconds(500)));
    try {
      work->wait();
      ADD_FAILURE() << "all-reduce #1 completed without rank 1";
    } catch (const CollectiveTimeout& e) {
      EXPECT_EQ(e.seq(), 1u);
      EXPECT_EQ(e.tag(), "grad.bucket3");
      EXPECT_EQ(e.group(), "world");
    }
    EXPECT_THROW(comm.barrier(op()), CommunicatorAborted);
  });
}

}  // namespace
}  // namespace parlab::comm
