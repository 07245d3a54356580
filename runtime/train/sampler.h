#pragma once
// Elastic distributed sampler: the global batch sequence does not depend on the world size, so a
// job restarted with a different number of ranks continues at the same sample.
//
//   epoch e order  = Fisher-Yates shuffle of [0, N) driven by CounterRng(seed, kEpochShuffle, e)
//   step s of epoch e takes order[s*G .. min((s+1)*G, N))      G = global batch
//   the last batch of an epoch is short when N % G != 0 (its size is GlobalBatch::size, and the
//   loss scale of that step must be 1/size)
//   rank r of W takes a contiguous slice of the batch: sizes differ by at most one and the first
//   (size % W) ranks take one extra; rank r gets 0 samples when r >= size (tiny last batch).
//
// State = (epoch, samples consumed in the epoch): nothing about ranks, hence elastic.
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace parlab::train {

struct SamplerConfig {
  uint64_t seed = 0;
  int64_t dataset_size = 0;  // N
  int64_t global_batch = 0;  // G: samples per optimizer step over all ranks and microbatches
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t consumed = 0;  // samples of this epoch already used, in [0, N)
  bool operator==(const SamplerState&) const = default;
  // "epoch=3 consumed=128"; parse() accepts exactly that form (throws ConfigError otherwise).
  std::string to_string() const;
  static SamplerState parse(std::string_view text);
};

// One step's global batch.
struct GlobalBatch {
  int64_t epoch = 0;
  int64_t step_in_epoch = 0;
  int64_t begin = 0;  // position in the epoch's order
  int64_t size = 0;   // G, or fewer for the last batch of an epoch
  bool last_in_epoch = false;
  bool is_short = false;  // size < G
};

// Contiguous part of a batch of `batch_size` that rank `rank` of `world` takes:
// positions [begin, begin + count) of the batch.
struct RankSlice {
  int64_t begin = 0;
  int64_t count = 0;
};
RankSlice rank_slice(int64_t batch_size, int rank, int world);

// The order of epoch `epoch` (a permutation of [0, N)).
std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t dataset_size);

class ElasticSampler {
 public:
  // Throws ConfigError when N < 1, G < 1, or the state is outside [0, N) consumed / epoch < 0.
  explicit ElasticSampler(const SamplerConfig& config, SamplerState state = {});

  const SamplerConfig& config() const { return config_; }
  SamplerState state() const { return state_; }
  int64_t steps_per_epoch() const;  // ceil(N / G) from the start of an epoch

  // The batch the next step consumes (does not advance).
  GlobalBatch next_batch() const;
  // Dataset indices of a whole batch, and of one rank's slice of it (in batch order).
  std::vector<int64_t> batch_indices(const GlobalBatch& batch) const;
  std::vector<int64_t> rank_indices(const GlobalBatch& batch, int rank, int world) const;
  // Marks next_batch() consumed; after an epoch's last batch the state is (epoch + 1, 0).
  void advance();

 private:
  void load_order();

  SamplerConfig config_;
  SamplerState state_;
  std::vector<int64_t> order_;  // epoch_order(seed, state_.epoch, N)
};

}  // namespace parlab::train
