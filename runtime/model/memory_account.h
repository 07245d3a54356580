#pragma once
// Counting the bytes a rank holds, by what they are for, with an accounting allocator.
//
// The categories are the memory ledger's (strategy/ledger.h), so a run can print its measured
// peak beside the ledger's prediction for the same plan:
//   parameters   the weights the rank keeps between steps (ZeRO-3: its shard only)
//   gradients    the gradients it keeps (ZeRO-2/3: its reduced shard only)
//   optimizer    optimizer state (AdamW's two moments, SGD's momentum; ZeRO-1+: a shard)
//   activations  what microbatches carry through forward and backward (MicrobatchState)
//   temporary    buffers that live only during part of a step: ZeRO-3's gathered layers,
//                ZeRO-2/3's gradient buckets awaiting their reduce-scatter, backward scratch
// Memory inside the communication library (Gloo's ring scratch) is not counted, as PyTorch's
// allocator does not see NCCL's own buffers.
//
// A CountingAllocator<T> carries an account and a category; a container built with it charges
// every allocation to that category and credits every deallocation, so the account's peak is
// the true high-water mark of live bytes, not a sum of sizes sampled between ops. A default
// allocator (no account) counts nothing. Thread-safe: counters are atomics.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace parlab::model {

enum class MemoryCategory { kParameters, kGradients, kOptimizer, kActivations, kTemporary };
inline constexpr int kMemoryCategories = 5;
std::string_view to_string(MemoryCategory c);  // "parameters", "gradients", ...

// Peak (and current) bytes per category, and the peak of their sum.
struct MemoryUsage {
  std::array<int64_t, kMemoryCategories> peak_bytes{};
  std::array<int64_t, kMemoryCategories> current_bytes{};
  int64_t peak_total_bytes = 0;
  int64_t peak(MemoryCategory c) const { return peak_bytes[static_cast<int>(c)]; }
};

class MemoryAccount {
 public:
  void allocate(MemoryCategory c, int64_t bytes);
  void release(MemoryCategory c, int64_t bytes);
  int64_t current(MemoryCategory c) const;
  int64_t peak(MemoryCategory c) const;
  int64_t peak_total() const { return peak_total_.load(std::memory_order_relaxed); }
  MemoryUsage usage() const;
  // Starts the peaks again from the current values (e.g. after set-up, to measure steps only).
  void reset_peaks();

 private:
  std::array<std::atomic<int64_t>, kMemoryCategories> current_{};
  std::array<std::atomic<int64_t>, kMemoryCategories> peak_{};
  std::atomic<int64_t> total_{0}, peak_total_{0};
};

// Makes this process keep the memory it frees for its next allocations (once; idempotent). A
// rank frees its microbatches' activations and backward scratch (1 MB buffers at the lab's
// shapes) and allocates them again every microbatch. With glibc's defaults a freed buffer goes
// back to the OS, by munmap above a threshold that adapts to the process's history or by
// trimming the heap's top, and the next microbatch faults every page in again: an fp32 lab-mlp
// step faulted 18k pages, 0.43 s of its 2.18 s (bench_model, issue 35), and how much depended on
// what the process had freed before, so a profile and a training run of the same shapes in two
// processes disagreed by up to 30% (issue 30). Buffers below 32 MiB (glibc's largest mmap
// threshold) now come from the heap, and the heap returns memory only above 1 GiB free at its
// top; model state (parameters, gradients, moments: larger) is still mapped on its own. What a
// rank holds at its peak is unchanged: freed memory is reused, not added to.
void keep_freed_memory();

// Blocks of 32 MiB and more, which glibc maps on their own and unmaps when freed: ZeRO-3's gathered
// layers, made and freed per layer, pass and microbatch. Once keep_freed_memory() was called, a
// freed block is kept (up to 1 GiB in all) for the next block of its size, so a step's gathers
// reuse the pages of the step before instead of faulting new ones in (a lab-mlp ZeRO-3 step on 2
// ranks spent 330 ms of its 1180 in such faults on a VM that zeroes new memory at 0.36 GB/s). A
// new block of a size none kept has first returns the kept ones to the OS, so what the process
// holds never exceeds what it had in use at once. CountingAllocator allocates through these.
inline constexpr std::size_t kLargeBlockBytes = std::size_t(32) << 20;
void* allocate_large_block(std::size_t bytes);
void free_large_block(void* p, std::size_t bytes);
// Bytes kept for reuse now (tests).
std::size_t kept_large_block_bytes();

template <typename T>
class CountingAllocator {
 public:
  using value_type = T;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;

  CountingAllocator() = default;
  CountingAllocator(MemoryAccount* account, MemoryCategory category) : account_(account), category_(category) {}
  template <typename U>
  CountingAllocator(const CountingAllocator<U>& o) : account_(o.account()), category_(o.category()) {}

  T* allocate(std::size_t n) {
    T* p = n * sizeof(T) >= kLargeBlockBytes ? static_cast<T*>(allocate_large_block(n * sizeof(T)))
                                             : std::allocator<T>().allocate(n);
    if (account_) account_->allocate(category_, static_cast<int64_t>(n * sizeof(T)));
    return p;
  }
  void deallocate(T* p, std::size_t n) {
    if (account_) account_->release(category_, static_cast<int64_t>(n * sizeof(T)));
    if (n * sizeof(T) >= kLargeBlockBytes)
      free_large_block(p, n * sizeof(T));
    else
      std::allocator<T>().deallocate(p, n);
  }

  MemoryAccount* account() const { return account_; }
  MemoryCategory category() const { return category_; }
  template <typename U>
  bool operator==(const CountingAllocator<U>& o) const {
    return account_ == o.account() && category_ == o.category();
  }

 private:
  MemoryAccount* account_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kTemporary;
};

template <typename T>
using CountedVector = std::vector<T, CountingAllocator<T>>;

// An empty vector charging `category` of `account` (null: uncounted).
template <typename T>
CountedVector<T> counted_vector(MemoryAccount* account, MemoryCategory category, std::size_t n = 0) {
  CountedVector<T> v{CountingAllocator<T>(account, category)};
  if (n > 0) v.assign(n, T{});
  return v;
}

// Frees a vector's storage, keeping its allocator (assigning a fresh vector would replace it).
template <typename V>
void release_storage(V& v) {
  v.clear();
  v.shrink_to_fit();
}

// Memory the account did not allocate but its owner now holds as its own (another allocator's,
// e.g. a communicator's registered memory): charges `bytes` of `category` to `account` (null:
// uncounted) and releases them when the returned handle goes; the handle also keeps `keep` alive.
std::shared_ptr<void> charge_while_held(std::shared_ptr<void> keep, MemoryAccount* account, MemoryCategory category,
                                        int64_t bytes);

}  // namespace parlab::model
