#pragma once
// The memory ledger: what one rank must hold, in bytes, for a model trained with a plan —
// parameters, gradients, optimizer state, activations and temporary buffers — against what its
// device holds. "Find what cannot fit" is the first step of the lesson, so every formula cites
// its source next to the code (ledger.cpp).
//
// Beside it, the seed's decision procedure as the "rule" baseline: DDP fits when a replica
// fits; shard model state when it does not; tensor split when one layer does not fit; pipeline
// candidate when activations outweigh parameters.
#include <string>
#include <vector>

#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::strategy {

struct MemoryLedger {
  int rank = 0;
  int stage = 0;                  // pipeline stage of the rank
  double params_held = 0;         // parameter count this rank keeps (after TP split, before ZeRO)
  int inflight_microbatches = 0;  // microbatch-chunks whose activations are alive at the peak
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double temp_bytes = 0;  // communication buckets, all-gather buffers, p2p buffers
  double device_bytes = 0;

  double model_state_bytes() const { return params_bytes + grads_bytes + optimizer_bytes; }
  double total_bytes() const { return model_state_bytes() + activations_bytes + temp_bytes; }
  bool fits() const { return total_bytes() <= device_bytes; }
};

// One category of a ledger as its formula with the numbers in, e.g.
//   "optimizer = 8 B x 67.2M / 4 (ZeRO-1 over dp 4) = 134 MB".
// Written by the same pass that computes the category (compute_ledger), so the text and the
// number cannot disagree; the desktop lab shows it as is.
struct LedgerTerm {
  std::string category;  // "parameters", "gradients", "optimizer", "activations", "temporary"
  std::string formula;   // the whole line, "category = ... = value"
  double bytes = 0;      // the ledger's value for the category
};

struct ExplainedLedger {
  MemoryLedger ledger;
  std::vector<LedgerTerm> terms;  // one per category, in the ledger's order
};

// `plan` must be resolved (strategy::resolve) for `cluster` sized to the plan's world.
MemoryLedger compute_ledger(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster, int rank);
// The same with the model's layer list already built.
MemoryLedger compute_ledger(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan,
                            const ClusterSpec& cluster, int rank);
// compute_ledger with each category's formula, numbers substituted.
ExplainedLedger explain_ledger(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan,
                               const ClusterSpec& cluster, int rank);
// One ledger per pipeline stage (its first rank): ranks of a stage hold the same amounts.
std::vector<MemoryLedger> ledger_per_stage(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster);
std::vector<MemoryLedger> ledger_per_stage(const ModelSpec& model, const std::vector<LayerSpec>& layers,
                                           const Plan& plan, const ClusterSpec& cluster);
// The stage with the largest total (the one that decides whether the plan fits).
MemoryLedger worst_stage(const std::vector<MemoryLedger>& stages);

// One line saying what the ledger charges per parameter to each category for the plan's
// precision and mixed_state (printed beside every ledger table).
std::string state_convention(const Plan& plan);

// Activation bytes one microbatch leaves in memory for one layer (Korthikanti et al. 2022).
double activation_bytes(const LayerSpec& layer, const ModelSpec& model, const Plan& plan);

// ---- the seed's rule ----
struct RuleInputs {
  double params_bytes = 0;
  double grads_bytes = 0;
  double optimizer_bytes = 0;
  double activations_bytes = 0;
  double largest_layer_bytes = 0;
  double device_bytes = 0;
};

struct RuleVerdict {
  double replica_bytes = 0;          // params + grads + optimizer + activations
  bool ddp_fits = false;             // replica <= device
  bool shard_model_state = false;    // replica > device
  bool tensor_split_needed = false;  // largest layer > device
  bool pipeline_candidate = false;   // activations > parameters
  // "none", "total state", "one oversized layer" or "activations".
  std::string blocker;
  // The splits the rule proposes, smallest first ("DDP", "ZeRO sharding", ...).
  std::vector<std::string> candidates;
};

RuleVerdict apply_rule(const RuleInputs& in);
// The rule's inputs for a model: one unsplit replica at the plan's microbatch, precision and
// optimizer; the largest layer's parameters + gradients + optimizer state.
RuleInputs rule_inputs(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster);

}  // namespace parlab::strategy
