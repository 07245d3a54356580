#pragma once
// Shared helpers for the checkpoint tests: a scratch directory, a deterministic training state
// whose every float has a distinct bit pattern, threads-as-ranks, and bitwise comparison.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/checkpoint/coordinator.h"
#include "runtime/checkpoint/state.h"
#include "tests/support/scratch_dir.h"

namespace parlab::checkpoint::testing {

// A fresh directory per test, removed at scope exit (tests/support/scratch_dir.h).
using parlab::testing::ScratchDir;

// Element i of tensor t is a value no other element of any tensor shares (including a negative
// zero and a subnormal), so a misplaced element cannot compare equal by accident.
inline float distinct_value(int tensor, int64_t i, int64_t salt) {
  if (i == 0) return -0.0f;
  if (i == 1) return 1e-40f;  // subnormal
  return static_cast<float>(tensor * 1000003 + i + salt) * 0.001f - 17.5f;
}

// A small model-like state: two layers' weights and biases, AdamW moments, an SGD momentum
// buffer, a scalar, and sizes that do not divide evenly by 2, 3 or 4.
inline TrainingState make_state(int64_t step, int64_t salt = 0) {
  TrainingState s;
  s.step = step;
  const std::vector<std::pair<std::string, std::vector<int64_t>>> specs = {
      {"fc1.weight", {7, 5}},
      {"fc1.bias", {7}},
      {"fc1.weight.exp_avg", {7, 5}},
      {"fc1.weight.exp_avg_sq", {7, 5}},
      {"fc2.weight", {3, 7}},
      {"fc2.bias", {3}},
      {"fc2.weight.momentum_buffer", {3, 7}},
      {"loss_scale", {}},
  };
  for (size_t t = 0; t < specs.size(); ++t) {
    Tensor x{specs[t].first, specs[t].second, {}};
    int64_t n = 1;
    for (int64_t d : x.shape) n *= d;
    for (int64_t i = 0; i < n; ++i) x.data.push_back(distinct_value(static_cast<int>(t), i, salt));
    s.tensors.push_back(std::move(x));
  }
  s.metadata = {{"optimizer", {{"name", "adamw"}, {"step", step}, {"lr", 3e-4}}},
                {"sampler", {{"epoch", 2}, {"samples_consumed", 4096 + step}}},
                {"rng", {{"torch", "philox:1234:5678"}, {"data", 18446744073709551615ull}}},
                {"plan", {{"dp", 4}, {"zero", 1}}}};
  return s;
}

// Run fn(coordinator) on W threads as W ranks; rethrows the first exception after all joined.
inline void run_ranks(int world_size, const std::function<void(Coordinator&)>& fn) {
  LocalGroup group(world_size);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world_size));
  std::vector<std::thread> threads;
  for (int r = 0; r < world_size; ++r) {
    threads.emplace_back([&, r] {
      auto member = group.member(r);
      try {
        fn(member);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

// Bitwise equality of two float arrays (so -0.0 vs 0.0 or NaN payloads would be caught), with the
// first differing index in the failure message.
inline ::testing::AssertionResult bits_equal(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) {
    return ::testing::AssertionFailure() << "sizes differ: " << a.size() << " vs " << b.size();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    uint32_t x, y;
    std::memcpy(&x, &a[i], 4);
    std::memcpy(&y, &b[i], 4);
    if (x != y) {
      return ::testing::AssertionFailure()
             << "element " << i << ": " << a[i] << " (0x" << std::hex << x << ") vs " << b[i] << " (0x" << y << ")";
    }
  }
  return ::testing::AssertionSuccess();
}

inline void expect_same_state(const TrainingState& want, const TrainingState& got) {
  EXPECT_EQ(got.step, want.step);
  EXPECT_EQ(got.metadata, want.metadata);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    SCOPED_TRACE(want.tensors[i].name);
    EXPECT_EQ(got.tensors[i].name, want.tensors[i].name);
    EXPECT_EQ(got.tensors[i].shape, want.tensors[i].shape);
    EXPECT_TRUE(bits_equal(want.tensors[i].data, got.tensors[i].data));
  }
}

}  // namespace parlab::checkpoint::testing
