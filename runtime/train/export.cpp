#include "runtime/train/export.h"

#include <algorithm>
#include <system_error>

#include "runtime/model/memory_account.h"
#include "runtime/train/dump.h"
#include "base/errors.h"

namespace parlab::train {

namespace {

bool split_model(const Trainer& trainer) { return trainer.config().plan.tp > 1 || trainer.config().plan.pp > 1; }

}  // namespace

// A world all-gather of the local buffers, then each slice put where it belongs in the whole
// network (the first data-parallel replica's copy; the others are equal).
std::vector<float> gather_split_buffer(const Trainer& trainer, std::span<const float> local, const std::string& tag) {
  std::vector<float> full(static_cast<size_t>(model::ParamLayout(mlp_shape(trainer.config().model)).numel()));
  gather_split_buffer(trainer, local, tag, full);
  return full;
}

void gather_split_buffer(const Trainer& trainer, std::span<const float> local, const std::string& tag,
                         std::span<float> full) {
  const TrainConfig& cfg = trainer.config();
  const strategy::Plan& plan = cfg.plan;
  const model::MlpShape global_shape = mlp_shape(cfg.model);
  const model::ParamLayout global(global_shape);
  comm::Communicator& world = trainer.world_comm();
  // Each rank's local tensors in its buffer's order: chunk after chunk.
  struct Part {
    std::vector<const model::ParamTensor*> tensors;
    model::TpSlice tp;
  };
  std::vector<model::ParamLayout> layouts;
  layouts.reserve(static_cast<size_t>(world.size()));
  std::vector<Part> parts;
  std::vector<int64_t> counts;
  for (int r = 0; r < world.size(); ++r) {
    const model::TpSlice tp{strategy::coords_of(plan, r).tp, plan.tp};
    layouts.emplace_back(model::LabMlp::tp_local_shape(global_shape, tp));
    Part part{{}, tp};
    int64_t n = 0;
    for (const model::LayerChunk& c : stage_model_chunks(cfg.model, plan, r))
      for (const model::ParamTensor& t : layouts.back().tensors())
        if (t.layer >= c.begin && t.layer < c.end) {
          part.tensors.push_back(&t);
          n += t.numel;
        }
    counts.push_back(n);
    parts.push_back(std::move(part));
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  // Through the process's kept large blocks (memory_account.h): a fingerprint gathers one buffer
  // after another of the same size, and each fresh mapping would fault its pages in again.
  model::CountedVector<float> all =
      model::counted_vector<float>(nullptr, model::MemoryCategory::kTemporary, static_cast<size_t>(total));
  comm::CollectiveOptions o;
  o.timeout = cfg.comm_timeout;
  o.tag = tag;
  world.all_gather_v(local, all, counts, o)->wait();
  if (static_cast<int64_t>(full.size()) != global.numel())
    throw RuntimeError("gather_split_buffer: " + std::to_string(full.size()) + " elements for a network of " +
                       std::to_string(global.numel()));
  int64_t at = 0;
  for (int r = 0; r < world.size(); ++r) {
    const Part& p = parts[r];
    const bool first_replica = strategy::coords_of(plan, r).dp == 0;
    for (const model::ParamTensor* t : p.tensors) {
      if (first_replica) {
        const model::ParamTensor& g = global.find(t->name);
        // Runs of consecutive elements: a row of a tensor-parallel fc2.weight (its columns are
        // sliced), else the whole tensor.
        const int64_t run = p.tp.size > 1 && t->name.ends_with(".fc2.weight") ? t->shape.at(1) : t->numel;
        for (int64_t j = 0; j < t->numel; j += run)
          std::copy_n(all.begin() + at + j, run, full.begin() + model::LabMlp::tp_global_offset(*t, g, j, p.tp));
      }
      at += t->numel;
    }
  }
}

std::vector<float> gather_full_params(const Trainer& trainer) {
  trainer.sync_host();  // after device-optimizer steps the device holds the current weights
  if (split_model(trainer)) {
    if (trainer.state().shards->zero() >= 3)
      throw UnsupportedOp("export: gathering ZeRO-3 shards of tensor- or pipeline-parallel ranks is not implemented");
    return gather_split_buffer(trainer, trainer.state().model.params(),
                               "export.params.s" + std::to_string(trainer.state().step));
  }
  const TrainerState& s = trainer.state();
  const model::LabMlp& m = s.model;
  if (s.shards->zero() < 3) {
    const auto p = m.params();
    return {p.begin(), p.end()};
  }
  comm::Communicator& dp = trainer.dp_comm();
  const model::FlatRange all = m.owned_range();
  std::vector<float> full(static_cast<size_t>(all.numel()));
  const std::vector<int64_t> counts = shard_counts(all, all.numel(), dp.size());
  comm::CollectiveOptions o;
  o.timeout = trainer.config().comm_timeout;
  o.tag = "export.params.s" + std::to_string(s.step);
  dp.all_gather_v(s.shards->params(), full, counts, o)->wait();
  return full;
}

uint64_t export_safetensors(const Trainer& trainer, const std::filesystem::path& target) {
  const std::filesystem::path file = std::filesystem::absolute(target);
  const std::vector<float> full = gather_full_params(trainer);
  const bool writer = split_model(trainer) ? trainer.world_comm().rank() == 0 : trainer.dp_comm().rank() == 0;
  if (!writer) return 0;
  const model::MlpShape sh = mlp_shape(trainer.config().model);
  const std::map<std::string, std::string> metadata = {
      {"format", "parlab-export"},
      {"step", std::to_string(trainer.state().step)},
      {"plan", trainer.config().plan.to_string()},
      {"model", "hidden=" + std::to_string(sh.hidden) + ",ffn=" + std::to_string(sh.ffn) +
                    ",blocks=" + std::to_string(sh.blocks) + ",classes=" + std::to_string(sh.classes)}};
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  const std::filesystem::path tmp = file.string() + ".tmp";
  write_dump_tensors(tmp, model::ParamLayout(sh), 0, full, metadata);
  std::error_code ec;
  std::filesystem::rename(tmp, file, ec);
  if (ec) throw RuntimeError("export: cannot rename " + tmp.string() + " to " + file.string() + ": " + ec.message());
  return std::filesystem::file_size(file);
}

}  // namespace parlab::train
