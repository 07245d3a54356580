#pragma once
// One rank's measured memory beside the memory ledger's prediction for the same plan.
//
// measured  the accounting allocator's peak per category over the run (memory_account.h), and
//           the process's peak resident set (VmHWM: everything, libraries and Gloo included),
//           read when the rank's work is done (the kernel keeps the high-water mark, so no
//           peak between two reads is missed, as a poller's can be)
// resident  how the OS's figure splits: the resident set before the trainer existed (libraries,
//           the runtime, the Gloo world's connections), the accounted peak, the communicators'
//           own scratch buffers, and the rest (the allocator's slack: freed memory it keeps,
//           page rounding; kernels' workspaces the account does not see)
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
  int64_t resident_peak_bytes = 0;      // VmHWM of the process; 0 when unknown
  int64_t resident_baseline_bytes = 0;  // VmRSS before the trainer was built; 0 when unknown
  int64_t comm_scratch_bytes = 0;       // the communicators' own buffers (Gloo ring scratch, ZeRO's bucket ring)

  int64_t measured(model::MemoryCategory c) const { return measured_peak_bytes[static_cast<int>(c)]; }
  double ledger(model::MemoryCategory c) const { return ledger_bytes[static_cast<int>(c)]; }
  // measured / ledger - 1 (nullopt when the ledger predicts 0).
  std::optional<double> deviation(model::MemoryCategory c) const;
  // The resident peak nothing above explains: resident - baseline - accounted - comm scratch
  // (allocator slack and unaccounted workspaces); nullopt when resident or baseline is unknown.
  std::optional<int64_t> unexplained_resident_bytes() const;

  nlohmann::json to_json() const;
  static MemoryReport from_json(const nlohmann::json& j);  // throws ConfigError
};

// The trainer's report so far; `cluster` sized to the plan's world (the ledger's device).
MemoryReport memory_report(const Trainer& trainer, const strategy::ClusterSpec& cluster);

// The process's peak resident set size in bytes (/proc/self/status VmHWM), 0 if unreadable.
int64_t resident_peak_bytes();
// The process's resident set size now (/proc/self/status VmRSS), 0 if unreadable.
int64_t resident_bytes();

}  // namespace parlab::train
