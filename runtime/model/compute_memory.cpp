#include "runtime/model/compute_memory.h"

#include <utility>

namespace parlab::model {

struct ComputeMemory::Pool {
  explicit Pool(std::unique_ptr<RawMemory> r) : raw(std::move(r)) {}
  ~Pool() {
    for (const auto& [bytes, p] : free_list) raw->free(p, bytes);
  }

  void* take(std::size_t bytes) {
    std::lock_guard lock(mu);
    if (const auto it = free_list.find(bytes); it != free_list.end()) {
      void* p = it->second;
      free_list.erase(it);
      cached -= static_cast<int64_t>(bytes);
      return p;
    }
    ++allocations;
    return raw->allocate(bytes);
  }
  void give_back(void* p, std::size_t bytes) {
    std::lock_guard lock(mu);
    free_list.emplace(bytes, p);
    cached += static_cast<int64_t>(bytes);
  }

  std::unique_ptr<RawMemory> raw;
  MemoryAccount account;
  mutable std::mutex mu;
  std::multimap<std::size_t, void*> free_list;
  int64_t allocations = 0;
  int64_t cached = 0;
};

namespace {

class PooledBuffer final : public ComputeBuffer {
 public:
  PooledBuffer(std::shared_ptr<ComputeMemory::Pool> pool, int64_t elements, MemoryCategory category)
      : pool_(std::move(pool)), elements_(elements), category_(category) {
    const std::size_t bytes = this->bytes();
    if (bytes > 0) data_ = static_cast<float*>(pool_->take(bytes));
    try {
      if (bytes > 0) pool_->raw->zero(data_, bytes);
    } catch (...) {
      pool_->give_back(data_, bytes);
      throw;
    }
    pool_->account.allocate(category_, static_cast<int64_t>(bytes));
  }
  ~PooledBuffer() override {
    pool_->account.release(category_, static_cast<int64_t>(bytes()));
    if (data_ != nullptr) pool_->give_back(data_, bytes());
  }
  std::span<float> span() override { return {data_, static_cast<std::size_t>(elements_)}; }

 private:
  std::size_t bytes() const { return static_cast<std::size_t>(elements_) * sizeof(float); }
  std::shared_ptr<ComputeMemory::Pool> pool_;
  int64_t elements_;
  MemoryCategory category_;
  float* data_ = nullptr;
};

}  // namespace

ComputeMemory::ComputeMemory(std::unique_ptr<RawMemory> raw) : pool_(std::make_shared<Pool>(std::move(raw))) {}

std::unique_ptr<ComputeBuffer> ComputeMemory::buffer(int64_t elements, MemoryCategory category) {
  return std::make_unique<PooledBuffer>(pool_, elements, category);
}

MemoryAccount& ComputeMemory::account() { return pool_->account; }
const MemoryAccount& ComputeMemory::account() const { return pool_->account; }

int64_t ComputeMemory::raw_allocations() const {
  std::lock_guard lock(pool_->mu);
  return pool_->allocations;
}

int64_t ComputeMemory::cached_bytes() const {
  std::lock_guard lock(pool_->mu);
  return pool_->cached;
}

const MemoryAccount* device_account_of(const Model& model) {
  const auto* owner = dynamic_cast<const DeviceMemoryOwner*>(&model);
  return owner ? &owner->device_account() : nullptr;
}

AccountCharge::AccountCharge(MemoryAccount* account, MemoryCategory category, int64_t bytes)
    : account_(account), category_(category), bytes_(bytes) {
  if (account_) account_->allocate(category_, bytes_);
}

AccountCharge::~AccountCharge() {
  if (account_) account_->release(category_, bytes_);
}

AccountCharge::AccountCharge(AccountCharge&& other) noexcept
    : account_(std::exchange(other.account_, nullptr)), category_(other.category_), bytes_(other.bytes_) {}

AccountCharge& AccountCharge::operator=(AccountCharge&& other) noexcept {
  if (this == &other) return *this;
  if (account_) account_->release(category_, bytes_);
  account_ = std::exchange(other.account_, nullptr);
  category_ = other.category_;
  bytes_ = other.bytes_;
  return *this;
}

}  // namespace parlab::model
