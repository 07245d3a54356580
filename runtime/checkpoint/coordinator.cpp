#include "runtime/checkpoint/coordinator.h"

#include "base/errors.h"

namespace parlab::checkpoint {

LocalGroup::LocalGroup(int world_size) : world_size_(world_size) {
  if (world_size < 1) {
    throw ConfigError("LocalGroup.world_size", std::to_string(world_size), "must be >= 1");
  }
  slots_.resize(static_cast<size_t>(world_size));
}

LocalGroup::Member LocalGroup::member(int rank) {
  if (rank < 0 || rank >= world_size_) {
    throw ConfigError("LocalGroup.rank", std::to_string(rank), "must be in [0, " + std::to_string(world_size_) + ")");
  }
  return Member(this, rank);
}

std::vector<std::string> LocalGroup::exchange(int rank, const std::string& mine) {
  std::unique_lock lock(mu_);
  const uint64_t my_round = round_;
  slots_[static_cast<size_t>(rank)] = mine;
  if (++arrived_ == world_size_) {
    // Last to arrive publishes the round. done_ cannot be overwritten before every waiter has
    // copied it: the next round needs all W contributions, including theirs.
    done_ = std::move(slots_);
    slots_.assign(static_cast<size_t>(world_size_), std::string());
    arrived_ = 0;
    ++round_;
    cv_.notify_all();
    return done_;
  }
  cv_.wait(lock, [&] { return round_ != my_round; });
  return done_;
}

}  // namespace parlab::checkpoint
