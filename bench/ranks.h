#pragma once
// Threads as ranks over real Gloo or shared memory (an in-process rendezvous store), the harness
// the runtime benches share: each rank runs `body(rank, communicator, sync)` and then meets the others once
// more; a rank that throws drops out of `sync`, so the others are not left waiting, and after
// every thread has joined the first failure is rethrown naming its rank.
#include <barrier>
#include <chrono>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/rendezvous.h"
#include "runtime/comm/shm/shm_communicator.h"

namespace parlab::bench {

enum class RanksOver { kGloo, kShm };

template <class Body>
void run_ranks(int world, std::chrono::milliseconds timeout, Body body, RanksOver over = RanksOver::kGloo) {
  auto store = comm::make_in_process_store();
  std::mutex mu;
  std::string failure;
  std::barrier<> sync(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = timeout;
        auto c = over == RanksOver::kShm ? comm::make_shm_communicator(store, r, world, comm::shm_options_from(go))
                                         : comm::make_gloo_communicator(store, r, world, go);
        body(r, *c, sync);
        sync.arrive_and_wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        if (failure.empty()) failure = "rank " + std::to_string(r) + ": " + e.what();
        sync.arrive_and_drop();
      }
    });
  }
  for (auto& t : threads) t.join();
  if (!failure.empty()) throw std::runtime_error(failure);
}

}  // namespace parlab::bench
