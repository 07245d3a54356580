// retain_freed_heap: memory a microbatch frees is reused by the next without page faults.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstring>
#include <memory>
#include <vector>

#include "runtime/model/memory_account.h"

namespace parlab::model {
namespace {

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// A microbatch's pattern at the lab's shapes: sixteen 1 MiB buffers allocated and written (the
// forward's saved activations), then all freed (the backward), round after round.
int64_t faults_per_round_after_the_first(int rounds) {
  constexpr size_t kBuffers = 16, kBytes = size_t{1} << 20;
  int64_t faults = 0;
  for (int r = 0; r < rounds; ++r) {
    const int64_t before = minor_faults();
    std::vector<std::unique_ptr<char[]>> buffers;
    for (size_t b = 0; b < kBuffers; ++b) {
      buffers.emplace_back(new char[kBytes]);
      std::memset(buffers.back().get(), static_cast<int>(r + b), kBytes);
    }
    buffers.clear();
    if (r > 0) faults += minor_faults() - before;
  }
  return faults / (rounds - 1);
}

TEST(HeapRetentionTest, FreedActivationSizedBuffersAreReusedWithoutPageFaults) {
  retain_freed_heap();
  retain_freed_heap();  // harmless twice
  // 16 MiB written per round is 4096 pages: were the freed heap handed back to the OS, each round
  // would fault most of them in again. Kept, a round faults (nearly) none.
  const int64_t faults = faults_per_round_after_the_first(6);
  EXPECT_LT(faults, 4096 / 16) << faults << " minor page faults per round of 16 MiB";
}

}  // namespace
}  // namespace parlab::model

namespace parlab::model {
namespace {

// Large counted buffers start on a page, so two of a size never sit a few bytes apart modulo
// 4 KiB (4K aliasing between a kernel's input and output); small ones keep the heap's alignment.
TEST(HeapRetentionTest, LargeCountedBuffersStartOnAPage) {
  MemoryAccount account;
  std::vector<CountedVector<float>> buffers;
  for (int i = 0; i < 4; ++i) buffers.push_back(counted_vector<float>(&account, MemoryCategory::kActivations, 1 << 18));
  for (const auto& b : buffers) EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 4 * (int64_t{1} << 20));
  for (auto& b : buffers) release_storage(b);
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 0);
  CountedVector<float> small = counted_vector<float>(&account, MemoryCategory::kTemporary, 16);
  EXPECT_EQ(account.current(MemoryCategory::kTemporary), 64);
}

}  // namespace
}  // namespace parlab::model
