#pragma once
// A device model's compute memory (model.h: ComputeBuffer), counted and pooled.
//
// Counted: every buffer is charged to the memory's own account (memory_account.h) by the
// ledger's category while it is held, so a device run reports its device bytes per category
// beside the ledger as the host reports its host bytes (DeviceMemoryOwner below).
// Pooled: a released buffer goes back to a free list under its size, and the next request of
// that size takes it, so the step's transient buffers (ZeRO's gathered layers and buckets, a
// pipeline send's copy) come from the device allocator in the first step only: a step after it
// calls no cudaMalloc/cudaFree (which synchronise the device). The sizes repeat step after step
// (the same layers, buckets and boundaries), so exact-size reuse is enough. raw_allocations()
// counts the device allocator's calls, which is how tests see it.
//
// Reuse is safe in stream order: a buffer is released only after the ops that used it were
// waited for (the executor waits on a collective before dropping its buffer), and whoever takes
// it next writes it on the model's stream (or a communicator's, which waits for that stream).
// What the free list holds is cached, not charged: it is the pool's, reported apart.
//
// The CUDA model gives it cudaMalloc (runtime/compute/cuda); the host stand-in of the device
// tests the heap, so the same pool and accounting are proven on machines without a GPU.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/model/memory_account.h"
#include "runtime/model/model.h"

namespace parlab::model {

// A device's allocator. zero() is ordered like the device's other work (a stream on a GPU).
class RawMemory {
 public:
  virtual ~RawMemory() = default;
  virtual void* allocate(std::size_t bytes) = 0;  // throws when the device cannot hold it
  virtual void free(void* p, std::size_t bytes) noexcept = 0;
  virtual void zero(void* p, std::size_t bytes) = 0;
};

class ComputeMemory {
 public:
  explicit ComputeMemory(std::unique_ptr<RawMemory> raw);

  // `elements` floats, zeroed, charged to `category` until the buffer is destroyed. The buffer
  // may outlive this object (the pool lives until its last buffer is gone).
  std::unique_ptr<ComputeBuffer> buffer(int64_t elements, MemoryCategory category);

  MemoryAccount& account();
  const MemoryAccount& account() const;
  int64_t raw_allocations() const;  // RawMemory::allocate calls so far
  int64_t cached_bytes() const;     // released buffers waiting in the free list

  struct Pool;  // shared with the buffers

 private:
  std::shared_ptr<Pool> pool_;
};

// A model whose compute memory is a device's, not the host's (the CUDA model, the host stand-in
// of the device tests): the account of what the device holds, by category, which a run reports
// beside the ledger in place of the host's (train/memory_report.cpp). Null for other models.
class DeviceMemoryOwner {
 public:
  virtual const MemoryAccount& device_account() const = 0;

 protected:
  ~DeviceMemoryOwner() = default;
};
const MemoryAccount* device_account_of(const Model& model);

// Bytes charged to an account for as long as the object lives (a device model's own buffers,
// allocated once, whose sizes it knows).
class AccountCharge {
 public:
  AccountCharge() = default;
  AccountCharge(MemoryAccount* account, MemoryCategory category, int64_t bytes);
  ~AccountCharge();
  AccountCharge(AccountCharge&& other) noexcept;
  AccountCharge& operator=(AccountCharge&& other) noexcept;
  AccountCharge(const AccountCharge&) = delete;
  AccountCharge& operator=(const AccountCharge&) = delete;

 private:
  MemoryAccount* account_ = nullptr;
  MemoryCategory category_ = MemoryCategory::kTemporary;
  int64_t bytes_ = 0;
};

}  // namespace parlab::model
