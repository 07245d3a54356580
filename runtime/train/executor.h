#pragma once
// The runtime executor: one rank's StepProgram (strategy/step_program.h), run for real.
//
//   compute stream  on the calling (main) thread, in program order:
//                     forward   model.forward_layer(l, mb)  for l in op.layers, ascending
//                     backward  model.backward_layer(l, mb) for l in op.layers, descending
//                     optimizer optimizer.step over [op.flat_begin, op.flat_end)
//   comm stream     issued asynchronously on the group's Communicator, whose single thread runs
//                   ops in issue order; issuing never blocks the main thread, so a DDP bucket's
//                   all-reduce of grads[flat_begin, flat_end) runs while the backward pass goes on
//                   to earlier layers, exactly where the program placed it.
//
// Dependencies: before an op starts, the main thread waits for the Work of every comm op in its
// `deps` (the optimizer depends on every bucket). That wait is the step's exposed communication.
// Comm-stream order is the communicator's issue order; when two consecutive comm-stream ops use
// different communicators the second waits for the first (the stream is one queue).
// At the end of run() every issued op has completed on this rank.
//
// Tensor parallelism (executor_tp_pp.cpp): a TP-group collective sits on the compute stream
// right after the layer's forward or backward, which left a partial sum in the layer's output
// (activation(l+1)) or input gradient (dactivation(l)); the handler reduces it in place and
// the model adds the replicated terms (lab_mlp.h, tp_finish_*). All-reduce: every row. With
// sequence parallelism the reduce-scatter hands each rank its rows (the batch split t ways),
// the model finishes those, and the all-gather that follows rebuilds every row.
//
// Pipeline parallelism: a send copies the boundary tensor the previous compute op produced
// (activation(b) forward, dactivation(a) backward) and issues it on the communicator that
// carries only this rank's sends to that peer; a recv writes into the tensor the next compute
// op reads, on the communicator that carries only this rank's receives from that peer. Two
// communicators per neighbour pair because a Gloo send completes only when the peer receives
// and a communicator runs one op at a time: a send waiting for its receiver must never hold up
// a receive queued behind it. Sends and recvs are not part of the comm-stream queue: the
// compute op that needs a recv waits for it (its deps), and the step ends when all sends are
// delivered.
//
// Boundary tensors, for both, are the model's compute memory (Model::compute_boundary): on a GPU
// the TP group's NCCL communicator reduces them and the pipeline's NCCL pairs carry them device
// to device; a send's copy is a compute buffer (Model::compute_copy). A microbatch is handed
// back to the model (Model::release_microbatch) after the last op that reads it.
//
// Ops are dispatched through a table keyed by OpKind. What the runtime cannot execute yet
// (the tied-embedding all-reduce, model chunks it does not hold) is refused
// when the Executor is built, with an UnsupportedOp naming the op, so a plan fails before step 0
// rather than mid-step. Adding a strategy means adding handlers (and their reasons).
//
// Device: the model's compute buffers (model.h) are what layers and collectives use; the optimizer
// reads and updates the host buffers, so run_optimizer pulls the shard's gradients before it and
// pushes the updated parameters after it (no-ops for the host LabMlp). With a device optimizer
// (ExecutorOptions::device_optimizer, device_optimizer.h) it updates the shard's compute buffers
// in place instead: nothing crosses to the host in a step.
//
// Gradient buffer: run() zeroes it, backward ops accumulate into it, bucket all-reduces SUM it in
// place (the loss scale 1/global_batch makes the sum the gradient of the global mean loss).
//
// ZeRO (shards.h says what a rank keeps; executor_zero.cpp has the handlers). Every buffer below
// is made in the model's compute memory (Model::make_compute_buffer: device memory on a GPU) and
// the stage-2/3 accumulation into the shard is Model::compute_accumulate, so the same handlers
// run on either device; on a device, stage 2/3 needs the device optimizer (the shard has no host
// copy to update).
//   reduce-scatter  stage 1: the bucket of the model's gradients, in place (the rank's chunk
//                   lands where it was). Stage 2/3: the bucket buffer the backward wrote; its
//                   reduced chunk is added to the gradient shard and the buffer freed as soon as
//                   the main thread sees the op complete (polled after every compute op, and in
//                   any wait for it). Bucket buffers are made (zeroed) and bound to the model
//                   right before the first backward op that writes into them. Zeroing a bucket
//                   and adding its chunk into the shard count with the backward (as the cost
//                   model prices them); waiting for a ring slot's reduce-scatter is exposed
//                   communication.
//   all-gather      stage 1/2: a bucket of the updated parameters, in place in the model's copy.
//                   Stage 3: a layer, from the shards into a buffer made when the gather is
//                   issued; the compute op that depends on it binds it, runs, then unbinds and
//                   frees it: a layer's parameters exist only between its gather and its use.
//   broadcast       the parameters [flat_begin, flat_end) from the group's first rank (the
//                   program has no root field; the simulator's chain starts there too).
// A microbatch's activations are released after its last backward op.
//
// Collective tags carry the step: step 5's bucket 3 is issued as "s5/grad.bucket3", so a flight
// recorder (and the hang analyzer reading it) says which step's collective a rank was in, and
// ranks that disagree on it never pair up (the Gloo backend derives its slot from the tag).
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/model/model.h"
#include "runtime/model/memory_account.h"
#include "runtime/train/device_optimizer.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/shards.h"
#include "runtime/train/telemetry.h"
#include "strategy/step_program.h"

namespace parlab::train {

// The program holds an op this runtime cannot execute (yet). The message names the op as
// strategy::describe() does and says what is missing.
class UnsupportedOp : public RuntimeError {
 public:
  using RuntimeError::RuntimeError;
};

// Faults injected into one rank's execution for tests and lessons (launch/faults.h parses them
// from --fault). The defaults inject nothing.
struct InjectedFaults {
  // skip-allreduce: at this step the rank runs every compute op but issues none of the step's
  // collectives (the optimizer applies its local gradients) and carries on with the next step.
  int64_t skip_collectives_step = -1;
  // skip-send: at this step the rank issues none of its pipeline sends (it computes on); the
  // stage waiting for them times out, and the hang analysis names this rank.
  int64_t skip_send_step = -1;
  // slow: from `slow_from_step` on, every compute op takes `compute_slowdown` times its measured
  // time (the rank sleeps the difference inside the op, so the op's timing shows it).
  double compute_slowdown = 1;
  int64_t slow_from_step = 0;
};

struct ExecutorOptions {
  // Per-op timeout of every collective (CollectiveTimeout past it).
  std::chrono::milliseconds comm_timeout = comm::kDefaultTimeout;
  InjectedFaults faults;
  // Called right before an optimizer op updates [op.flat_begin, op.flat_end), with the weights it
  // is about to change and the gradients it will apply (after accumulation and the DP reduction).
  // `--dump-step` writes them.
  std::function<void(const strategy::Op& op, std::span<const float> params, std::span<const float> grads)>
      before_optimizer;
  // Where the executor's temporary buffers (gathered layers, gradient buckets) are charged; null:
  // uncounted. Microbatch states are charged by whoever builds them.
  model::MemoryAccount* account = nullptr;
  // Pipeline point-to-point paths, by the peer's world rank: the two-member communicator over
  // which this rank only sends to the peer, and the one over which it only receives from it.
  std::map<int, comm::Communicator*> send_comms, recv_comms;
  // The optimizer's device twin for a device model (borrowed): the update runs on the compute
  // buffers, the host Optimizer only counts the step. Null: update on the host.
  DeviceOptimizer* device_optimizer = nullptr;
  // Called on the compute thread where the step's data-parallel meeting has just released every
  // rank at once: right before each host update (DDP's all-reduce ends there) and after the step's
  // last collective (ZeRO-1/2's all-gather). The trainer sends the thread to its core there, where
  // the ranks outnumber the cores (core_home.h).
  std::function<void()> after_meeting;
};

// What one run() measured (the trainer adds data loading and idle time).
struct ExecResult {
  double forward_seconds = 0;
  double backward_seconds = 0;
  double optimizer_seconds = 0;
  double exposed_comm_seconds = 0;
  double comm_seconds = 0;      // sum of the collectives' own durations
  std::vector<OpEvent> events;  // every op, compute and comm, in no particular order
};

// ZeRO-2/3 on a device model keep the shards in device memory, so the update must run there: throws
// ConfigError unless the model computes on the host or a device optimizer runs the update. The
// trainer asks before any group meets (every rank refuses at once, none is left connecting to a
// peer that already gave up); the executor asks again of what it was given.
void check_update_placement(int zero, const model::Model& compute, bool device_optimizer,
                            std::string_view optimizer_kind);

class Executor {
 public:
  // `comms[g]` is the communicator of program.groups[g] (its members, in group-rank order); it
  // may be null for a group no supported op uses. The model must hold every layer the program
  // computes; the optimizer must cover exactly the optimizer op's range. Everything is borrowed.
  // Throws UnsupportedOp or ConfigError (mismatched communicators, ranges, microbatch counts).
  Executor(const strategy::StepProgram& program, model::Model& model, Optimizer& optimizer,
           std::vector<comm::Communicator*> comms, ExecutorOptions options = {});
  // The same for a sharded rank: `shards` (borrowed) is what it keeps between steps; the
  // optimizer covers shards.shard(). The constructor above makes its own shards for stages 0-1.
  Executor(const strategy::StepProgram& program, model::Model& model, Optimizer& optimizer, ModelShards& shards,
           std::vector<comm::Communicator*> comms, ExecutorOptions options = {});
  ~Executor();

  // Runs every op of the program once (one optimizer step). microbatches.size() must equal the
  // plan's microbatches; each state holds its inputs and labels. `step` only labels the events.
  // Rethrows the first communication failure (CollectiveTimeout, CollectiveError, ...).
  ExecResult run(std::span<model::MicrobatchState> microbatches, int64_t step);

  const strategy::StepProgram& program() const { return program_; }
  // The registered ring ZeRO-2/3's gradient buckets take slots of (0 without one).
  int64_t bucket_ring_bytes() const { return static_cast<int64_t>(bucket_ring_.data.size_bytes()); }
  void set_before_optimizer(decltype(ExecutorOptions::before_optimizer) hook) {
    options_.before_optimizer = std::move(hook);
  }

  // Empty when `op` can run here; otherwise why not ("ZeRO reduce-scatter is not implemented by
  // the runtime yet"). Used by the constructor; exposed so callers can list every refusal.
  static std::string unsupported_reason(const strategy::StepProgram& program, const strategy::Op& op);
  static std::string tp_unsupported_reason(const strategy::StepProgram& program, const strategy::Op& op);
  // Per op of `program`: 1 for a backward whose layers' weight gradients may wait for the same
  // layers' next backward (model.h, set_weight_grads_deferrable), because it comes before any op
  // that reads, moves or clears their gradients (the optimizer, the clear, a data-parallel
  // collective; a bucket's all-reduce or reduce-scatter reads only its range, which `layout`
  // places). DDP and ZeRO-1 reduce after a step's last microbatch, so every microbatch but the
  // last may defer, however the buckets cut the layers; ZeRO-2/3 reduce-scatter every
  // microbatch's buckets, so nothing defers there.
  static std::vector<char> deferrable_backwards(const strategy::StepProgram& program, const model::ParamLayout& layout);

 private:
  using Handler = void (Executor::*)(const strategy::Op&);
  static Handler handler_for(strategy::OpKind kind);

  void run_forward(const strategy::Op& op);
  void run_backward(const strategy::Op& op);
  void run_optimizer(const strategy::Op& op);
  void run_zero_grad(const strategy::Op& op);
  void run_device_optimizer(const strategy::Op& op);
  void issue_all_reduce(const strategy::Op& op);
  void issue_reduce_scatter(const strategy::Op& op);
  void issue_all_gather(const strategy::Op& op);
  void issue_broadcast(const strategy::Op& op);
  // Tensor and pipeline parallelism (executor_tp_pp.cpp).
  void issue_send(const strategy::Op& op);
  void issue_recv(const strategy::Op& op);
  void run_tp_collective(const strategy::Op& op);
  bool is_tp(const strategy::Op& op) const;
  bool is_dp_state_collective(const strategy::Op& op) const;
  void plan_p2p();
  comm::Communicator& p2p_comm(const strategy::Op& op) const;
  // The boundary tensor a send or recv moves: its layer index and direction.
  std::span<float> boundary_of(const strategy::Op& op, int layer);

  // The program and the rank's state agree (one check per concern), then the step's buffers.
  void check_and_plan();
  void check_runnable(const strategy::Op& op) const;
  void check_gradient_clear(const strategy::Op& op, model::FlatRange grads, int& clears) const;
  void check_layer_compute(const strategy::Op& op) const;
  void check_optimizer_range(const strategy::Op& op, model::FlatRange owned) const;
  void check_collective(const strategy::Op& op, model::FlatRange owned) const;
  void check_shards() const;
  // ZeRO bookkeeping (executor_zero.cpp).
  void plan_zero_buffers();
  void unbind_all();
  void before_compute(const strategy::Op& op);
  void after_compute(const strategy::Op& op);
  // Frees the microbatch's activations when `op` is the last op that reads them.
  void release_if_last(const strategy::Op& op);
  void retire_reduce_scatter(int op_id);
  void poll_reduce_scatters();
  // A step buffer owned by `op_id`: kZero when the op accumulates into it, kNone when it is
  // overwritten whole (a gather's output, a send's copy).
  enum class Fill { kNone, kZero };
  std::span<float> make_buffer(int op_id, int64_t elements, Fill fill);
  // Keeps the buffer for the next of its size in this step (make_buffer); release_buffers()
  // returns every buffer at the step's end.
  void free_buffer(int op_id);
  void release_buffers();
  // A stage-2/3 reduce-scatter's zeroed bucket: a ring slot where one can be had, else make_buffer.
  std::span<float> make_bucket(int rs, int64_t elements);
  // The bucket of reduce-scatter `rs`, empty when it has none.
  std::span<float> bucket_of(int rs);
  void plan_bucket_ring();
  std::vector<int64_t> counts_of(const strategy::Op& op) const;
  void record_issue(const strategy::Op& op, comm::Communicator& c, std::shared_ptr<comm::Work> work);
  comm::CollectiveOptions collective_options(const strategy::Op& op) const;
  bool skipped(const strategy::Op& op) const;

  void wait_for_deps(const strategy::Op& op);
  // Waits for op `op_id`'s Work and books the wait as exposed communication: from `since` (the
  // handler's start for a collective the compute stream runs itself) or from now.
  void wait_work(int op_id, double since = -1);
  void drain();
  void collect_comm_events();
  void add_compute_event(const strategy::Op& op, double start, double end);
  // Stage 2/3 bucket work for reduce-scatter `rs` (zeroing its bucket, adding its reduced chunk
  // into the shard): counted with the backward, recorded as a "bucket-work" event.
  void add_bucket_work(const strategy::Op& rs, double start, double end);
  // The slow fault: sleeps (slowdown - 1) x the op's time so far; returns the op's new end.
  double slowed(double start, double end) const;
  comm::Communicator& comm_of(const strategy::Op& op) const;
  std::span<float> grad_range(const strategy::Op& op);

  struct Issued {
    int op_id = -1;
    std::shared_ptr<comm::Work> work;
    comm::Communicator* comm = nullptr;
    double issued_seconds = 0;
    double observed_done_seconds = -1;  // when the main thread saw it complete
  };

  const strategy::StepProgram& program_;
  model::Model& model_;
  Optimizer& optimizer_;
  std::unique_ptr<ModelShards> own_shards_;  // stages 0-1 when the caller gave none
  ModelShards& shards_;
  std::vector<comm::Communicator*> comms_;
  ExecutorOptions options_;
  int64_t flat_elements_ = 0;  // the local flat buffer the shards cut (strategy::local_param_layout)

  // From the program, once: per compute op, the ZeRO-3 gathers it consumes and (backward) the
  // stage-2/3 reduce-scatters whose buckets it writes; per microbatch, its last compute op.
  std::vector<std::vector<int>> gathers_of_, buckets_of_;
  std::vector<int> last_op_of_mb_;
  // Per op: a backward whose weight gradients may wait for the next microbatch's backward of the
  // same layers (model.h, set_weight_grads_deferrable): nothing reads or moves gradients between.
  std::vector<char> grads_deferrable_;
  // Per send/recv op: the boundary index it moves (activation(l) or dactivation(l)).
  std::vector<int> p2p_layer_;

  // Per run().
  std::span<model::MicrobatchState> mbs_;
  int64_t step_ = 0;
  std::vector<int> issued_index_;  // op id -> index into issued_, -1 if not a comm op
  std::vector<Issued> issued_;
  int last_comm_stream_op_ = -1;
  // When the handler of the op being run started, and that op: a compute-stream collective blocks
  // the compute stream from here (it may run inline, on this thread, inside its issue call) to its
  // end; any other op issued by its own handler, to its issue's end (record_issue).
  double handler_started_ = 0;
  int handler_op_ = -1;
  ExecResult result_;
  std::map<int, std::unique_ptr<model::ComputeBuffer>> buffers_;                 // by the op id that owns them
  std::multimap<int64_t, std::unique_ptr<model::ComputeBuffer>> spare_buffers_;  // freed this step, by size
  int64_t in_use_elements_ = 0, spare_elements_ = 0, peak_in_use_elements_ = 0;  // of the step's buffers
  std::vector<int> pending_reduce_scatters_;                                     // stage 2/3: issued, not yet retired
  // Stage 2/3 on the host: the gradient buckets in a ring of kBucketSlots slots of the DP group's
  // registered memory, so a shared-memory reduce-scatter sums the peers' buckets where they lie
  // (executor_zero.cpp). A bucket takes the next slot, first retiring the reduce-scatter that
  // held it; a slot whose bucket is not yet issued is never taken (that bucket is made in
  // ordinary memory instead): the same choice on every rank, since it follows program order.
  static constexpr int kBucketSlots = 3;
  comm::RegisteredBuffer bucket_ring_;
  int64_t bucket_slot_elements_ = 0;
  std::vector<int> slot_owner_;  // slot -> the reduce-scatter whose bucket it holds, -1: free
  std::map<int, int> slot_of_;   // reduce-scatter op -> its slot
  int next_slot_ = 0;
  std::map<int64_t, int> grad_binding_;  // bucket flat begin -> the reduce-scatter whose buffer is bound
};

}  // namespace parlab::train
