#pragma once
// Threads-as-ranks (as Gloo's own tests): every rank is a thread with its own Gloo device and
// communicator, all meeting through one in-process store. Failures inside a rank are collected
// and reported with the rank that raised them.
//
// The same tests run on the shared-memory backend: test_comm_shm compiles them with
// PARLAB_TEST_SHM, and make_test_communicator() then connects shm communicators, with slots and
// channels so small that every op of a few thousand elements runs in many rounds.
#include <gtest/gtest.h>

#include <barrier>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/comm/shm/shm_communicator.h"

namespace parlab::comm::testing {

// Generous for the passing path (a loaded 2-core CI box), short enough that a bug fails fast.
inline constexpr std::chrono::milliseconds kTestTimeout{10'000};

inline GlooOptions test_options() {
  GlooOptions o;
  o.timeout = kTestTimeout;
  return o;
}

inline CollectiveOptions op_options(std::string tag = "") {
  CollectiveOptions o;
  o.timeout = kTestTimeout;
  o.tag = std::move(tag);
  return o;
}

#ifdef PARLAB_TEST_SHM
inline constexpr std::string_view kBackend = "shm";
#else
inline constexpr std::string_view kBackend = "gloo";
#endif

// Small enough that the closed-form tests cross many round and slice boundaries.
inline ShmOptions test_shm_options(const GlooOptions& o) {
  ShmOptions s = shm_options_from(o);
  s.slot_bytes = 4096;
  s.channel_bytes = 256;
  return s;
}

// A communicator of the backend under test (kBackend).
inline std::unique_ptr<Communicator> make_test_communicator(std::shared_ptr<Store> store, int rank, int size,
                                                            const GlooOptions& options) {
  if (kBackend == "shm") return make_shm_communicator(std::move(store), rank, size, test_shm_options(options));
  return make_gloo_communicator(std::move(store), rank, size, options);
}

// Runs `body(rank, sync)` on `n` threads and reports an exception in a rank as a test failure
// naming the rank. A body that finishes calls sync.arrive_and_wait() while its communicator is
// still alive, so no rank tears one down while a peer still uses it; a rank that throws drops
// out of the barrier instead.
inline void run_rank_threads(int n, const std::function<void(int, std::barrier<>&)>& body) {
  std::mutex mu;
  std::vector<std::string> failures;
  std::barrier sync(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r, sync);
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        failures.push_back("rank " + std::to_string(r) + ": " + e.what());
        sync.arrive_and_drop();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Runs `body(rank, comm)` on `n` threads over a fresh in-process store (run_rank_threads).
inline void run_ranks(int n, const std::function<void(int, Communicator&)>& body, GlooOptions options = test_options(),
                      std::shared_ptr<Store> store = nullptr) {
  if (!store) store = make_in_process_store();
  run_rank_threads(n, [&](int r, std::barrier<>& sync) {
    auto comm = make_test_communicator(store, r, n, options);
    body(r, *comm);
    sync.arrive_and_wait();
  });
}

// Largest |a[i] - b[i]|, for failure messages.
template <typename A, typename B>
double max_abs_diff(const A& a, const B& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    m = std::max(m, std::abs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return m;
}

}  // namespace parlab::comm::testing
