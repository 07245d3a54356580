#include "runtime/model/memory_account.h"

#include <malloc.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

namespace parlab::model {
namespace {

void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {}
}

}  // namespace

namespace {
struct LargeBlocks {
  std::mutex mu;
  bool keep = false;                       // keep_freed_memory() was called
  std::multimap<std::size_t, void*> kept;  // by size
  std::size_t kept_bytes = 0;
};
LargeBlocks& large_blocks() {
  static LargeBlocks* blocks = new LargeBlocks;  // never destroyed: blocks may be freed at exit
  return *blocks;
}
constexpr std::size_t kMaxKeptBytes = std::size_t(1) << 30;
}  // namespace

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    std::lock_guard lock(large_blocks().mu);
    large_blocks().keep = true;
  });
}

void* allocate_large_block(std::size_t bytes) {
  LargeBlocks& b = large_blocks();
  {
    std::lock_guard lock(b.mu);
    if (const auto it = b.kept.find(bytes); it != b.kept.end()) {
      void* p = it->second;
      b.kept.erase(it);
      b.kept_bytes -= bytes;
      return p;
    }
    for (const auto& [size, p] : b.kept) std::free(p);  // never more than was in use at once
    b.kept.clear();
    b.kept_bytes = 0;
  }
  void* p = std::malloc(bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void free_large_block(void* p, std::size_t bytes) {
  LargeBlocks& b = large_blocks();
  {
    std::lock_guard lock(b.mu);
    if (b.keep && b.kept_bytes + bytes <= kMaxKeptBytes) {
      b.kept.emplace(bytes, p);
      b.kept_bytes += bytes;
      return;
    }
  }
  std::free(p);
}

std::size_t kept_large_block_bytes() {
  std::lock_guard lock(large_blocks().mu);
  return large_blocks().kept_bytes;
}

std::string_view to_string(MemoryCategory c) {
  switch (c) {
    case MemoryCategory::kParameters:
      return "parameters";
    case MemoryCategory::kGradients:
      return "gradients";
    case MemoryCategory::kOptimizer:
      return "optimizer";
    case MemoryCategory::kActivations:
      return "activations";
    case MemoryCategory::kTemporary:
      return "temporary";
  }
  return "?";
}

void MemoryAccount::allocate(MemoryCategory c, int64_t bytes) {
  const int i = static_cast<int>(c);
  raise_to(peak_[i], current_[i].fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_to(peak_total_, total_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryAccount::release(MemoryCategory c, int64_t bytes) {
  current_[static_cast<int>(c)].fetch_sub(bytes, std::memory_order_relaxed);
  total_.fetch_sub(bytes, std::memory_order_relaxed);
}

int64_t MemoryAccount::current(MemoryCategory c) const {
  return current_[static_cast<int>(c)].load(std::memory_order_relaxed);
}

int64_t MemoryAccount::peak(MemoryCategory c) const {
  return peak_[static_cast<int>(c)].load(std::memory_order_relaxed);
}

MemoryUsage MemoryAccount::usage() const {
  MemoryUsage u;
  for (int i = 0; i < kMemoryCategories; ++i) {
    u.peak_bytes[i] = peak_[i].load(std::memory_order_relaxed);
    u.current_bytes[i] = current_[i].load(std::memory_order_relaxed);
  }
  u.peak_total_bytes = peak_total();
  return u;
}

void MemoryAccount::reset_peaks() {
  for (int i = 0; i < kMemoryCategories; ++i) peak_[i].store(current_[i].load());
  peak_total_.store(total_.load());
}

std::shared_ptr<void> charge_while_held(std::shared_ptr<void> keep, MemoryAccount* account, MemoryCategory category,
                                        int64_t bytes) {
  struct Charge {
    std::shared_ptr<void> keep;
    MemoryAccount* account;
    MemoryCategory category;
    int64_t bytes;
    ~Charge() {
      if (account) account->release(category, bytes);
    }
  };
  if (account) account->allocate(category, bytes);
  return std::shared_ptr<Charge>(new Charge{std::move(keep), account, category, bytes});  // no temporary to release it
}

}  // namespace parlab::model
