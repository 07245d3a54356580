#include "runtime/train/trainer_checkpoint_split.h"

#include <algorithm>
#include <functional>
#include <span>

#include "runtime/checkpoint/file_io.h"
#include "runtime/train/export.h"

namespace parlab::train::split_checkpoint {
namespace {

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Whole on every tensor-parallel rank (not sliced).
bool replicated(const model::ParamTensor& t) {
  return !ends_with(t.name, ".fc1.weight") && !ends_with(t.name, ".fc1.bias") && !ends_with(t.name, ".fc2.weight");
}

// A run of consecutive elements: local tensor elements [local, local + count) are global tensor
// elements [global, global + count).
struct Run {
  int64_t local = 0;
  int64_t global = 0;
  int64_t count = 0;
};

// The runs of local tensor elements [lo, hi): one, except fc2.weight's columns (one per row).
std::vector<Run> runs_of(const model::ParamTensor& local, const model::ParamTensor& global, int64_t lo, int64_t hi,
                         model::TpSlice tp) {
  std::vector<Run> out;
  const bool by_row = tp.size > 1 && ends_with(local.name, ".fc2.weight");
  const int64_t cols = by_row ? local.shape.at(1) : 0;
  for (int64_t a = lo; a < hi;) {
    const int64_t b = by_row ? std::min(hi, (a / cols + 1) * cols) : hi;
    out.push_back({a, model::LabMlp::tp_global_offset(local, global, a, tp) - global.offset, b - a});
    a = b;
  }
  return out;
}

// Calls `fn(local tensor, global tensor, its runs, where the tensor's element 0 is in `values`)`
// for each tensor of the model inside the flat range `have` (the model's coordinates) that
// `values` covers, restricted to `keep`.
using PieceFn =
    std::function<void(const model::ParamTensor&, const model::ParamTensor&, const std::vector<Run>&, int64_t)>;
void for_each_piece(const Trainer& t, model::FlatRange have, model::FlatRange keep, const PieceFn& fn) {
  const model::LabMlp& m = t.state().model;
  const model::ParamLayout global(mlp_shape(t.config().model));
  for (const model::ParamTensor& p : m.layout().tensors()) {
    const int64_t at = m.position(p);
    if (at < 0) continue;
    const int64_t lo = std::max({have.begin, keep.begin, at}), hi = std::min({have.end, keep.end, at + p.numel});
    if (lo >= hi) continue;
    fn(p, global.find(p.name), runs_of(p, global.find(p.name), lo - at, hi - at, m.tp_slice()), at - have.begin);
  }
}

}  // namespace

bool applies(const Trainer& t) { return t.config().plan.tp > 1 || t.config().plan.pp > 1; }

std::vector<std::string> tensor_order(const Trainer& t) {
  const model::ParamLayout global(mlp_shape(t.config().model));
  std::vector<std::string> names;
  for (const model::ParamTensor& p : global.tensors()) names.push_back(p.name);
  for (const model::ParamTensor& p : global.tensors())
    for (const std::string& b : t.state().optimizer->buffer_names()) names.push_back(p.name + "." + b);
  return names;
}

namespace {

// The rank's whole local buffer of optimizer state `b` (gathered over the DP group under ZeRO).
std::vector<float> local_optimizer_buffer(const Trainer& t, const std::string& b) {
  const TrainerState& s = t.state();
  std::vector<float> local(s.optimizer->buffer(b).begin(), s.optimizer->buffer(b).end());
  if (s.shards->zero() < 1) return local;
  const int64_t n = s.model.owned_range().numel();
  std::vector<float> whole(static_cast<size_t>(n));
  comm::CollectiveOptions o;
  o.timeout = t.config().comm_timeout;
  o.tag = "state.local." + b;
  t.dp_comm().all_gather_v(local, whole, shard_counts({0, n}, n, t.dp_comm().size()), o)->wait();
  return whole;
}

}  // namespace

SaveSet save_set(const Trainer& t) {
  const TrainerState& s = t.state();
  if (s.shards->zero() >= 3)
    throw UnsupportedOp("checkpoint: ZeRO-3 shards of tensor- or pipeline-parallel ranks are not saved yet");
  SaveSet out;
  // Whole local buffers, in checkpoint order: parameters, then each optimizer buffer.
  std::vector<std::pair<std::string, std::span<const float>>> buffers = {{"", s.model.params()}};
  for (const std::string& b : s.optimizer->buffer_names()) {
    out.storage.push_back(local_optimizer_buffer(t, b));
    buffers.emplace_back("." + b, out.storage.back());
  }
  if (strategy::coords_of(t.config().plan, t.rank()).dp != 0) return out;  // the first replica writes
  const model::TpSlice tp = s.model.tp_slice();
  const model::FlatRange owned = s.model.owned_range();
  for (const auto& [suffix, values] : buffers) {
    for_each_piece(
        t, owned, owned,
        [&](const model::ParamTensor& p, const model::ParamTensor& g, const std::vector<Run>& runs, int64_t base) {
          if (replicated(p) && tp.rank != 0) return;
          const std::span<const float> mine = values.subspan(static_cast<size_t>(base), static_cast<size_t>(p.numel));
          if (runs.size() == 1) {
            out.slices.push_back({p.name + suffix, g.shape, runs[0].global, mine});
            return;
          }
          // fc2.weight (h, f/t) per rank: gather the group's slices, rebuild (h, f), write an even
          // share of its rows.
          comm::Communicator& group = t.tp_comm();
          std::vector<float> gathered(static_cast<size_t>(p.numel) * tp.size);
          comm::CollectiveOptions o;
          o.timeout = t.config().comm_timeout;
          o.tag = "state.tp." + p.name + suffix;
          group.all_gather(mine, gathered, o)->wait();
          const int64_t rows = g.shape.at(0), cols = p.shape.at(1), width = g.shape.at(1);
          const int64_t r0 = rows * tp.rank / tp.size, r1 = rows * (tp.rank + 1) / tp.size;
          std::vector<float>& whole = out.storage.emplace_back(static_cast<size_t>((r1 - r0) * width));
          for (int k = 0; k < tp.size; ++k)
            for (int64_t r = r0; r < r1; ++r)
              std::copy_n(gathered.begin() + k * p.numel + r * cols, cols, whole.begin() + (r - r0) * width + k * cols);
          out.slices.push_back({p.name + suffix, g.shape, r0 * width, whole});
        });
  }
  return out;
}

std::vector<checkpoint::ReadRequest> requests(Trainer& t) {
  TrainerState& s = t.state();
  std::vector<checkpoint::ReadRequest> out;
  auto add = [&](const std::string& suffix, std::span<float> values, model::FlatRange have) {
    for_each_piece(
        t, have, have,
        [&](const model::ParamTensor& p, const model::ParamTensor&, const std::vector<Run>& runs, int64_t base) {
          for (const Run& r : runs)
            out.push_back({p.name + suffix, r.global,
                           values.subspan(static_cast<size_t>(base + r.local), static_cast<size_t>(r.count))});
        });
  };
  if (s.shards->zero() >= 3) {
    add("", s.shards->params(), s.shards->shard());
  } else {
    add("", s.model.params(), s.model.owned_range());
  }
  for (const std::string& b : s.optimizer->buffer_names())
    add("." + b, s.optimizer->mutable_buffer(b), s.optimizer->range());
  return out;
}

std::vector<std::pair<std::string, uint64_t>> hash_full_state(const Trainer& t) {
  const TrainerState& s = t.state();
  const model::ParamLayout global(mlp_shape(t.config().model));
  if (s.shards->zero() >= 3)
    throw UnsupportedOp(
        "fingerprint: gathering ZeRO-3 shards of tensor- or pipeline-parallel ranks is not implemented");
  const std::vector<std::string> buffers = s.optimizer->buffer_names();
  // hashes[0][i]: global tensor i's parameters; hashes[1 + k][i]: its optimizer buffer k.
  std::vector<std::vector<uint64_t>> hashes;
  // One whole buffer at a time, in the same storage (the process's kept large blocks).
  model::CountedVector<float> full =
      model::counted_vector<float>(nullptr, model::MemoryCategory::kTemporary, static_cast<size_t>(global.numel()));
  auto hash_tensors = [&]() {
    std::vector<uint64_t>& h = hashes.emplace_back();
    for (const model::ParamTensor& p : global.tensors())
      h.push_back(checkpoint::xxh3_64_of(std::as_bytes(
          std::span<const float>(full).subspan(static_cast<size_t>(p.offset), static_cast<size_t>(p.numel)))));
  };
  gather_split_buffer(t, s.model.params(), "fingerprint.params", full);
  hash_tensors();
  for (const std::string& b : buffers) {
    gather_split_buffer(t, local_optimizer_buffer(t, b), "fingerprint." + b, full);
    hash_tensors();
  }
  // Checkpoint order: the parameters, then each parameter's buffers (trainer_checkpoint.h).
  std::vector<std::pair<std::string, uint64_t>> out;
  const std::vector<model::ParamTensor>& tensors = global.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) out.emplace_back(tensors[i].name, hashes[0][i]);
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t k = 0; k < buffers.size(); ++k) out.emplace_back(tensors[i].name + "." + buffers[k], hashes[1 + k][i]);
  return out;
}

}  // namespace parlab::train::split_checkpoint
