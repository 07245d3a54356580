#pragma once
// Synthetic classification data that any rank can produce for any sample index.
//
// Sample i is a function of (seed, i) alone, through compute::CounterRng (SplitMix64 read at a
// counter, see runtime/compute/counter_rng.h):
//   x_i[k]  = normal(seed, stream kDataInput, counter i * width + k)   (Box-Muller), k < width
//   T[c][k] = normal(seed, stream kDataTeacher, counter c * width + k), each row c then scaled
//             to unit norm: a fixed teacher (C, width)
//   label_i  = argmax_c  sum_k T[c][k] x_i[k]     (double accumulation; ties -> smallest c)
// So x ~ N(0, I) and the label is the decision of a random linear classifier: learnable by the
// lab-mlp, every class present (near-uniform when width >> classes: random unit rows are then
// almost orthogonal), and identical on every rank and world size.
#include <cstdint>
#include <span>
#include <vector>

#include "runtime/model/microbatch.h"

namespace parlab::train {

struct SyntheticConfig {
  uint64_t seed = 0;
  int64_t size = 0;     // N samples, indices [0, N)
  int64_t width = 0;    // features per sample (the model's hidden size h)
  int64_t classes = 0;  // C
};

class SyntheticDataset {
 public:
  // Throws ConfigError naming "data.size" / "data.width" / "data.classes" when out of range.
  explicit SyntheticDataset(const SyntheticConfig& config);

  const SyntheticConfig& config() const { return config_; }
  int64_t size() const { return config_.size; }

  // Writes sample i's features into x (width) and returns its label. Throws RuntimeError when i
  // is outside [0, N) or x has the wrong size.
  int32_t sample(int64_t i, std::span<float> x) const;
  // Fills x (n, width) and labels (n) with the samples `indices` (n of them), in that order.
  void fill(std::span<const int64_t> indices, std::span<float> x, std::span<int32_t> labels) const;
  // Same, into a microbatch: activation(0) and labels(); indices.size() must equal mb.batch().
  void fill(std::span<const int64_t> indices, model::MicrobatchState& mb) const;

 private:
  SyntheticConfig config_;
  std::vector<float> teacher_;    // (C, width)
  std::vector<float> teacher_t_;  // (width, C): the same, transposed for the labels' sums
};

}  // namespace parlab::train
