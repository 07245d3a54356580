#pragma once
// The communication thread of one communicator: ops run one at a time, in issue order, each
// tracked by a Work handle and a flight-recorder entry. The first failure poisons the queue:
// ops already queued behind it fail with CommunicatorAborted, and so does every later submit().
// Backend-neutral; a backend supplies the body that performs the op and throws on failure.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/comm/communicator.h"
#include "runtime/comm/flight_recorder.h"

namespace parlab::comm {

class OpQueue {
 public:
  using Body = std::function<void()>;
  // Called once, on the communication thread, right after the first failure (e.g. to dump the
  // flight recorder). Must not throw.
  using FailureHook = std::function<void(const std::exception_ptr&)>;

  OpQueue(std::string group, FlightRecorder& recorder, FailureHook on_failure = {});
  // Runs what is still queued (after a failure those fail at once), then joins the thread.
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  // Queues `body` for `info`; throws CommunicatorAborted if the queue is poisoned. With
  // `caller_waits` (the caller waits for the op at once) and nothing queued or running, the op
  // runs here, on the calling thread, and the returned Work has ended: the same order, recorder
  // entry and errors, without two thread hand-offs (each a wake-up, tens of microseconds on a
  // loaded or virtual machine: more than a small tensor-parallel all-reduce itself takes).
  std::shared_ptr<Work> submit(const OpInfo& info, Body body, bool caller_waits = false);
  // Throws CommunicatorAborted if poisoned (for calls that bypass the queue, like split).
  void check_usable() const;

 private:
  struct Item {
    std::shared_ptr<Work> work;
    std::uint64_t record_id;
    Body body;
  };
  void loop();
  void run(Item& item);

  const std::string group_;
  FlightRecorder& recorder_;
  FailureHook on_failure_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;
  bool stopping_ = false;
  bool running_ = false;       // an op runs (on the thread or inline); the next waits for it
  std::string poison_reason_;  // empty while usable
  std::thread thread_;         // last: starts after everything above exists
};

}  // namespace parlab::comm
