#include "runtime/model/memory_account.h"

#include <malloc.h>

#include <mutex>

namespace parlab::model {
namespace {

void raise_to(std::atomic<int64_t>& peak, int64_t value) {
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {}
}

}  // namespace

void keep_freed_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  });
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
