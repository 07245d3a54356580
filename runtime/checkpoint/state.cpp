#include "runtime/checkpoint/state.h"

#include <algorithm>

#include "runtime/checkpoint/file_io.h"
#include "base/errors.h"

namespace parlab::checkpoint {

const Tensor* TrainingState::find(const std::string& name) const {
  for (const Tensor& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t TrainingState::total_elements() const {
  int64_t n = 0;
  for (const Tensor& t : tensors) n += static_cast<int64_t>(t.data.size());
  return n;
}

ElementRange even_range(int64_t n, int world_size, int rank) {
  if (world_size < 1) throw ConfigError("world_size", std::to_string(world_size), "must be >= 1");
  if (rank < 0 || rank >= world_size) {
    throw ConfigError("rank", std::to_string(rank), "must be in [0, " + std::to_string(world_size) + ")");
  }
  const int64_t q = n / world_size, extra = n % world_size;
  const int64_t begin = rank * q + std::min<int64_t>(rank, extra);
  return {begin, begin + q + (rank < extra ? 1 : 0)};
}

std::vector<TensorSlice> replica_share(const TrainingState& state, int world_size, int rank) {
  const ElementRange mine = even_range(state.total_elements(), world_size, rank);
  std::vector<TensorSlice> out;
  int64_t offset = 0;  // where the current tensor starts in the concatenated flat state
  for (const Tensor& t : state.tensors) {
    const int64_t n = static_cast<int64_t>(t.data.size());
    const int64_t lo = std::max(mine.begin, offset), hi = std::min(mine.end, offset + n);
    // A tensor with no elements still needs one owner, or the manifest would not list it.
    if (lo < hi || (n == 0 && rank == 0)) {
      out.push_back({t.name, t.shape, lo < hi ? lo - offset : 0,
                     std::span<const float>(t.data).subspan(static_cast<size_t>(lo < hi ? lo - offset : 0),
                                                            static_cast<size_t>(std::max<int64_t>(hi - lo, 0)))});
    }
    offset += n;
  }
  return out;
}

std::vector<TensorSlice> whole_tensors(const TrainingState& state) {
  std::vector<TensorSlice> out;
  out.reserve(state.tensors.size());
  for (const Tensor& t : state.tensors) out.push_back({t.name, t.shape, 0, t.data});
  return out;
}

std::string json_fingerprint(const nlohmann::json& value) {
  const std::string text = value.dump();
  return hash_to_hex(xxh3_64_of(std::as_bytes(std::span(text.data(), text.size()))));
}

}  // namespace parlab::checkpoint
