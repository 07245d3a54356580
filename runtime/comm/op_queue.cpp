#include "runtime/comm/op_queue.h"

namespace parlab::comm {

OpQueue::OpQueue(std::string group, FlightRecorder& recorder, FailureHook on_failure)
    : group_(std::move(group)), recorder_(recorder), on_failure_(std::move(on_failure)), thread_([this] { loop(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OpQueue::check_usable() const {
  std::lock_guard lock(mu_);
  if (!poison_reason_.empty()) throw CommunicatorAborted(group_, poison_reason_);
}

std::shared_ptr<Work> OpQueue::submit(const OpInfo& info, Body body, bool caller_waits) {
  auto work = std::make_shared<Work>(info);
  Item inline_item;
  {
    std::lock_guard lock(mu_);
    if (!poison_reason_.empty()) throw CommunicatorAborted(group_, poison_reason_);
    Item item{work, recorder_.record(info), std::move(body)};
    if (caller_waits && items_.empty() && !running_) {
      running_ = true;  // the thread takes nothing until this op ended
      inline_item = std::move(item);
    } else {
      items_.push_back(std::move(item));
    }
  }
  if (inline_item.work) {
    run(inline_item);
    {
      std::lock_guard lock(mu_);
      running_ = false;
    }
  }
  cv_.notify_one();
  return work;
}

void OpQueue::loop() {
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ ? !running_ : !items_.empty() && !running_; });
      if (items_.empty()) return;  // stopping and drained
      item = std::move(items_.front());
      items_.pop_front();
      running_ = true;
    }
    run(item);
    std::lock_guard lock(mu_);
    running_ = false;
  }
}

void OpQueue::run(Item& item) {
  std::string poisoned;
  {
    std::lock_guard lock(mu_);
    poisoned = poison_reason_;
  }
  if (!poisoned.empty()) {
    // Queued behind a failure: its peers may be anywhere, so do not touch the transport.
    recorder_.ended(item.record_id, OpState::kFailed, "not run: " + poisoned);
    item.work->finish(std::make_exception_ptr(CommunicatorAborted(group_, poisoned)));
    return;
  }
  recorder_.started(item.record_id);
  item.work->start();
  std::exception_ptr error;
  OpState state = OpState::kCompleted;
  std::string message;
  try {
    item.body();
  } catch (const CollectiveTimeout& e) {
    error = std::current_exception();
    state = OpState::kTimedOut;
    message = e.what();
  } catch (const std::exception& e) {
    error = std::current_exception();
    state = OpState::kFailed;
    message = e.what();
  }
  if (error) {
    std::lock_guard lock(mu_);
    poison_reason_ = message;
  }
  // Record before finishing the Work, so a waiter that wakes up sees the final entry.
  recorder_.ended(item.record_id, state, message);
  if (error && on_failure_) on_failure_(error);
  item.work->finish(error);
}

}  // namespace parlab::comm
