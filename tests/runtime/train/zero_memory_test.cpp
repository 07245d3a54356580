// ZeRO's memory as the OS counts it (issue: a ZeRO-3 worker's resident set grew to 3x its
// training peak at the end of a run, and the run reported a "resident" read before that): a
// ZeRO-3 rank holds no more after each step than after the second, its fingerprint gathers one
// tensor at a time instead of the whole state, and the resident a report gives is the process's
// high-water mark (VmHWM), not its resident set at the moment of reading.
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer_checkpoint.h"
#include "tests/runtime/train/train_fixture.h"

namespace parlab::train {
namespace {

using model::MemoryCategory;

// /proc/self/status "<key>  N kB", read here independently of memory_report.cpp.
int64_t status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::istringstream fields(line.substr(key.size() + 1));
      int64_t kib = 0;
      fields >> kib;
      return kib * 1024;
    }
  return -1;
}

// 256 -> 1024 -> 256, 4 blocks: 2.1 M parameters, 25 MB of fp32 state with AdamW, so a gather of
// the whole state (on each of 4 rank threads) stands out of the process's resident set.
TrainConfig mid_config(int world) {
  TrainConfig c;
  c.model = strategy::parse_model_toml(
      "name = \"mid\"\nkind = \"mlp\"\nlayers = 4\nhidden = 256\nffn = 1024\nclasses = 16\nmicrobatch = 8\n"
      "precision = \"fp32\"\n",
      "mid.toml");
  c.plan = resolve_train_plan(c.model, "gbs=32,mb=8,zero=3", world, strategy::load_cluster("cpu-local"));
  c.optimizer = AdamWConfig{.lr = 1e-3};
  c.data_size = 256;
  c.seed = 3;
  c.comm_timeout = testing::kTestTimeout;
  return c;
}

struct StepMemory {
  int64_t account_peak = 0;   // the accounting allocator's peak total so far
  int64_t account_now = 0;    // what the rank holds between steps
  int64_t temporary_now = 0;  // of which the step's buffers
};

// Every step of a 20-step ZeRO-3 run on 4 ranks: what the accounting allocator saw, and the
// process's VmHWM after the second step and after the last (all ranks are threads of this process).
TEST(ZeroMemoryTest, AZeroThreeRankHoldsNoMoreAfterEachStepThanAfterTheSecond) {
  constexpr int kWorld = 4, kSteps = 20;
  const TrainConfig cfg = mid_config(kWorld);
  std::vector<std::vector<StepMemory>> seen(kWorld);
  std::vector<int64_t> temporary_peak(kWorld, 0);
  int64_t hwm_after_second = 0, hwm_after_last = 0;
  auto store = comm::make_in_process_store();
  comm::testing::run_rank_threads(kWorld, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, kWorld, go);
    Trainer trainer(cfg, *c, {});
    for (int s = 0; s < kSteps; ++s) {
      trainer.step();
      const model::MemoryAccount& m = trainer.memory();
      int64_t now = 0;
      for (int64_t b : m.usage().current_bytes) now += b;
      seen[r].push_back({m.peak_total(), now, m.current(MemoryCategory::kTemporary)});
      sync.arrive_and_wait();  // every rank has finished step s
      if (r == 0 && s == 1) hwm_after_second = resident_peak_bytes();
      if (r == 0 && s == kSteps - 1) hwm_after_last = resident_peak_bytes();
      sync.arrive_and_wait();
    }
    temporary_peak[r] = trainer.memory().peak(MemoryCategory::kTemporary);
  });
  for (int r = 0; r < kWorld; ++r)
    for (int s = 2; s < kSteps; ++s) {
      EXPECT_EQ(seen[r][s].account_peak, seen[r][1].account_peak) << "rank " << r << " step " << s;
      EXPECT_EQ(seen[r][s].account_now, seen[r][1].account_now) << "rank " << r << " step " << s;
      EXPECT_EQ(seen[r][s].temporary_now, seen[r][1].temporary_now) << "rank " << r << " step " << s;
    }
  // The OS's figure: ranks' transient buffers may coincide differently from step to step, so the
  // high-water mark may move by up to their peaks together, never by what 18 steps of per-step
  // or per-collective growth would add.
  int64_t transients = 0;
  for (int64_t t : temporary_peak) transients += t;
  ASSERT_GT(hwm_after_second, 0);
  EXPECT_LE(hwm_after_last - hwm_after_second, transients)
      << "VmHWM after step 2 " << hwm_after_second << " B, after step " << kSteps << " " << hwm_after_last << " B";
}

// The fingerprint (every run's last word, a collective under ZeRO) gathers each tensor on its own:
// no all-gather larger than the largest tensor, one per tensor and state buffer, and the process's
// high-water mark does not rise by a rank's whole state per rank, as gathering it all at once did.
TEST(ZeroMemoryTest, TheFingerprintGathersOneTensorAtATime) {
  constexpr int kWorld = 4;
  const TrainConfig cfg = mid_config(kWorld);
  const model::ParamLayout layout(mlp_shape(cfg.model));
  int64_t largest = 0;
  for (const model::ParamTensor& p : layout.tensors()) largest = std::max(largest, p.numel);
  const int64_t state_bytes = 3 * layout.numel() * 4;  // parameters and the two AdamW moments
  std::vector<std::vector<double>> gather_bytes(kWorld);
  std::vector<std::string> hashes(kWorld);
  int64_t hwm_before = 0, hwm_after = 0;
  auto store = comm::make_in_process_store();
  comm::testing::run_rank_threads(kWorld, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, kWorld, go);
    Trainer trainer(cfg, *c, {});
    trainer.step();
    sync.arrive_and_wait();
    if (r == 0) hwm_before = resident_peak_bytes();
    sync.arrive_and_wait();
    hashes[r] = state_fingerprint(trainer).combined_hex();
    sync.arrive_and_wait();
    if (r == 0) hwm_after = resident_peak_bytes();
    for (const comm::Communicator* k : trainer.communicators())
      for (const comm::FlightRecord& e : k->flight_recorder().snapshot().entries)
        if (e.tag.rfind("fingerprint.", 0) == 0) gather_bytes[r].push_back(e.bytes);
  });
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r;
    EXPECT_EQ(gather_bytes[r].size(), 3 * layout.tensors().size()) << "rank " << r;
    for (double b : gather_bytes[r]) EXPECT_LE(b, double(largest * 4)) << "rank " << r;
  }
  EXPECT_LT(hwm_after - hwm_before, state_bytes)
      << "VmHWM before the fingerprint " << hwm_before << " B, after " << hwm_after << " B";
}

// What a report calls resident is the high-water mark: a block touched and unmapped again is in
// it, though no longer in the resident set.
TEST(MemoryReportTest, ResidentIsTheProcessHighWaterMark) {
  // VmHWM only grows, and reading /proc may itself touch a page: the report's figure lies between
  // two reads of it taken around it.
  const int64_t hwm_first = status_bytes("VmHWM");
  const int64_t reported = resident_peak_bytes();
  const int64_t hwm_last = status_bytes("VmHWM");
  EXPECT_LE(hwm_first, reported);
  EXPECT_LE(reported, hwm_last);
  EXPECT_GT(reported, 0);
  constexpr size_t kBlock = size_t{96} << 20;
  const int64_t before = resident_bytes();
  void* p = ::mmap(nullptr, kBlock, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  std::memset(p, 1, kBlock);  // resident now
  ::munmap(p, kBlock);
  const int64_t peak = resident_peak_bytes(), now = resident_bytes();
  EXPECT_EQ(peak, status_bytes("VmHWM"));
  EXPECT_GE(peak, before + int64_t(kBlock) * 9 / 10);
  EXPECT_LT(now, peak - int64_t(kBlock) / 2) << "VmRSS after the unmap must be below the peak the report gives";

  const TrainConfig cfg = testing::tiny_config("gbs=8,mb=4,zero=3", 2, 64);
  auto store = comm::make_in_process_store();
  std::vector<MemoryReport> reports(2);
  comm::testing::run_rank_threads(2, [&](int r, std::barrier<>&) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, 2, go);
    Trainer trainer(cfg, *c, {});
    trainer.step();
    reports[r] = memory_report(trainer, strategy::load_cluster("cpu-local"));
  });
  for (const MemoryReport& m : reports) {
    EXPECT_GE(m.resident_peak_bytes, peak) << "rank " << m.rank << ": the report's resident is the high-water mark";
    EXPECT_LE(m.resident_peak_bytes, status_bytes("VmHWM")) << "rank " << m.rank;
  }
}

}  // namespace
}  // namespace parlab::train
