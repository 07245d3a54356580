#include "runtime/train/trainer.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "runtime/comm/flight_recorder.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/train/dump.h"
#include "runtime/train/export.h"
#include "base/errors.h"
#include "strategy/step_program.h"

namespace parlab::train {
namespace {

double now() { return comm::wall_clock_seconds(); }

// Refuses, before anything is allocated, a program with ops the executor cannot run.
void check_program(const strategy::StepProgram& program) {
  for (const strategy::Op& op : program.ops) {
    if (const std::string why = Executor::unsupported_reason(program, op); !why.empty())
      throw UnsupportedOp("plan " + program.plan.short_name() + " [" + program.plan.to_string() +
                          "]: cannot execute rank " + std::to_string(program.rank) + " op " + std::to_string(op.id) +
                          " (" + strategy::describe(program, op) + "): " + why);
  }
}

model::FlatRange optimizer_range(const strategy::StepProgram& program) {
  const strategy::Op* found = nullptr;
  for (const strategy::Op& op : program.ops) {
    if (op.kind != strategy::OpKind::kOptimizer) continue;
    if (found)
      throw UnsupportedOp("rank " + std::to_string(program.rank) +
                          "'s program has several optimizer ops; the runtime runs one");
    found = &op;
  }
  if (!found) throw UnsupportedOp("rank " + std::to_string(program.rank) + "'s program has no optimizer op");
  return {found->flat_begin, found->flat_end};
}

int zero_stage(const strategy::Plan& plan) { return plan.dp > 1 ? plan.zero : 0; }

// The model this rank computes: its stage's layers, its tensor-parallel slice of them, holding
// what its ZeRO stage keeps.
model::LabMlp build_model(const strategy::ModelSpec& spec, const strategy::Plan& plan, int rank, uint64_t seed,
                          model::MemoryAccount* account) {
  compute::pin_blas_to_one_thread();
  const model::MlpShape shape = mlp_shape(spec);
  model::ModelStorage storage = storage_for_stage(zero_stage(plan), account);
  storage.mixed_precision = plan.precision == strategy::Precision::kMixed;
  storage.weight_grad_group = strategy::weight_grad_group(plan);
  return model::LabMlp(shape, seed, stage_model_chunks(spec, plan, rank), storage,
                       model::TpSlice{strategy::coords_of(plan, rank).tp, plan.tp});
}

// What the runtime does not run yet, refused by plan key before anything is built.
void check_strategy(const strategy::ModelSpec& spec, const strategy::Plan& plan) {
  if (plan.pp > 1 && plan.sequence_parallel)
    throw ConfigError("plan.sp", "on",
                      "must be off with pipeline parallelism for training: a stage would send only its rows of the "
                      "boundary and the next stage has no all-gather to rebuild them; `parlab simulate` takes it");
  if (plan.tp > 1 && plan.dp > 1 && plan.zero >= 3)
    throw ConfigError("plan.zero", std::to_string(plan.zero),
                      "must be at most 2 with tensor parallelism for training (checkpoints and exports of ZeRO-3 "
                      "shards of tensor-parallel slices are not implemented); `parlab simulate` takes it");
  if (plan.pp > 1 && plan.dp > 1 && plan.zero >= 1)
    throw ConfigError("plan.zero", std::to_string(plan.zero),
                      "must be 0 with pipeline parallelism for training (the runtime shards data-parallel state "
                      "of whole-model replicas only); `parlab plan` and `parlab simulate` take it");
}

// The rank's program with its flat ranges moved to the model's offsets: the generator counts a
// stage's parameters from 0 (strategy::local_param_layout), a LabMlp holding layers [a, b) from
// the offset of layer a in the (tensor-parallel local) network.
strategy::StepProgram build_program(const strategy::ModelSpec& spec, const strategy::Plan& plan, int rank) {
  check_strategy(spec, plan);
  strategy::StepProgram p = strategy::build_step(spec, plan, rank, strategy::BuildOptions{.per_layer_ops = true});
  const model::MlpShape local =
      model::LabMlp::tp_local_shape(mlp_shape(spec), {strategy::coords_of(plan, rank).tp, plan.tp});
  const int64_t base = model::ParamLayout(local).layer_range(stage_layers(spec, plan, rank).begin).begin;
  if (base != 0)
    for (strategy::Op& op : p.ops)
      if (op.flat_end > op.flat_begin || op.kind == strategy::OpKind::kOptimizer) {
        op.flat_begin += base;
        op.flat_end += base;
      }
  return p;
}

// Ordered pairs (from, to) of this rank's pipeline messages, in one order every rank agrees on
// (by the lower rank, the higher, then the sender), so creating their communicators in it pairs
// up without deadlock.
std::vector<std::pair<int, int>> p2p_pairs(const strategy::StepProgram& program) {
  std::vector<std::pair<int, int>> out;
  for (const strategy::Op& op : program.ops) {
    if (op.kind == strategy::OpKind::kSend) out.emplace_back(program.rank, op.peer);
    if (op.kind == strategy::OpKind::kRecv) out.emplace_back(op.peer, program.rank);
  }
  auto key = [](const std::pair<int, int>& e) {
    return std::tuple(std::min(e.first, e.second), std::max(e.first, e.second), e.first);
  };
  std::sort(out.begin(), out.end(), [&](const auto& a, const auto& b) { return key(a) < key(b); });
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::map<std::string, std::string> dump_metadata(const TrainConfig& c, int rank, int world, int64_t step,
                                                 int64_t global_batch) {
  const model::MlpShape s = mlp_shape(c.model);
  return {{"rank", std::to_string(rank)},
          {"world", std::to_string(world)},
          {"step", std::to_string(step)},
          {"global_batch", std::to_string(global_batch)},
          {"microbatches", std::to_string(c.plan.microbatches)},
          {"plan", c.plan.to_string()},
          {"model", "hidden=" + std::to_string(s.hidden) + ",ffn=" + std::to_string(s.ffn) +
                        ",blocks=" + std::to_string(s.blocks) + ",classes=" + std::to_string(s.classes)},
          {"seed", std::to_string(c.seed)}};
}

}  // namespace

std::vector<model::LayerChunk> stage_model_chunks(const strategy::ModelSpec& spec, const strategy::Plan& plan,
                                                  int rank) {
  std::vector<model::LayerChunk> out;
  for (const strategy::LayerRange& c : strategy::stage_chunks(spec, plan, strategy::coords_of(plan, rank).pp))
    if (c.size() > 0) out.push_back({c.begin, c.end});
  return out;
}

strategy::LayerRange stage_layers(const strategy::ModelSpec& spec, const strategy::Plan& plan, int rank) {
  const std::vector<strategy::LayerRange> chunks =
      strategy::stage_chunks(spec, plan, strategy::coords_of(plan, rank).pp);
  return {chunks.front().begin, chunks.back().end};
}

model::MlpShape mlp_shape(const strategy::ModelSpec& m) {
  if (m.kind != strategy::ModelKind::kMlp)
    throw ConfigError("model.kind", m.kind_name(), "the runtime trains the lab network only (kind = \"mlp\")");
  model::MlpShape s{.hidden = m.hidden, .ffn = m.ffn, .blocks = m.layers, .classes = m.classes};
  s.validate();
  return s;
}

strategy::Plan resolve_train_plan(const strategy::ModelSpec& model, std::string_view plan_text, int world,
                                  const strategy::ClusterSpec& cluster) {
  return resolve_train_plan(model, strategy::parse_plan(plan_text), world, cluster);
}

strategy::Plan resolve_train_plan(const strategy::ModelSpec& model, strategy::Plan given, int world,
                                  const strategy::ClusterSpec& cluster) {
  strategy::Plan p = strategy::resolve(std::move(given), model, world);
  strategy::validate(p, model, strategy::with_world(cluster, world));
  if (p.precision == strategy::Precision::kMixed && !compute::cpu::bf16_supported())
    throw ConfigError("plan.precision", "mixed",
                      "needs bf16 matmuls, and " + std::string(compute::cpu::bf16_unsupported_reason()) +
                          "; train with precision=fp32");
  if (p.precision == strategy::Precision::kMixed && p.mixed_state != strategy::MixedState::kFp32Main)
    throw ConfigError("plan.mixed_state", std::string(strategy::to_string(p.mixed_state)),
                      "must be fp32-main for training: the runtime accumulates and reduces fp32 gradients and keeps "
                      "an fp32 master copy; `parlab plan` and `parlab simulate` take zero");
  return p;
}

void check_runtime_supports(const strategy::ModelSpec& model, const strategy::Plan& plan) {
  (void)mlp_shape(model);
  // Whole strategies first, named by their plan key: the per-op refusals below are for programs
  // a supported strategy writes in a way the runtime cannot follow yet.
  if (model.ffn % plan.tp != 0)
    throw ConfigError("plan.tp", std::to_string(plan.tp),
                      "must divide the model's ffn (" + std::to_string(model.ffn) + "): fc1 and fc2 are split t ways");
  for (int r = 0; r < plan.world(); ++r) check_program(build_program(model, plan, r));
}

OptimizerConfig optimizer_config(strategy::OptimizerKind kind, double lr, double momentum, double weight_decay) {
  if (kind == strategy::OptimizerKind::kSgd) {
    SgdConfig c;
    if (lr > 0) c.lr = lr;
    c.momentum = momentum;
    if (weight_decay >= 0) c.weight_decay = weight_decay;
    return c;
  }
  AdamWConfig c;
  if (lr > 0) c.lr = lr;
  if (weight_decay >= 0) c.weight_decay = weight_decay;
  return c;
}

Trainer::Trainer(TrainConfig config, comm::Communicator& world, TrainerOptions options)
    : config_(std::move(config)),
      world_(world),
      options_(std::move(options)),
      program_(build_program(config_.model, config_.plan, world.rank())),
      dp_rank_(strategy::coords_of(config_.plan, world.rank()).dp),
      data_(SyntheticConfig{.seed = config_.seed,
                            .size = config_.data_size,
                            .width = config_.model.hidden,
                            .classes = config_.model.classes}),
      state_{0,
             (check_program(program_), build_model(config_.model, config_.plan, world.rank(), config_.seed, &memory_)),
             make_optimizer(config_.optimizer, optimizer_range(program_), &memory_),
             ElasticSampler(SamplerConfig{
                 .seed = config_.seed, .dataset_size = config_.data_size, .global_batch = config_.plan.global_batch}),
             config_.seed} {
  if (world.size() != config_.plan.world())
    throw ConfigError("world size", std::to_string(world.size()),
                      "must equal the plan's dp*tp*pp (" + std::to_string(config_.plan.world()) + ")");
  // Host-memory communicators (dumps, exports and fingerprints gather over the DP group), and on
  // a device the same groups over `collectives` for the step program.
  std::vector<comm::Communicator*> comms = group_communicators(world);
  for (size_t i = 0; i < program_.groups.size(); ++i)
    if (program_.groups[i].kind == strategy::GroupKind::kDP && program_.groups[i].size() == config_.plan.dp)
      dp_comm_ = comms[i];
  if (dp_comm_ == nullptr) dp_comm_ = &world;  // dp = 1: no DP op, the shard is everything
  // DDP and ZeRO-1 on the host: the gradients live in the DP group's registered memory, so their
  // all-reduces and reduce-scatters (buckets are spans of them) read the peers' gradients in
  // place on shared memory. Every member of the group allocates here, in the same order.
  if (!options_.collectives && config_.plan.dp > 1 && zero_stage(config_.plan) <= 1 && state_.model.holds_grads()) {
    comm::RegisteredBuffer grads =
        dp_comm_->allocate_registered(static_cast<size_t>(state_.model.owned_range().numel()));
    state_.model.adopt_grads(grads.data, std::move(grads.keep));
  }
  for (size_t i = 0; i < program_.groups.size(); ++i)
    if (program_.groups[i].kind == strategy::GroupKind::kTP && config_.plan.tp > 1) tp_comm_ = comms[i];
  if ((options_.collectives == nullptr) != !options_.make_device_model)
    throw ConfigError("trainer options", "collectives without a device model (or the reverse)",
                      "a device run sets both");
  if (options_.collectives) {
    if (options_.collectives->world_ranks() != world.world_ranks())
      throw ConfigError("trainer collectives", options_.collectives->group_name(), "must span the world's ranks");
    // The model first: a device model may tell `collectives` which stream its groups wait for.
    state_.device_model = options_.make_device_model(state_.model, config_.plan);
    // Refused before any group meets: a rank that refused later left its peer connecting to it.
    check_update_placement(zero_stage(config_.plan), *state_.device_model, bool(options_.make_device_optimizer),
                           state_.optimizer->kind());
    // Every group of the program, TP included: boundary tensors are compute memory (model.h).
    comms = group_communicators(*options_.collectives);
  }
  // Pipeline paths: one communicator per direction and neighbour (executor.h says why), split off
  // the communicator the program's collectives use (on a device, after the model, whose stream
  // they then wait for).
  comm::Communicator& p2p_base = options_.collectives ? *options_.collectives : world;
  std::map<int, comm::Communicator*> send_comms, recv_comms;
  for (const auto& [from, to] : p2p_pairs(program_)) {
    owned_comms_.push_back(p2p_base.split({std::min(from, to), std::max(from, to)},
                                          "p2p." + std::to_string(from) + ">" + std::to_string(to)));
    (from == world.rank() ? send_comms[to] : recv_comms[from]) = owned_comms_.back().get();
  }
  model::Model& compute = state_.compute_model();
  const bool mixed = config_.plan.precision == strategy::Precision::kMixed;
  state_.shards = std::make_unique<ModelShards>(
      compute, zero_stage(config_.plan), optimizer_range(program_), config_.seed, &memory_,
      mixed ? model::MemoryCategory::kOptimizer : model::MemoryCategory::kParameters);
  // ZeRO-3 on the host: the parameter shards live in the DP group's registered memory, so each
  // per-layer all-gather copies the peers' chunks straight from their shards on shared memory.
  // Every member allocates the largest shard (uneven shards differ by an element), in one order.
  if (!options_.collectives && config_.plan.dp > 1 && zero_stage(config_.plan) >= 3) {
    const int64_t n = compute.owned_range().numel();
    int64_t largest = 0;
    for (int r = 0; r < config_.plan.dp; ++r) largest = std::max(largest, zero_shard(n, config_.plan.dp, r).numel());
    comm::RegisteredBuffer shard = dp_comm_->allocate_registered(static_cast<size_t>(largest));
    state_.shards->adopt_params(shard.data, std::move(shard.keep));
  }
  ExecutorOptions eo;
  eo.comm_timeout = config_.comm_timeout;
  eo.faults = options_.faults;
  eo.account = &memory_;
  eo.send_comms = std::move(send_comms);
  eo.recv_comms = std::move(recv_comms);
  if (state_.device_model && options_.make_device_optimizer)
    state_.device_optimizer = options_.make_device_optimizer(*state_.optimizer, *state_.device_model);
  eo.device_optimizer = state_.device_optimizer.get();
  if (options_.core_home.returns()) eo.after_meeting = [home = options_.core_home] { home.return_home(); };
  executor_ = std::make_unique<Executor>(program_, compute, *state_.optimizer, *state_.shards, std::move(comms), eo);
  // Every communicator (and its thread) exists by now: only this, the compute thread, settles.
  options_.core_home.settle();
}

std::vector<comm::Communicator*> Trainer::group_communicators(comm::Communicator& base) {
  // A communicator for each group an op talks to: `base` itself when the group is everybody,
  // else split off it (members only, in the program's group order, the same on every member).
  // Groups no op uses (the size-1 TP and PP groups of a DDP plan) get none.
  std::vector<bool> used(program_.groups.size(), false);
  for (const strategy::Op& op : program_.ops)
    if (op.group >= 0) used.at(op.group) = true;
  std::vector<comm::Communicator*> comms(program_.groups.size(), nullptr);
  for (size_t i = 0; i < program_.groups.size(); ++i) {
    const strategy::Group& g = program_.groups[i];
    if (!used[i]) continue;
    if (g.ranks == base.world_ranks()) {
      comms[i] = &base;
    } else {
      owned_comms_.push_back(base.split(g.ranks, g.name));
      comms[i] = owned_comms_.back().get();
    }
  }
  return comms;
}

void Trainer::host_state_changed() {
  if (state_.device_model && state_.model.holds_params()) state_.device_model->push_params(state_.model.owned_range());
  if (state_.shards) state_.shards->push_params();  // a device stage-3 shard
  if (state_.device_optimizer) state_.device_optimizer->upload_state(*state_.optimizer);
  host_stale_ = false;
}

void Trainer::sync_host() const {
  if (!host_stale_) return;
  auto& self = const_cast<Trainer&>(*this);  // the host buffers mirror the device (see trainer.h)
  if (state_.model.holds_params()) self.state_.device_model->pull_params(state_.model.owned_range());
  self.state_.shards->pull_params();
  if (state_.device_optimizer) state_.device_optimizer->download_state(*self.state_.optimizer);
  host_stale_ = false;
}

comm::Communicator& Trainer::dp_comm() const { return *dp_comm_; }

comm::Communicator& Trainer::tp_comm() const {
  if (tp_comm_ == nullptr)
    throw RuntimeError("rank " + std::to_string(world_.rank()) + " has no tensor-parallel group");
  return *tp_comm_;
}

Trainer::~Trainer() = default;

std::vector<const comm::Communicator*> Trainer::communicators() const {
  std::vector<const comm::Communicator*> out = {&world_};
  if (options_.collectives) out.push_back(options_.collectives);
  for (const auto& c : owned_comms_) out.push_back(c.get());
  return out;
}

int64_t Trainer::bucket_ring_bytes() const { return executor_ ? executor_->bucket_ring_bytes() : 0; }

std::vector<model::MicrobatchState> Trainer::load_microbatches(const GlobalBatch& batch,
                                                               std::vector<std::vector<int64_t>>& indices) {
  const std::vector<int64_t> mine = state_.sampler.rank_indices(batch, dp_rank_, config_.plan.dp);
  const int m = static_cast<int>(config_.plan.microbatches);
  const model::MlpShape shape = state_.model.shape();
  std::vector<model::MicrobatchState> mbs;
  mbs.reserve(m);
  indices.assign(m, {});
  for (int k = 0; k < m; ++k) {
    const RankSlice s = rank_slice(static_cast<int64_t>(mine.size()), k, m);
    indices[k].assign(mine.begin() + s.begin, mine.begin() + s.begin + s.count);
    mbs.emplace_back(shape, s.count, batch.size, &memory_);
    data_.fill(indices[k], mbs.back());
  }
  return mbs;
}

// --dump-step: the weights and gradients the optimizer is about to use, as whole tensors in
// weights/grads.safetensors. Runs inside the step, just before the optimizer op; issues its own
// collectives when the rank holds only part of the model (every rank reaches its optimizer op at
// the same point of the program, so they pair up).
void Trainer::dump_optimizer_inputs(const strategy::Op& op, std::span<const float> params, std::span<const float> grads,
                                    const std::map<std::string, std::string>& meta) {
  const model::ParamLayout& layout = state_.model.layout();
  if (config_.plan.tp > 1 || config_.plan.pp > 1) {
    // Slices of a stage: the whole network's tensors, gathered over the world (every rank
    // reaches its one optimizer op, so the gathers pair up). Under ZeRO the reduced
    // gradients are the shard's: the DP group gathers the rank's whole local buffer first.
    std::vector<float> local_grads(grads.begin(), grads.end());
    if (state_.shards->zero() >= 1) {
      const int64_t n = state_.model.owned_range().numel();
      std::vector<float> whole(static_cast<size_t>(n));
      comm::CollectiveOptions o;
      o.timeout = config_.comm_timeout;
      o.tag = "dump.local_grads";
      dp_comm_->all_gather_v(grads, whole, shard_counts({0, n}, n, dp_comm_->size()), o)->wait();
      local_grads = std::move(whole);
    }
    const std::vector<float> all_params = gather_split_buffer(*this, state_.model.params(), "dump.weights");
    const std::vector<float> all_grads = gather_split_buffer(*this, local_grads, "dump.grads");
    const model::ParamLayout whole(mlp_shape(config_.model));
    write_dump_tensors(options_.dump_dir / "weights.safetensors", whole, 0, all_params, meta);
    write_dump_tensors(options_.dump_dir / "grads.safetensors", whole, 0, all_grads, meta);
  } else if (state_.shards->zero() >= 1) {
    // A ZeRO rank holds a shard: gather both so the files hold whole tensors, as a
    // replica's do. Every rank reaches its optimizer op at the same point of the program,
    // so these collectives pair up (the parameter all-gathers come after it).
    const int64_t n = layout.numel();
    const std::vector<int64_t> counts = shard_counts({0, n}, n, dp_comm_->size());
    comm::CollectiveOptions o;
    o.timeout = config_.comm_timeout;
    std::vector<float> all_params(static_cast<size_t>(n)), all_grads(static_cast<size_t>(n));
    o.tag = "dump.weights";
    dp_comm_->all_gather_v(params, all_params, counts, o)->wait();
    o.tag = "dump.grads";
    dp_comm_->all_gather_v(grads, all_grads, counts, o)->wait();
    write_dump_tensors(options_.dump_dir / "weights.safetensors", layout, 0, all_params, meta);
    write_dump_tensors(options_.dump_dir / "grads.safetensors", layout, 0, all_grads, meta);
  } else {
    write_dump_tensors(options_.dump_dir / "weights.safetensors", layout, op.flat_begin, params, meta);
    write_dump_tensors(options_.dump_dir / "grads.safetensors", layout, op.flat_begin, grads, meta);
  }
}

StepRecord Trainer::step() {
  const double t0 = now();
  const GlobalBatch batch = state_.sampler.next_batch();
  std::vector<std::vector<int64_t>> indices;
  std::vector<model::MicrobatchState> mbs = load_microbatches(batch, indices);
  const double t1 = now();

  const bool dump = !options_.dump_dir.empty() && state_.step == 0;
  double dump_seconds = 0;  // file writes are not training time
  if (dump) {
    const auto meta = dump_metadata(config_, world_.rank(), world_.size(), state_.step, batch.size);
    write_dump_inputs(options_.dump_dir, config_.model.hidden, mbs, indices, meta);
    executor_->set_before_optimizer(
        [&, meta](const strategy::Op& op, std::span<const float> params, std::span<const float> grads) {
          const double w0 = now();
          dump_optimizer_inputs(op, params, grads, meta);
          dump_seconds += now() - w0;
        });
    dump_seconds += now() - t1;
  }
  ExecResult r = executor_->run(mbs, state_.step);
  if (dump) executor_->set_before_optimizer(nullptr);
  state_.sampler.advance();
  const double t2 = now();

  StepRecord rec;
  rec.rank = world_.rank();
  rec.world = world_.size();
  rec.step = state_.step;
  rec.epoch = batch.epoch;
  rec.global_batch = batch.size;
  // One rank per replica reports the loss and its samples (the last stage computes the loss;
  // its tensor-parallel ranks compute the same one), so sums over ranks stay the global ones.
  const strategy::RankCoords me = strategy::coords_of(config_.plan, world_.rank());
  if (me.pp == config_.plan.pp - 1 && me.tp == 0) {
    for (const model::MicrobatchState& mb : mbs) {
      rec.samples += mb.batch();
      rec.loss_sum += mb.loss_sum();
    }
  }
  StepTimes& t = rec.times;
  t.data_seconds = t1 - t0;
  t.forward_seconds = r.forward_seconds;
  t.backward_seconds = r.backward_seconds;
  t.exposed_comm_seconds = r.exposed_comm_seconds;
  t.optimizer_seconds = r.optimizer_seconds;
  t.comm_seconds = r.comm_seconds;
  t.step_seconds = t2 - t0 - dump_seconds;
  t.idle_seconds = std::max(0.0, t.step_seconds - t.data_seconds - t.forward_seconds - t.backward_seconds -
                                     t.exposed_comm_seconds - t.optimizer_seconds);
  rec.end_seconds = t2;
  if (options_.record_samples)
    for (const std::vector<int64_t>& mb : indices)
      rec.sample_indices.insert(rec.sample_indices.end(), mb.begin(), mb.end());
  if (options_.record_events) {
    rec.events = std::move(r.events);
    rec.events.push_back(OpEvent{rec.rank, rec.step, -1, "compute", "data", "data", "", 0, t0, t1, ""});
  }
  ++state_.step;
  // The device holds the current weights after a device update, and after a ZeRO step whose
  // all-gather of the updated shards ran in device memory (the host updated only its own shard).
  if (state_.device_optimizer || (state_.device_model && state_.shards->zero() >= 1)) host_stale_ = true;
  if (options_.sink) options_.sink->on_step(rec);
  return rec;
}

}  // namespace parlab::train
