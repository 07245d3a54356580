#include "runtime/train/sampler.h"

#include <algorithm>
#include <charconv>
#include <numeric>

#include "runtime/compute/counter_rng.h"
#include "base/errors.h"

namespace parlab::train {

std::string SamplerState::to_string() const {
  return "epoch=" + std::to_string(epoch) + " consumed=" + std::to_string(consumed);
}

SamplerState SamplerState::parse(std::string_view text) {
  auto field = [&](std::string_view key, std::string_view& rest) -> int64_t {
    if (rest.substr(0, key.size()) != key) {
      throw ConfigError("sampler state", std::string(text), "must read 'epoch=E consumed=C'");
    }
    rest.remove_prefix(key.size());
    int64_t value = 0;
    auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), value);
    if (ec != std::errc() || value < 0) {
      throw ConfigError("sampler state", std::string(text), "must read 'epoch=E consumed=C' with E, C >= 0");
    }
    rest.remove_prefix(static_cast<size_t>(end - rest.data()));
    return value;
  };
  std::string_view rest = text;
  SamplerState state;
  state.epoch = field("epoch=", rest);
  state.consumed = field(" consumed=", rest);
  if (!rest.empty()) {
    throw ConfigError("sampler state", std::string(text), "must read 'epoch=E consumed=C'");
  }
  return state;
}

RankSlice rank_slice(int64_t batch_size, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    throw ConfigError("rank", std::to_string(rank) + " of " + std::to_string(world), "must satisfy 0 <= rank < world");
  }
  const int64_t base = batch_size / world, extra = batch_size % world;
  return {rank * base + std::min<int64_t>(rank, extra), base + (rank < extra ? 1 : 0)};
}

std::vector<int64_t> epoch_order(uint64_t seed, int64_t epoch, int64_t dataset_size) {
  std::vector<int64_t> order(dataset_size);
  std::iota(order.begin(), order.end(), int64_t{0});
  const compute::CounterRng rng(seed, compute::RngStream::kEpochShuffle, static_cast<uint64_t>(epoch));
  // Fisher-Yates from the back: position i swaps with a uniform j in [0, i], drawn at counter i.
  for (int64_t i = dataset_size - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i), static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

ElasticSampler::ElasticSampler(const SamplerConfig& config, SamplerState state) : config_(config), state_(state) {
  if (config.dataset_size < 1) {
    throw ConfigError("data.size", std::to_string(config.dataset_size), "must be >= 1");
  }
  if (config.global_batch < 1) {
    throw ConfigError("global_batch", std::to_string(config.global_batch), "must be >= 1");
  }
  if (state.epoch < 0 || state.consumed < 0 || state.consumed >= config.dataset_size) {
    throw ConfigError("sampler state", state.to_string(),
                      "needs epoch >= 0 and 0 <= consumed < data.size (" + std::to_string(config.dataset_size) + ")");
  }
  load_order();
}

void ElasticSampler::load_order() { order_ = epoch_order(config_.seed, state_.epoch, config_.dataset_size); }

int64_t ElasticSampler::steps_per_epoch() const {
  return (config_.dataset_size + config_.global_batch - 1) / config_.global_batch;
}

GlobalBatch ElasticSampler::next_batch() const {
  const int64_t N = config_.dataset_size, G = config_.global_batch;
  GlobalBatch batch;
  batch.epoch = state_.epoch;
  batch.begin = state_.consumed;
  batch.size = std::min(G, N - state_.consumed);
  // After an elastic restart with another G, consumed need not be a multiple of G; the step
  // index is then the number of whole batches of the current G already taken.
  batch.step_in_epoch = state_.consumed / G;
  batch.last_in_epoch = (batch.begin + batch.size == N);
  batch.is_short = batch.size < G;
  return batch;
}

std::vector<int64_t> ElasticSampler::batch_indices(const GlobalBatch& batch) const { return rank_indices(batch, 0, 1); }

std::vector<int64_t> ElasticSampler::rank_indices(const GlobalBatch& batch, int rank, int world) const {
  if (batch.epoch != state_.epoch || batch.begin < 0 || batch.begin + batch.size > config_.dataset_size) {
    throw RuntimeError("batch of epoch " + std::to_string(batch.epoch) + " at " + std::to_string(batch.begin) +
                       " is not in the sampler's epoch " + std::to_string(state_.epoch));
  }
  const RankSlice slice = rank_slice(batch.size, rank, world);
  const auto first = order_.begin() + batch.begin + slice.begin;
  return std::vector<int64_t>(first, first + slice.count);
}

void ElasticSampler::advance() {
  const GlobalBatch batch = next_batch();
  state_.consumed += batch.size;
  if (state_.consumed == config_.dataset_size) {
    state_ = SamplerState{state_.epoch + 1, 0};
    load_order();
  }
}

}  // namespace parlab::train
