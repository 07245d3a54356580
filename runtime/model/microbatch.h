#pragma once
// Everything one microbatch carries through the lab-mlp: inputs, labels, the boundary tensors
// between layers, the activations each layer saves for its backward, and the loss.
//
// Boundary tensors (the ones a pipeline stage sends and receives), for l in [0, L]:
//   activation(l)  (B, h)  input of layer l (activation(0): the data; activation(L): head input)
//   dactivation(l) (B, h)  dL/d activation(l)
// A stage running layers [a, b) receives activation(a) and sends activation(b) in the forward
// pass, then receives dactivation(b) and sends dactivation(a) in the backward pass.
// Buffers are allocated (zero-filled) on first access, so a stage only pays for its own layers.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/memory_account.h"
#include "runtime/model/param_layout.h"

namespace parlab::model {

class MicrobatchState {
 public:
  // `batch` samples (0 is legal: every layer is then a no-op) out of a global batch of
  // `global_batch` samples over all microbatches and data-parallel ranks of this step.
  // Throws ConfigError unless 0 <= batch and 1 <= global_batch and batch <= global_batch.
  // With an account, every buffer is charged to its activations category.
  MicrobatchState(const MlpShape& shape, int64_t batch, int64_t global_batch, MemoryAccount* account = nullptr);

  int64_t batch() const { return batch_; }
  int64_t global_batch() const { return global_batch_; }
  // dL/dlosses[b] = 1 / global_batch: summing gradients over microbatches and ranks (plain SUM
  // all-reduce) then gives the gradient of the global mean loss.
  float loss_scale() const { return loss_scale_; }

  // Boundary tensors, l in [0, L] (see above). Allocated on first access.
  std::span<float> activation(int l);
  std::span<float> dactivation(int l);
  bool has_activation(int l) const;
  bool has_dactivation(int l) const;

  // (B) class of each sample, in [0, C); read by the head.
  std::span<int32_t> labels() { return labels_; }
  std::span<const int32_t> labels() const { return labels_; }

  // Valid after the head's forward: logits (B, C), per-sample cross-entropy (B), and their sum.
  std::span<const float> logits() const { return logits_; }
  std::span<const float> losses() const { return losses_; }
  double loss_sum() const;
  // A device model's head forward (model.h): the logits (B, C) and losses (B) it computed, copied
  // here so loss_sum() and correct() read the same on every device. Throws RuntimeError on sizes.
  void set_head_outputs(std::span<const float> logits, std::span<const float> losses);
  // Number of samples whose largest logit is their label (ties count as wrong).
  int64_t correct() const;

  // Bytes this state holds right now (boundary tensors, saved activations, labels, head
  // outputs): the measured counterpart of the memory ledger's activation term.
  int64_t allocated_bytes() const;
  // Frees the boundary tensors, saved activations and probabilities once the microbatch's last
  // backward ran (the executor calls it, so accumulation over microbatches holds one
  // microbatch's activations at a time, as the ledger assumes). Labels, logits and losses stay
  // for loss_sum() and correct().
  void release_activations();

 private:
  friend class LabMlp;
  // What block i saves in its forward for its backward; freed by its backward.
  struct BlockSaved {
    CountedVector<float> pre;   // (B, f) fc1 output, the GELU input
    CountedVector<float> post;  // (B, f) GELU output, the fc2 input
    bool present = false;
    // Mixed precision saves these instead (bf16 bits): the block input, GELU input and output.
    CountedVector<uint16_t> x16, pre16, post16;
  };

  void check_boundary(int l) const;

  MlpShape shape_;
  int64_t batch_ = 0;
  int64_t global_batch_ = 1;
  float loss_scale_ = 1.0f;
  CountedVector<int32_t> labels_;
  std::vector<CountedVector<float>> acts_, dacts_;  // L + 1 each
  std::vector<char> has_act_, has_dact_;
  std::vector<BlockSaved> saved_;                 // L
  CountedVector<float> logits_, probs_, losses_;  // head: (B, C), (B, C), (B)
  bool head_saved_ = false;
};

}  // namespace parlab::model
