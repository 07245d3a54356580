#pragma once
// What a checkpoint holds: complete training state, described generically so this layer needs to
// know nothing about samplers or optimizers.
//
//   tensors  : named fp32 tensors with their global shapes. The trainer puts here the parameters
//              and every optimizer buffer, named after the parameter they belong to:
//              "{param}", "{param}.exp_avg", "{param}.exp_avg_sq", "{param}.momentum_buffer".
//   metadata : one JSON object the trainer fills: optimizer scalars (step counters, lr schedule
//              position), sampler state (epoch, samples consumed), RNG states, the model spec,
//              the plan and json_fingerprint() of them. Saved and returned verbatim.
//   step     : the optimizer step the state is *after*; names the checkpoint directory.
//
// The manifest adds the parlab version (parlab::kVersion) by itself.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace parlab::checkpoint {

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;  // global, row-major
  std::vector<float> data;     // prod(shape) elements
};

struct TrainingState {
  int64_t step = 0;
  std::vector<Tensor> tensors;
  nlohmann::json metadata = nlohmann::json::object();

  const Tensor* find(const std::string& name) const;
  int64_t total_elements() const;
};

// One rank's piece of one tensor for a save: elements [begin_element, begin_element + data.size())
// of the tensor's flat (row-major) data. A rank contributes at most one slice per tensor; across
// ranks the slices of a tensor must tile [0, prod(global_shape)) exactly.
struct TensorSlice {
  std::string name;
  std::vector<int64_t> global_shape;
  int64_t begin_element = 0;
  std::span<const float> data;  // borrowed: must stay alive until save_checkpoint returns
};

// Half-open [begin, end) range of elements.
struct ElementRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t count() const { return end - begin; }
};

// Split n items into W contiguous ranges whose sizes differ by at most one; the first n mod W
// ranks get one more:  size_r = floor(n/W) + (r < n mod W),  begin_r = sum of size_i for i < r.
ElementRange even_range(int64_t n, int world_size, int rank);

// DDP save: every rank holds a full replica, so rank r writes only its 1/W share of the
// concatenated flat state (tensors in order, each flattened), i.e. even_range(total, W, r), cut at
// tensor boundaries into slices. Slices borrow from `state`.
std::vector<TensorSlice> replica_share(const TrainingState& state, int world_size, int rank);

// Every tensor whole (a single-process save).
std::vector<TensorSlice> whole_tensors(const TrainingState& state);

// XXH3_64bits of the canonical dump of `value` (object keys sorted), as 16 hex digits. Two
// equal JSON values have equal fingerprints, whatever order their keys were inserted in.
std::string json_fingerprint(const nlohmann::json& value);

}  // namespace parlab::checkpoint
