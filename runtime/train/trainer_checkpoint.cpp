#include "runtime/train/trainer_checkpoint.h"

#include <algorithm>
#include <cstring>

#include "parlab/version.h"
#include "strategy/io.h"

namespace parlab::train {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "parlab-trainer-state";
constexpr int kFormatVersion = 1;

// One tensor of the trainer's state as a flat view, in checkpoint order.
struct StateView {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
};

void require_whole_optimizer(const Trainer& t) {
  const model::FlatRange owned = t.state().model.owned_range();
  if (!(t.state().optimizer->range() == owned) || owned.begin != 0 ||
      owned.end != t.state().model.layout().numel())
    throw UnsupportedOp("checkpointing a sharded optimizer or a pipeline stage is not implemented yet: rank " +
                        std::to_string(t.rank()) + "'s optimizer covers [" +
                        std::to_string(t.state().optimizer->range().begin) + ", " +
                        std::to_string(t.state().optimizer->range().end) + ") of the model's " +
                        std::to_string(t.state().model.layout().numel()) + " parameters");
}

// Parameters in layout order, then each parameter's optimizer buffers (buffer names sorted).
std::vector<StateView> state_views(const Trainer& t) {
  require_whole_optimizer(t);
  const model::LabMlp& m = t.state().model;
  const Optimizer& opt = *t.state().optimizer;
  std::vector<StateView> views;
  for (const model::ParamTensor& p : m.layout().tensors()) views.push_back({p.name, p.shape, m.param(p.name)});
  for (const model::ParamTensor& p : m.layout().tensors())
    for (const std::string& b : opt.buffer_names())
      views.push_back({p.name + "." + b, p.shape,
                       opt.buffer(b).subspan(static_cast<size_t>(p.offset - opt.range().begin),
                                             static_cast<size_t>(p.numel))});
  return views;
}

json optimizer_config_json(const OptimizerConfig& c) {
  if (const auto* s = std::get_if<SgdConfig>(&c))
    return {{"lr", s->lr}, {"momentum", s->momentum}, {"weight_decay", s->weight_decay}, {"nesterov", s->nesterov}};
  const AdamWConfig& a = std::get<AdamWConfig>(c);
  return {{"lr", a.lr}, {"beta1", a.beta1}, {"beta2", a.beta2}, {"eps", a.eps}, {"weight_decay", a.weight_decay}};
}

// What must agree between a checkpoint and the trainer resuming from it.
json shape_json(const strategy::ModelSpec& m) {
  return {{"kind", m.kind_name()}, {"hidden", m.hidden}, {"ffn", m.ffn}, {"blocks", m.layers}, {"classes", m.classes}};
}

uint64_t hash_floats(std::span<const float> v) {
  return checkpoint::xxh3_64_of(std::as_bytes(v));
}

uint64_t combine(int64_t step, int64_t optimizer_step, const SamplerState& sampler,
                 const std::vector<std::pair<std::string, uint64_t>>& tensors) {
  std::string text = "step=" + std::to_string(step) + ";optimizer_step=" + std::to_string(optimizer_step) +
                     ";sampler=" + sampler.to_string();
  for (const auto& [name, h] : tensors) text += ";" + name + "=" + checkpoint::hash_to_hex(h);
  return checkpoint::xxh3_64_of(std::as_bytes(std::span(text.data(), text.size())));
}

void check_same_job(const Trainer& t, const json& meta, const std::filesystem::path& where) {
  const TrainConfig& c = t.config();
  auto refuse = [&](const std::string& what, const std::string& theirs, const std::string& ours) {
    throw CheckpointMismatch("checkpoint " + where.string(), what + " " + theirs,
                             "this job has " + what + " " + ours +
                                 "; resume it with the job that wrote it, or start over (--fresh, or a new --run-dir)");
  };
  if (meta.value("format", "") != kFormat) refuse("format", meta.value("format", "(none)"), kFormat);
  const std::string model_hash = checkpoint::json_fingerprint(shape_json(c.model));
  if (meta.value("model_hash", "") != model_hash)
    refuse("model", meta.value("model", json::object()).dump(), to_json(c.model).dump());
  if (meta.value("seed", uint64_t{0}) != c.seed)
    refuse("seed", std::to_string(meta.value("seed", uint64_t{0})), std::to_string(c.seed));
  const int64_t n = meta.at("sampler").value("dataset_size", int64_t{0});
  if (n != c.data_size) refuse("data size", std::to_string(n), std::to_string(c.data_size));
  const std::string kind = meta.at("optimizer").value("kind", "");
  if (kind != t.state().optimizer->kind()) refuse("optimizer", kind, std::string(t.state().optimizer->kind()));
}

}  // namespace

// ---- CommCoordinator --------------------------------------------------------------------------

CommCoordinator::CommCoordinator(comm::Communicator& comm, std::chrono::milliseconds timeout) : comm_(comm) {
  options_.timeout = timeout;
  options_.tag = "checkpoint";
}

int CommCoordinator::rank() const { return comm_.rank(); }
int CommCoordinator::world_size() const { return comm_.size(); }

void CommCoordinator::barrier() { comm_.barrier(options_)->wait(); }

std::vector<std::string> CommCoordinator::all_gather(const std::string& mine) {
  const size_t n = static_cast<size_t>(comm_.size());
  // Lengths travel as the bit pattern of one float each (copied, never computed on).
  const auto length = static_cast<uint32_t>(mine.size());
  float packed_length = 0;
  std::memcpy(&packed_length, &length, sizeof length);
  std::vector<float> lengths(n);
  comm_.all_gather(std::span<const float>(&packed_length, 1), lengths, options_)->wait();
  std::vector<uint32_t> sizes(n);
  for (size_t r = 0; r < n; ++r) std::memcpy(&sizes[r], &lengths[r], sizeof(uint32_t));
  const size_t words = (*std::max_element(sizes.begin(), sizes.end()) + sizeof(float) - 1) / sizeof(float);
  std::vector<std::string> out(n);
  if (words == 0) return out;
  std::vector<float> in(words, 0.0f), all(words * n);
  std::memcpy(in.data(), mine.data(), mine.size());
  comm_.all_gather(in, all, options_)->wait();
  for (size_t r = 0; r < n; ++r) out[r].assign(reinterpret_cast<const char*>(all.data() + r * words), sizes[r]);
  return out;
}

// ---- save -------------------------------------------------------------------------------------

json trainer_metadata(const Trainer& t) {
  const TrainConfig& c = t.config();
  const TrainerState& s = t.state();
  const SamplerState sampler = s.sampler.state();
  const json model = to_json(c.model), plan = to_json(c.plan);
  return {{"format", kFormat},
          {"format_version", kFormatVersion},
          {"step", s.step},
          {"seed", c.seed},
          {"data_size", c.data_size},
          {"sampler", {{"epoch", sampler.epoch}, {"consumed", sampler.consumed},
                       {"dataset_size", s.sampler.config().dataset_size},
                       {"global_batch", s.sampler.config().global_batch}}},
          {"rng", {{"generator", "splitmix64-counter"}, {"seed", s.seed},
                   {"epoch", sampler.epoch}, {"consumed", sampler.consumed},
                   {"note", "CounterRng(seed, stream, counter): counters derive from sample index, "
                            "flat parameter offset and epoch, so seed + sampler position is the whole state"}}},
          {"optimizer", {{"kind", std::string(s.optimizer->kind())}, {"step", s.optimizer->steps()},
                         {"config", optimizer_config_json(c.optimizer)}}},
          {"model", model},
          {"model_hash", checkpoint::json_fingerprint(shape_json(c.model))},
          {"plan", plan},
          {"plan_hash", checkpoint::json_fingerprint(plan)},
          {"world_size", t.program().plan.world()},
          {"software_version", kVersion}};
}

std::vector<checkpoint::TensorSlice> trainer_slices(const Trainer& t, int world, int rank) {
  const std::vector<StateView> views = state_views(t);
  int64_t total = 0;
  for (const StateView& v : views) total += static_cast<int64_t>(v.data.size());
  const checkpoint::ElementRange mine = checkpoint::even_range(total, world, rank);
  std::vector<checkpoint::TensorSlice> out;
  int64_t offset = 0;  // where the current tensor starts in the concatenated state
  for (const StateView& v : views) {
    const auto n = static_cast<int64_t>(v.data.size());
    const int64_t lo = std::max(mine.begin, offset), hi = std::min(mine.end, offset + n);
    if (lo < hi)
      out.push_back({v.name, v.shape, lo - offset,
                     v.data.subspan(static_cast<size_t>(lo - offset), static_cast<size_t>(hi - lo))});
    offset += n;
  }
  return out;
}

checkpoint::SaveResult save_trainer(const Trainer& t, const checkpoint::SaveOptions& options,
                                    checkpoint::Coordinator& coord) {
  const std::vector<checkpoint::TensorSlice> slices = trainer_slices(t, coord.world_size(), coord.rank());
  return checkpoint::save_checkpoint(options, t.state().step, slices, trainer_metadata(t), coord);
}

// ---- resume -----------------------------------------------------------------------------------

std::string ResumeResult::summary() const {
  std::string s = load.summary();
  for (const std::string& n : notes) s += "; " + n;
  for (const std::string& n : load.notes) s += "; " + n;
  return s;
}

ResumeResult resume_trainer(Trainer& t, const checkpoint::LoadOptions& options, checkpoint::Coordinator& coord) {
  TrainerState& s = t.state();
  if (s.step != 0 || s.optimizer->steps() != 0)
    throw RuntimeError("resume_trainer needs a fresh trainer; this one has taken " + std::to_string(s.step) + " steps");
  std::vector<checkpoint::ReadRequest> into;
  {
    require_whole_optimizer(t);
    for (const model::ParamTensor& p : s.model.layout().tensors()) into.push_back({p.name, 0, s.model.param(p.name)});
    Optimizer& opt = *s.optimizer;
    for (const model::ParamTensor& p : s.model.layout().tensors())
      for (const std::string& b : opt.buffer_names())
        into.push_back({p.name + "." + b, 0,
                        opt.mutable_buffer(b).subspan(static_cast<size_t>(p.offset - opt.range().begin),
                                                      static_cast<size_t>(p.numel))});
  }
  ResumeResult r;
  r.load = checkpoint::load_checkpoint(options, coord, into);
  if (!r.load.checkpoint) {
    // Candidates that failed verification may have left partial data in the buffers: put back
    // the fresh state (seeded weights, zero optimizer state), exactly what the constructor made.
    if (!r.load.skipped.empty()) {
      s.model.init_params(t.config().seed);
      for (const std::string& b : s.optimizer->buffer_names()) {
        const std::span<float> v = s.optimizer->mutable_buffer(b);
        std::fill(v.begin(), v.end(), 0.0f);
      }
    }
    r.step = s.step;
    return r;
  }
  const checkpoint::Checkpoint& ck = *r.load.checkpoint;
  const json& meta = ck.metadata();
  check_same_job(t, meta, ck.path());
  const json& sm = meta.at("sampler");
  const SamplerState position{sm.at("epoch").get<int64_t>(), sm.at("consumed").get<int64_t>()};
  s.sampler = ElasticSampler(s.sampler.config(), position);
  s.optimizer->set_steps(meta.at("optimizer").at("step").get<int64_t>());
  s.step = ck.step();
  r.resumed = true;
  r.step = s.step;
  r.written_by_world = ck.manifest().world_size;
  if (r.written_by_world != coord.world_size())
    r.notes.push_back("written by " + std::to_string(r.written_by_world) + " worker(s), resumed by " +
                      std::to_string(coord.world_size()) + " (resharded; sample order kept by the elastic sampler)");
  const int64_t saved_gbs = sm.value("global_batch", int64_t{0});
  if (saved_gbs != s.sampler.config().global_batch)
    r.notes.push_back("global batch changed from " + std::to_string(saved_gbs) + " to " +
                      std::to_string(s.sampler.config().global_batch) + " (the sample order continues)");
  if (meta.at("optimizer").value("config", json::object()) != optimizer_config_json(t.config().optimizer))
    r.notes.push_back("optimizer settings differ from the checkpoint's " +
                      meta.at("optimizer").value("config", json::object()).dump() + "; using this run's");
  return r;
}

// ---- fingerprints -----------------------------------------------------------------------------

std::string StateFingerprint::combined_hex() const { return checkpoint::hash_to_hex(combined); }

json StateFingerprint::to_json() const {
  json tensors_j = json::array();
  for (const auto& [name, h] : tensors) tensors_j.push_back({{"name", name}, {"xxh3_64", checkpoint::hash_to_hex(h)}});
  return {{"step", step}, {"optimizer_step", optimizer_step}, {"sampler", sampler.to_string()},
          {"combined_xxh3_64", combined_hex()}, {"tensors", tensors_j}};
}

StateFingerprint StateFingerprint::from_json(const json& j) {
  try {
    StateFingerprint f;
    f.step = j.at("step").get<int64_t>();
    f.optimizer_step = j.at("optimizer_step").get<int64_t>();
    f.sampler = SamplerState::parse(j.at("sampler").get<std::string>());
    for (const json& t : j.at("tensors"))
      f.tensors.emplace_back(t.at("name").get<std::string>(), checkpoint::hash_from_hex(t.at("xxh3_64").get<std::string>()));
    f.combined = checkpoint::hash_from_hex(j.at("combined_xxh3_64").get<std::string>());
    return f;
  } catch (const json::exception& e) {
    throw ConfigError("state fingerprint", j.dump().substr(0, 120), std::string("malformed: ") + e.what());
  }
}

StateFingerprint state_fingerprint(const Trainer& t) {
  StateFingerprint f;
  f.step = t.state().step;
  f.optimizer_step = t.state().optimizer->steps();
  f.sampler = t.state().sampler.state();
  for (const StateView& v : state_views(t)) f.tensors.emplace_back(v.name, hash_floats(v.data));
  f.combined = combine(f.step, f.optimizer_step, f.sampler, f.tensors);
  return f;
}

StateFingerprint state_fingerprint(const checkpoint::TrainingState& state) {
  StateFingerprint f;
  try {
    f.step = state.step;
    f.optimizer_step = state.metadata.at("optimizer").at("step").get<int64_t>();
    const json& sm = state.metadata.at("sampler");
    f.sampler = {sm.at("epoch").get<int64_t>(), sm.at("consumed").get<int64_t>()};
  } catch (const json::exception& e) {
    throw ConfigError("checkpoint metadata", state.metadata.dump().substr(0, 120),
                      std::string("is not a trainer's: ") + e.what());
  }
  for (const checkpoint::Tensor& t : state.tensors) f.tensors.emplace_back(t.name, hash_floats(t.data));
  f.combined = combine(f.step, f.optimizer_step, f.sampler, f.tensors);
  return f;
}

}  // namespace parlab::train
