#pragma once
// One rank's measured memory beside the memory ledger's prediction for the same plan.
//
// measured  the accounting allocator's peak per category over the run (memory_account.h), and
//           the process's peak resident set (VmHWM: everything, libraries and Gloo included)
// ledger    strategy::compute_ledger for the plan and this rank (strategy/ledger.h)
// The goal (and a test) holds parameters, gradients and optimizer state to 5% of the ledger and
// activations to 15%. Temporary buffers are shown but not held to it: the ledger models
// PyTorch's DDP, which copies gradients into two bucket buffers; this runtime reduces DDP and
// ZeRO-1 buckets in place, and its ZeRO-2/3 buckets are whole layers' worth.
#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "runtime/model/memory_account.h"
#include "strategy/cluster_spec.h"

namespace parlab::train {

class Trainer;

struct MemoryReport {
  int rank = 0;
  std::array<int64_t, model::kMemoryCategories> measured_peak_bytes{};
  std::array<double, model::kMemoryCategories> ledger_bytes{};
  int64_t measured_peak_total_bytes = 0;  // peak of the sum (not the sum of peaks)
  double ledger_total_bytes = 0;
  int64_t resident_peak_bytes = 0;        // VmHWM of the process; 0 when unknown

  int64_t measured(model::MemoryCategory c) const { return measured_peak_bytes[static_cast<int>(c)]; }
  double ledger(model::MemoryCategory c) const { return ledger_bytes[static_cast<int>(c)]; }
  // measured / ledger - 1 (nullopt when the ledger predicts 0).
  std::optional<double> deviation(model::MemoryCategory c) const;

  nlohmann::json to_json() const;
  static MemoryReport from_json(const nlohmann::json& j);  // throws ConfigError
};

// The trainer's report so far; `cluster` sized to the plan's world (the ledger's device).
MemoryReport memory_report(const Trainer& trainer, const strategy::ClusterSpec& cluster);

// The process's peak resident set size in bytes (/proc/self/status VmHWM), 0 if unreadable.
int64_t resident_peak_bytes();

}  // namespace parlab::train
