#include "runtime/train/trainer_checkpoint.h"

#include <algorithm>
#include <cstring>

#include "parlab/version.h"
#include "runtime/train/export.h"
#include "runtime/train/trainer_checkpoint_split.h"
#include "strategy/io.h"

namespace parlab::train {
namespace {

using nlohmann::json;

constexpr const char* kFormat = "parlab-trainer-state";
constexpr int kFormatVersion = 1;

// Part of one tensor of the trainer's state, as a flat view: elements [first, first + data.size())
// of the tensor `name` (global shape `shape`), in checkpoint order.
struct StateView {
  std::string name;
  std::vector<int64_t> shape;
  std::span<const float> data;
  int64_t first = 0;
};

// The part of a flat buffer covering flat range `have` that falls inside tensor `p`, as a view
// of `values` (element 0 = flat offset have.begin); empty when they do not meet, and then still a
// view of `values` (a collective over it finds it in registered memory, as the peers' pieces).
template <typename T>
std::span<T> piece(std::span<T> values, model::FlatRange have, const model::ParamTensor& p, int64_t& first) {
  const int64_t lo = std::max(have.begin, p.offset), hi = std::min(have.end, p.offset + p.numel);
  if (lo >= hi) return values.first(0);
  first = lo - p.offset;
  return values.subspan(static_cast<size_t>(lo - have.begin), static_cast<size_t>(hi - lo));
}

// What this rank keeps, in checkpoint order: parameters in layout order, then each parameter's
// optimizer buffers (buffer names sorted). A replica holds whole tensors; a ZeRO rank the pieces
// of them inside its shard (ZeRO-1/2 hold every parameter, but the shard's pieces are theirs
// to save). The optimizer always covers its own range.
std::vector<StateView> state_views(const Trainer& t, bool shard_only) {
  const model::LabMlp& m = t.state().model;
  const Optimizer& opt = *t.state().optimizer;
  const ModelShards& shards = *t.state().shards;
  const bool sharded = shards.zero() >= 1;
  std::vector<StateView> views;
  for (const model::ParamTensor& p : m.layout().tensors()) {
    int64_t first = 0;
    if (shards.zero() >= 3 || (sharded && shard_only)) {
      const std::span<const float> v = piece(shards.params(), shards.shard(), p, first);
      if (!v.empty()) views.push_back({p.name, p.shape, v, first});
    } else {
      views.push_back({p.name, p.shape, m.param(p.name), 0});
    }
  }
  for (const model::ParamTensor& p : m.layout().tensors())
    for (const std::string& b : opt.buffer_names()) {
      int64_t first = 0;
      const std::span<const float> v = piece(opt.buffer(b), opt.range(), p, first);
      if (!v.empty()) views.push_back({p.name + "." + b, p.shape, v, first});
    }
  return views;
}

uint64_t hash_floats(std::span<const float> v) { return checkpoint::xxh3_64_of(std::as_bytes(v)); }

// The hash of every tensor of a ZeRO rank's state, in checkpoint order, equal to the hash of the
// whole tensors a replica holds (the fingerprint must not depend on how the state is sharded). A
// collective: each sharded tensor is all-gathered over the DP group on its own, hashed and
// dropped, so a rank holds one tensor beside its shard. Gathering the whole state at once (the
// parameters and both AdamW moments, and a per-tensor copy of each) took every ZeRO-3 rank of
// lab-mlp from 0.65 to 2 GB resident at the end of the run: the "growth" VmHWM showed.
std::vector<std::pair<std::string, uint64_t>> hash_sharded_state(const Trainer& t) {
  const model::LabMlp& m = t.state().model;
  const Optimizer& opt = *t.state().optimizer;
  const ModelShards& shards = *t.state().shards;
  comm::Communicator& dp = t.dp_comm();
  const int64_t n = m.layout().numel();
  std::vector<float> whole;
  auto gathered = [&](std::span<const float> values, model::FlatRange have, const model::ParamTensor& p,
                      const std::string& tag) {
    int64_t first = 0;
    const std::span<const float> mine = piece(values, have, p, first);
    whole.resize(static_cast<size_t>(p.numel));
    comm::CollectiveOptions o;
    o.timeout = t.config().comm_timeout;
    o.tag = "fingerprint." + tag;
    dp.all_gather_v(mine, whole, shard_counts({p.offset, p.offset + p.numel}, n, dp.size()), o)->wait();
    return hash_floats(whole);
  };
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const model::ParamTensor& p : m.layout().tensors())
    out.emplace_back(p.name, shards.zero() >= 3 ? gathered(shards.params(), shards.shard(), p, p.name)
                                                : hash_floats(m.param(p.name)));
  std::vector<std::string> names = opt.buffer_names();
  std::sort(names.begin(), names.end());  // the order the whole-state fingerprint always had
  for (const model::ParamTensor& p : m.layout().tensors())
    for (const std::string& b : names)
      out.emplace_back(p.name + "." + b, gathered(opt.buffer(b), opt.range(), p, p.name + "." + b));
  return out;
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

namespace {
// Names of the state's tensors in checkpoint order. A sharded save's manifest lists tensors as
// the ranks' pieces arrive, so fingerprints of a checkpoint follow this list instead.
json tensor_order(const Trainer& t) {
  if (split_checkpoint::applies(t)) return split_checkpoint::tensor_order(t);
  json names = json::array();
  const model::LabMlp& m = t.state().model;
  for (const model::ParamTensor& p : m.layout().tensors()) names.push_back(p.name);
  for (const model::ParamTensor& p : m.layout().tensors())
    for (const std::string& b : t.state().optimizer->buffer_names()) names.push_back(p.name + "." + b);
  return names;
}
}  // namespace

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
          {"sampler",
           {{"epoch", sampler.epoch},
            {"consumed", sampler.consumed},
            {"dataset_size", s.sampler.config().dataset_size},
            {"global_batch", s.sampler.config().global_batch}}},
          {"rng",
           {{"generator", "splitmix64-counter"},
            {"seed", s.seed},
            {"epoch", sampler.epoch},
            {"consumed", sampler.consumed},
            {"note",
             "CounterRng(seed, stream, counter): counters derive from sample index, "
             "flat parameter offset and epoch, so seed + sampler position is the whole state"}}},
          {"optimizer",
           {{"kind", std::string(s.optimizer->kind())},
            {"step", s.optimizer->steps()},
            {"config", optimizer_config_json(c.optimizer)}}},
          {"model", model},
          {"model_hash", checkpoint::json_fingerprint(shape_json(c.model))},
          {"plan", plan},
          {"plan_hash", checkpoint::json_fingerprint(plan)},
          {"world_size", t.program().plan.world()},
          {"tensor_order", tensor_order(t)},
          {"software_version", kVersion}};
}

std::vector<checkpoint::TensorSlice> trainer_slices(const Trainer& t, int world, int rank) {
  t.sync_host();  // after device-optimizer steps the device holds the current state
  if (split_checkpoint::applies(t))
    throw UnsupportedOp("trainer_slices: a tensor- or pipeline-parallel trainer's share is gathered by save_trainer");
  if (t.state().shards->zero() >= 1) {
    // ZeRO: each rank saves the pieces of its own shard; together they tile every tensor.
    std::vector<checkpoint::TensorSlice> out;
    for (const StateView& v : state_views(t, true)) out.push_back({v.name, v.shape, v.first, v.data});
    return out;
  }
  const std::vector<StateView> views = state_views(t, false);
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
  t.sync_host();
  if (split_checkpoint::applies(t)) {
    const split_checkpoint::SaveSet set = split_checkpoint::save_set(t);
    return checkpoint::save_checkpoint(options, t.state().step, set.slices, trainer_metadata(t), coord);
  }
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
  // Every rank asks for what it keeps, whoever wrote the checkpoint and however it was sharded:
  // that is the resharding (zero=3 on 4 workers resumes as zero=1 on 2, as DDP, as 1 worker).
  std::vector<checkpoint::ReadRequest> into;
  ModelShards& shards = *s.shards;
  Optimizer& opt = *s.optimizer;
  const bool split = split_checkpoint::applies(t);
  if (split) into = split_checkpoint::requests(t);
  for (const model::ParamTensor& p : s.model.layout().tensors()) {
    if (split) break;
    if (shards.zero() >= 3) {
      int64_t first = 0;
      const std::span<float> v = piece(shards.params(), shards.shard(), p, first);
      if (!v.empty()) into.push_back({p.name, first, v});
    } else {
      into.push_back({p.name, 0, s.model.param(p.name)});
    }
  }
  for (const model::ParamTensor& p : s.model.layout().tensors())
    for (const std::string& b : opt.buffer_names()) {
      if (split) break;
      int64_t first = 0;
      const std::span<float> v = piece(opt.mutable_buffer(b), opt.range(), p, first);
      if (!v.empty()) into.push_back({p.name + "." + b, first, v});
    }
  ResumeResult r;
  r.load = checkpoint::load_checkpoint(options, coord, into);
  if (!r.load.checkpoint) {
    // Candidates that failed verification may have left partial data in the buffers: put back
    // the fresh state (seeded weights, zero optimizer state), exactly what the constructor made.
    if (!r.load.skipped.empty()) {
      s.model.init_params(t.config().seed);
      if (shards.zero() >= 3)
        model::LabMlp::init_values(s.model.layout(), t.config().seed, shards.shard(), shards.params(),
                                   s.model.tp_slice());
      for (const std::string& b : s.optimizer->buffer_names()) {
        const std::span<float> v = s.optimizer->mutable_buffer(b);
        std::fill(v.begin(), v.end(), 0.0f);
      }
    }
    t.host_state_changed();
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
  t.host_state_changed();  // a device model computes on copies: give it the loaded weights
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
  return {{"step", step},
          {"optimizer_step", optimizer_step},
          {"sampler", sampler.to_string()},
          {"combined_xxh3_64", combined_hex()},
          {"tensors", tensors_j}};
}

StateFingerprint StateFingerprint::from_json(const json& j) {
  try {
    StateFingerprint f;
    f.step = j.at("step").get<int64_t>();
    f.optimizer_step = j.at("optimizer_step").get<int64_t>();
    f.sampler = SamplerState::parse(j.at("sampler").get<std::string>());
    for (const json& t : j.at("tensors"))
      f.tensors.emplace_back(t.at("name").get<std::string>(),
                             checkpoint::hash_from_hex(t.at("xxh3_64").get<std::string>()));
    f.combined = checkpoint::hash_from_hex(j.at("combined_xxh3_64").get<std::string>());
    return f;
  } catch (const json::exception& e) {
    throw ConfigError("state fingerprint", j.dump().substr(0, 120), std::string("malformed: ") + e.what());
  }
}

StateFingerprint state_fingerprint(const Trainer& t) {
  t.sync_host();
  StateFingerprint f;
  f.step = t.state().step;
  f.optimizer_step = t.state().optimizer->steps();
  f.sampler = t.state().sampler.state();
  if (split_checkpoint::applies(t)) {
    f.tensors = split_checkpoint::hash_full_state(t);
  } else if (t.state().shards->zero() == 0) {
    for (const StateView& v : state_views(t, false)) f.tensors.emplace_back(v.name, hash_floats(v.data));
  } else {
    f.tensors = hash_sharded_state(t);
  }
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
  std::vector<const checkpoint::Tensor*> ordered;
  if (state.metadata.contains("tensor_order")) {
    for (const json& name : state.metadata.at("tensor_order")) {
      const checkpoint::Tensor* t = state.find(name.get<std::string>());
      if (t == nullptr) throw ConfigError("checkpoint tensor", name.get<std::string>(), "is listed but missing");
      ordered.push_back(t);
    }
  } else {
    for (const checkpoint::Tensor& t : state.tensors) ordered.push_back(&t);
  }
  for (const checkpoint::Tensor* t : ordered) f.tensors.emplace_back(t->name, hash_floats(t->data));
  f.combined = combine(f.step, f.optimizer_step, f.sampler, f.tensors);
  return f;
}

}  // namespace parlab::train
