#include "runtime/train/executor.h"

#include <thread>

#include "runtime/comm/flight_recorder.h"
#include "base/errors.h"

namespace parlab::train {
namespace {

using strategy::Op;
using strategy::OpKind;
using strategy::Stream;

double now() { return comm::wall_clock_seconds(); }

std::string where(const strategy::StepProgram& p, const Op& op) {
  return "rank " + std::to_string(p.rank) + " op " + std::to_string(op.id) + " (" + strategy::describe(p, op) + ")";
}

}  // namespace

// ---- the dispatch table ----

Executor::Handler Executor::handler_for(OpKind kind) {
  switch (kind) {
    case OpKind::kForward:
      return &Executor::run_forward;
    case OpKind::kBackward:
      return &Executor::run_backward;
    case OpKind::kOptimizer:
      return &Executor::run_optimizer;
    case OpKind::kZeroGrad:
      return &Executor::run_zero_grad;
    case OpKind::kAllReduce:
      return &Executor::issue_all_reduce;
    case OpKind::kReduceScatter:
      return &Executor::issue_reduce_scatter;
    case OpKind::kAllGather:
      return &Executor::issue_all_gather;
    case OpKind::kBroadcast:
      return &Executor::issue_broadcast;
    case OpKind::kSend:
      return &Executor::issue_send;
    case OpKind::kRecv:
      return &Executor::issue_recv;
    default:
      return nullptr;
  }
}

std::string Executor::unsupported_reason(const strategy::StepProgram& program, const Op& op) {
  switch (op.kind) {
    case OpKind::kForward:
    case OpKind::kBackward:
    case OpKind::kOptimizer:
      return "";
    case OpKind::kZeroGrad:
      if (op.stream != strategy::Stream::kCompute) return "a gradient clear runs on the compute stream";
      return "";
    case OpKind::kAllReduce: {
      const strategy::Group& g = program.group_of(op);
      if (g.kind == strategy::GroupKind::kTP) return tp_unsupported_reason(program, op);
      if (g.kind == strategy::GroupKind::kEmbedding)
        return "the tied-embedding all-reduce is not implemented by the runtime yet";
      if (op.flat_end <= op.flat_begin)
        return "an all-reduce without a gradient range [flat_begin, flat_end) has nothing to reduce";
      if (op.count != 1) return "back-to-back calls (count > 1) are not implemented by the runtime yet";
      return "";
    }
    case OpKind::kReduceScatter:
    case OpKind::kAllGather:
    case OpKind::kBroadcast: {
      const strategy::Group& g = program.group_of(op);
      const std::string what(strategy::to_string(op.kind));
      if (g.kind == strategy::GroupKind::kTP && op.kind != OpKind::kBroadcast)
        return tp_unsupported_reason(program, op);
      if (g.kind != strategy::GroupKind::kDP)
        return what + " over a " + std::string(strategy::to_string(g.kind)) +
               " group is not implemented by the runtime yet (it shards data-parallel state only)";
      if (op.flat_end <= op.flat_begin)
        return "a " + what + " without a flat range [flat_begin, flat_end) has nothing to move";
      if (op.count != 1) return "back-to-back calls (count > 1) are not implemented by the runtime yet";
      if (op.kind == OpKind::kBroadcast && program.plan.zero >= 3 && program.plan.dp > 1)
        return "a ZeRO-3 rank holds only its shard of the parameters: there is nothing whole to broadcast";
      return "";
    }
    case OpKind::kSend:
    case OpKind::kRecv:
      if (op.peer < 0 || op.peer >= program.world) return "a send/recv without a peer rank has nowhere to go";
      if (op.peer == program.rank) return "a send/recv to itself (the interleaved wrap-around on one stage)";
      return "";
  }
  return "unknown op kind";
}

namespace {

int effective_zero(const strategy::StepProgram& p) { return p.plan.dp > 1 ? p.plan.zero : 0; }

}  // namespace

// A TP collective reduces the boundary tensor of one block, right after its forward or
// backward (strategy/gen/tensor.cpp writes them so under per-layer ops).
std::string Executor::tp_unsupported_reason(const strategy::StepProgram& program, const Op& op) {
  if (op.layers.size() != 1 || op.count != 1)
    return "a tensor-parallel collective must follow one layer's compute (per-layer ops, count 1)";
  if (op.deps.size() != 1 || op.deps[0] < 0 || op.deps[0] >= op.id || !program.ops[op.deps[0]].is_layer_compute())
    return "a tensor-parallel collective must depend on exactly the forward or backward it reduces";
  return "";
}

namespace {

model::FlatRange program_optimizer_range(const strategy::StepProgram& p, const model::Model& m) {
  for (const Op& op : p.ops)
    if (op.kind == OpKind::kOptimizer) return {op.flat_begin, op.flat_end};
  return m.owned_range();
}

}  // namespace

Executor::Executor(const strategy::StepProgram& program, model::Model& model, Optimizer& optimizer,
                   std::vector<comm::Communicator*> comms, ExecutorOptions options)
    : program_(program),
      model_(model),
      optimizer_(optimizer),
      own_shards_(std::make_unique<ModelShards>(model, effective_zero(program), program_optimizer_range(program, model),
                                                0, nullptr)),
      shards_(*own_shards_),
      comms_(std::move(comms)),
      options_(std::move(options)) {
  check_and_plan();
}

Executor::Executor(const strategy::StepProgram& program, model::Model& model, Optimizer& optimizer, ModelShards& shards,
                   std::vector<comm::Communicator*> comms, ExecutorOptions options)
    : program_(program),
      model_(model),
      optimizer_(optimizer),
      shards_(shards),
      comms_(std::move(comms)),
      options_(std::move(options)) {
  check_and_plan();
}

Executor::~Executor() = default;

// The program's structure: ops the executor can run, dependencies on earlier ops only.
void Executor::check_runnable(const Op& op) const {
  if (const std::string why = unsupported_reason(program_, op); !why.empty())
    throw UnsupportedOp("cannot execute " + where(program_, op) + ": " + why);
  for (int d : op.deps)
    if (d < 0 || d >= op.id)
      throw ConfigError("program op " + std::to_string(op.id) + " deps", std::to_string(d),
                        "must name an earlier op of the program");
}

// The backward accumulates into the gradient buffer: the step must clear all of it, once, first.
void Executor::check_gradient_clear(const Op& op, model::FlatRange grads, int& clears) const {
  if (op.kind == OpKind::kZeroGrad) {
    ++clears;
    if (!(model::FlatRange{op.flat_begin, op.flat_end} == grads))
      throw ConfigError("gradient clear range", std::to_string(op.flat_begin) + ".." + std::to_string(op.flat_end),
                        "must be the gradient buffer this rank holds (" + std::to_string(grads.begin) + ".." +
                            std::to_string(grads.end) + ")");
  }
  if (op.kind == OpKind::kBackward && clears == 0)
    throw ConfigError("program op " + std::to_string(op.id), where(program_, op),
                      "accumulates gradients before the step clears them (a zero-grad op must come first)");
}

// A layer's forward or backward: a layer the model holds, a microbatch of the plan.
void Executor::check_layer_compute(const Op& op) const {
  if (!op.is_layer_compute()) return;
  for (int l = op.layers.begin; l < op.layers.end; ++l)
    if (!model_.owns_layer(l))
      throw ConfigError("model layers",
                        std::to_string(model_.first_layer()) + ".." + std::to_string(model_.end_layer() - 1),
                        where(program_, op) + " computes layer " + std::to_string(l));
  if (op.microbatch < 0 || op.microbatch >= program_.plan.microbatches)
    throw ConfigError("program op " + std::to_string(op.id) + " microbatch", std::to_string(op.microbatch),
                      "outside the plan's microbatches");
}

// The optimizer op covers exactly the optimizer's range, inside what the rank holds.
void Executor::check_optimizer_range(const Op& op, model::FlatRange owned) const {
  if (op.kind != OpKind::kOptimizer) return;
  if (!(model::FlatRange{op.flat_begin, op.flat_end} == optimizer_.range()))
    throw ConfigError("optimizer range",
                      std::to_string(optimizer_.range().begin) + ".." + std::to_string(optimizer_.range().end),
                      "must equal " + where(program_, op) + "'s range " + std::to_string(op.flat_begin) + ".." +
                          std::to_string(op.flat_end));
  if (!owned.contains({op.flat_begin, op.flat_end}))
    throw ConfigError("optimizer range", std::to_string(op.flat_begin) + ".." + std::to_string(op.flat_end),
                      "lies outside the parameters this rank holds");
}

// A collective: a bucket the rank holds (data parallel), a communicator whose members are the
// group's ranks.
void Executor::check_collective(const Op& op, model::FlatRange owned) const {
  if (!op.is_collective()) return;
  if (!is_tp(op) && !owned.contains({op.flat_begin, op.flat_end}))
    throw ConfigError("bucket range", std::to_string(op.flat_begin) + ".." + std::to_string(op.flat_end),
                      where(program_, op) + " lies outside the gradients this rank holds");
  const comm::Communicator* c = comms_.at(op.group);
  const strategy::Group& g = program_.group_of(op);
  if (c == nullptr)
    throw ConfigError("executor.comms[" + std::to_string(op.group) + "]", "null",
                      "group " + g.name + " needs a communicator for " + where(program_, op));
  if (c->world_ranks() != g.ranks)
    throw ConfigError("communicator of group " + g.name, c->group_name(),
                      "its members must be the group's ranks, in order");
}

// What the rank keeps between steps matches the program: the ZeRO stage, the shard, where the
// update runs.
void Executor::check_shards() const {
  if (shards_.zero() != effective_zero(program_))
    throw ConfigError("ZeRO stage of the shards", std::to_string(shards_.zero()),
                      "must be the program's (" + std::to_string(effective_zero(program_)) + ")");
  if (!(shards_.shard() == optimizer_.range()))
    throw ConfigError("ZeRO shard", std::to_string(shards_.shard().begin) + ".." + std::to_string(shards_.shard().end),
                      "must be the optimizer's range");
  check_update_placement(shards_.zero(), model_, options_.device_optimizer != nullptr, optimizer_.kind());
}

void check_update_placement(int zero, const model::Model& compute, bool device_optimizer,
                            std::string_view optimizer_kind) {
  if (!device_optimizer && !compute.compute_is_host() && zero >= 2)
    throw ConfigError("optimizer", std::string(optimizer_kind),
                      "ZeRO-" + std::to_string(zero) + " on the " + std::string(compute.device_name()) +
                          " model keeps its shards in device memory: the update must run there (AdamW)");
}

void Executor::check_and_plan() {
  if (comms_.size() != program_.groups.size())
    throw ConfigError(
        "executor.comms", std::to_string(comms_.size()),
        "must give one communicator slot per program group (" + std::to_string(program_.groups.size()) + ")");
  const model::FlatRange owned = model_.owned_range();
  const model::FlatRange grads = effective_zero(program_) >= 2 ? optimizer_.range() : owned;
  int clears = 0;
  for (const Op& op : program_.ops) {
    check_runnable(op);
    check_gradient_clear(op, grads, clears);
    check_layer_compute(op);
    check_optimizer_range(op, owned);
    check_collective(op, owned);
  }
  if (clears > 1) throw ConfigError("zero-grad ops", std::to_string(clears), "a step clears its gradients once");
  check_shards();
  flat_elements_ = owned.numel();
  plan_zero_buffers();
  plan_p2p();
  grads_deferrable_ = deferrable_backwards(program_, model_.layout());
}

namespace {
// A data-parallel bucket's all-reduce or reduce-scatter reads the gradients of its range only.
bool reads_grad_range(const Op& op) {
  return (op.kind == OpKind::kAllReduce || op.kind == OpKind::kReduceScatter) && op.flat_end > op.flat_begin;
}

// Whether `op` reads, moves or clears gradients of flat `range`: a deferred weight gradient there
// must be in the buffer before it runs. The optimizer, the clear and any other data-parallel
// collective (a ZeRO gather, a broadcast) count as reading them all.
bool reads_grads(const strategy::StepProgram& program, const Op& op, model::FlatRange range) {
  if (op.kind == OpKind::kOptimizer || op.kind == OpKind::kZeroGrad) return true;
  if (!op.is_collective() || program.group_of(op).kind == strategy::GroupKind::kTP) return false;
  return !reads_grad_range(op) || range.intersects({op.flat_begin, op.flat_end});
}
}  // namespace

std::vector<char> Executor::deferrable_backwards(const strategy::StepProgram& program,
                                                 const model::ParamLayout& layout) {
  std::vector<char> deferrable(program.ops.size(), 0);
  for (const Op& op : program.ops) {
    if (op.kind != OpKind::kBackward) continue;
    const model::FlatRange own = layout.layers_range(op.layers.begin, op.layers.end);
    for (size_t j = static_cast<size_t>(op.id) + 1; j < program.ops.size(); ++j) {
      const Op& next = program.ops[j];
      if (reads_grads(program, next, own)) break;
      if (next.kind == OpKind::kBackward && next.layers.begin == op.layers.begin && next.layers.end == op.layers.end) {
        deferrable[static_cast<size_t>(op.id)] = 1;
        break;
      }
    }
  }
  return deferrable;
}

// ---- one step ----

ExecResult Executor::run(std::span<model::MicrobatchState> microbatches, int64_t step) {
  if (static_cast<int64_t>(microbatches.size()) != program_.plan.microbatches)
    throw ConfigError("microbatches", std::to_string(microbatches.size()),
                      "must equal the plan's microbatches (" + std::to_string(program_.plan.microbatches) + ")");
  mbs_ = microbatches;
  step_ = step;
  result_ = ExecResult{};
  issued_.clear();
  issued_index_.assign(program_.ops.size(), -1);
  last_comm_stream_op_ = -1;
  release_buffers();
  pending_reduce_scatters_.clear();

  try {
    for (const Op& op : program_.ops) {
      wait_for_deps(op);
      if (reads_grads(program_, op, model_.owned_range()) &&
          model_.weight_grads_pending(reads_grad_range(op) ? model::FlatRange{op.flat_begin, op.flat_end}
                                                           : model_.owned_range()))
        throw RuntimeError("executor: " + where(program_, op) + " would read gradients a weight-gradient group holds");
      handler_started_ = now();
      handler_op_ = op.id;
      (this->*handler_for(op.kind))(op);
    }
    if (model_.weight_grads_pending()) throw RuntimeError("executor: the step ended with weight gradients pending");
    drain();
    if (options_.after_meeting) options_.after_meeting();
    unbind_all();  // every buffer of the step was retired or freed; nothing may point at them
  } catch (...) {
    // Do not leave ops in flight over buffers the caller may free; their own timeouts bound this.
    for (Issued& i : issued_) {
      try {
        i.work->wait();
      } catch (...) {}
    }
    unbind_all();
    throw;
  }
  collect_comm_events();
  return std::move(result_);
}

void Executor::wait_work(int op_id, double since) {
  const int idx = issued_index_.at(op_id);
  if (idx < 0) return;
  Issued& i = issued_[idx];
  if (i.observed_done_seconds >= 0) return;
  const double t0 = since >= 0 ? since : now();
  i.work->wait();
  const double t1 = now();
  i.observed_done_seconds = t1;
  result_.exposed_comm_seconds += t1 - t0;
  retire_reduce_scatter(op_id);
}

void Executor::wait_for_deps(const Op& op) {
  const bool comm_stream = op.stream == Stream::kComm && op.is_collective();
  for (int d : op.deps) {
    const int idx = issued_index_.at(d);
    if (idx < 0) continue;  // a compute op: already done, the main thread ran it
    // The communicator's thread already orders ops it runs itself.
    if (comm_stream && issued_[idx].comm == &comm_of(op)) continue;
    wait_work(d);
  }
  if (comm_stream && last_comm_stream_op_ >= 0 && issued_[issued_index_[last_comm_stream_op_]].comm != &comm_of(op))
    wait_work(last_comm_stream_op_);
}

void Executor::drain() {
  for (const Issued& i : issued_) wait_work(i.op_id);
}

comm::Communicator& Executor::comm_of(const Op& op) const { return *comms_.at(op.group); }

std::span<float> Executor::grad_range(const Op& op) { return model_.compute_grads({op.flat_begin, op.flat_end}); }

void Executor::add_compute_event(const Op& op, double start, double end) {
  OpEvent e;
  e.rank = program_.rank;
  e.step = step_;
  e.op_id = op.id;
  e.stream = "compute";
  e.op = std::string(strategy::to_string(op.kind));
  e.tag = op.tag;
  e.start_seconds = start;
  e.end_seconds = end;
  e.phase = std::string(strategy::to_string(op.phase));
  result_.events.push_back(std::move(e));
}

// ZeRO-2/3's bucket work on the compute stream (a bucket zeroed before the backward that writes
// it, its reduced chunk added into the gradient shard after its reduce-scatter): the backward's
// part of the step, as the cost model prices it (strategy::bucket_work_seconds), with an event of
// its own so a trace shows it apart from the layers.
void Executor::add_bucket_work(const Op& rs, double start, double end) {
  result_.backward_seconds += end - start;
  OpEvent e;
  e.rank = program_.rank;
  e.step = step_;
  e.op_id = rs.id;
  e.stream = "compute";
  e.op = "bucket-work";
  e.tag = rs.tag;
  e.start_seconds = start;
  e.end_seconds = end;
  result_.events.push_back(std::move(e));
}

double Executor::slowed(double start, double end) const {
  const InjectedFaults& f = options_.faults;
  if (!(f.compute_slowdown > 1) || step_ < f.slow_from_step) return end;
  const double extra = (f.compute_slowdown - 1) * (end - start);
  // A sleep overshoots by the timer slack (~50 us): short waits spin, so the factor holds for
  // the lab's microsecond-sized ops too.
  if (extra < 1e-3) {
    while (now() < end + extra) {}
  } else {
    std::this_thread::sleep_for(std::chrono::duration<double>(extra));
  }
  return now();
}

void Executor::run_forward(const Op& op) {
  model::MicrobatchState& mb = mbs_[op.microbatch];
  before_compute(op);
  const double t0 = now();
  for (int l = op.layers.begin; l < op.layers.end; ++l) model_.forward_layer(l, mb);
  model_.synchronize();
  const double t1 = slowed(t0, now());
  result_.forward_seconds += t1 - t0;
  add_compute_event(op, t0, t1);
  after_compute(op);
}

void Executor::run_backward(const Op& op) {
  model::MicrobatchState& mb = mbs_[op.microbatch];
  before_compute(op);
  const double t0 = now();
  model_.set_weight_grads_deferrable(grads_deferrable_[static_cast<size_t>(op.id)] != 0);
  for (int l = op.layers.end - 1; l >= op.layers.begin; --l) model_.backward_layer(l, mb);
  model_.synchronize();
  const double t1 = slowed(t0, now());
  result_.backward_seconds += t1 - t0;
  add_compute_event(op, t0, t1);
  after_compute(op);
}

// The gradients of the last step are cleared before this one accumulates (the program's first
// compute op): counted with the optimizer, as PyTorch's optimizer.zero_grad() is.
void Executor::run_zero_grad(const Op& op) {
  const double t0 = now();
  shards_.zero_grads();
  model_.synchronize();
  const double t1 = slowed(t0, now());
  result_.optimizer_seconds += t1 - t0;
  add_compute_event(op, t0, t1);
}

void Executor::run_optimizer(const Op& op) {
  if (options_.device_optimizer != nullptr) return run_device_optimizer(op);
  if (options_.after_meeting) options_.after_meeting();
  // The shard's parameters and reduced gradients, wherever the stage keeps them (shards.h), on
  // the host: a device model copies them across around the update (model.h).
  double t0 = now();
  model_.pull_grads(shards_.shard());
  std::span<float> params = shards_.params();
  std::span<const float> grads = shards_.grads();
  if (options_.before_optimizer) {
    const double h0 = now();
    options_.before_optimizer(op, params, grads);
    t0 += now() - h0;  // the dump's file writes are not optimizer time
  }
  optimizer_.step(params, grads);
  model_.push_params(shards_.shard());
  const double t1 = slowed(t0, now());
  result_.optimizer_seconds += t1 - t0;
  add_compute_event(op, t0, t1);
}

// The update on the compute buffers, the state on the device: no host copy in the step. A dump
// (before_optimizer) still sees host tensors: the shard is copied across for it first.
void Executor::run_device_optimizer(const Op& op) {
  double t0 = now();
  if (options_.before_optimizer) {
    const double h0 = now();
    const auto n = static_cast<size_t>(shards_.shard().numel());
    std::vector<float> params(n), grads(n);
    model_.compute_to_host(params, shards_.compute_params());
    model_.compute_to_host(grads, shards_.compute_grads());
    options_.before_optimizer(op, params, grads);
    t0 += now() - h0;
  }
  optimizer_.count_external_step();
  options_.device_optimizer->step(optimizer_, shards_.compute_params(), shards_.compute_grads());
  model_.synchronize();
  const double t1 = slowed(t0, now());
  result_.optimizer_seconds += t1 - t0;
  add_compute_event(op, t0, t1);
}

void Executor::issue_all_reduce(const Op& op) {
  if (is_tp(op)) return run_tp_collective(op);
  if (skipped(op)) return;
  comm::Communicator& c = comm_of(op);
  record_issue(op, c, c.all_reduce(grad_range(op), collective_options(op)));
}

// The injected skip: nothing is issued, so nothing is waited for (issued_index_ stays -1).
bool Executor::skipped(const Op&) const { return step_ == options_.faults.skip_collectives_step; }

comm::CollectiveOptions Executor::collective_options(const Op& op) const {
  comm::CollectiveOptions o;
  o.timeout = options_.comm_timeout;
  o.tag = "s" + std::to_string(step_) + "/" + op.tag;
  // A compute-stream collective is waited for as soon as it is issued (record_issue).
  o.caller_waits = op.is_collective() && op.stream != Stream::kComm;
  return o;
}

void Executor::record_issue(const Op& op, comm::Communicator& c, std::shared_ptr<comm::Work> work) {
  issued_index_[op.id] = static_cast<int>(issued_.size());
  issued_.push_back(Issued{op.id, std::move(work), &c, now(), -1});
  const bool compute_stream = !op.is_p2p() && op.stream != Stream::kComm;
  // Issuing held the compute stream too (its buffer, the call, waking the communicator's thread,
  // which on shared cores may take this one's core): exposed communication, as its waits are. Booked
  // as idle, it was most of ZeRO-3's idle time: held2 on 2 workers, 104 all-gather calls a step at
  // about 42 us and 16 reduce-scatter calls at about 230 us, 8 of its 9-13 ms. A compute-stream
  // collective counts it in its wait (below).
  if (!compute_stream && op.id == handler_op_) result_.exposed_comm_seconds += now() - handler_started_;
  if (op.is_p2p()) {
    // Its own queue (one communicator per direction and peer): waited for by its consumer.
  } else if (op.stream == Stream::kComm) {
    last_comm_stream_op_ = op.id;
  } else {
    // Compute-stream collectives are synchronous with the layer: the compute stream waited for
    // this one since its handler started, the issue call included, in which it ran where the
    // communicator's thread was idle (caller_waits). Timed from the wait alone, a TP all-reduce
    // that ran inline was booked as idle: held2's TP 4 on 4 workers reported 0 ms of exposed
    // communication and 86-93 ms of idle a step.
    wait_work(op.id, handler_started_);
  }
}

// Collective intervals are the Work's own stamps: when the communication thread started and
// ended the op, which the main thread cannot see (c10d's WorkInfo). An op that never started
// keeps the main thread's view (issued .. observed done).
void Executor::collect_comm_events() {
  for (const Issued& i : issued_) {
    result_.comm_seconds += i.work->seconds();
    const Op& op = program_.ops[i.op_id];
    OpEvent e;
    e.rank = program_.rank;
    e.step = step_;
    e.op_id = op.id;
    e.stream = std::string(strategy::to_string(op.stream));
    e.op = std::string(strategy::to_string(op.kind));
    e.tag = op.tag;
    e.group = program_.group_of(op).name;
    e.bytes = op.bytes;
    e.start_seconds = i.work->started_at().value_or(i.issued_seconds);
    e.end_seconds = i.work->finished_at().value_or(i.observed_done_seconds);
    result_.events.push_back(std::move(e));
  }
}

}  // namespace parlab::train
