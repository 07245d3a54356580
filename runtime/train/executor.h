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
// Ops are dispatched through a table keyed by OpKind. What the runtime cannot execute yet (ZeRO
// reduce-scatter/all-gather, tensor-parallel collectives, pipeline send/recv, model chunks it does
// not hold) is refused when the Executor is built, with an UnsupportedOp naming the op, so a
// plan fails before step 0 rather than mid-step. Adding a strategy means adding handlers.
//
// Gradient buffer: run() zeroes it, backward ops accumulate into it, bucket all-reduces SUM it in
// place (the loss scale 1/global_batch makes the sum the gradient of the global mean loss).
//
// Collective tags carry the step: step 5's bucket 3 is issued as "s5/grad.bucket3", so a flight
// recorder (and the hang analyzer reading it) says which step's collective a rank was in, and
// ranks that disagree on it never pair up (the Gloo backend derives its slot from the tag).
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/optimizer.h"
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
  std::function<void(const strategy::Op& op, std::span<const float> params,
                     std::span<const float> grads)>
      before_optimizer;
};

// What one run() measured (the trainer adds data loading and idle time).
struct ExecResult {
  double forward_seconds = 0;
  double backward_seconds = 0;
  double optimizer_seconds = 0;
  double exposed_comm_seconds = 0;
  double comm_seconds = 0;  // sum of the collectives' own durations
  std::vector<OpEvent> events;  // every op, compute and comm, in no particular order
};

class Executor {
 public:
  // `comms[g]` is the communicator of program.groups[g] (its members, in group-rank order); it
  // may be null for a group no supported op uses. The model must hold every layer the program
  // computes; the optimizer must cover exactly the optimizer op's range. Everything is borrowed.
  // Throws UnsupportedOp or ConfigError (mismatched communicators, ranges, microbatch counts).
  Executor(const strategy::StepProgram& program, model::LabMlp& model, Optimizer& optimizer,
           std::vector<comm::Communicator*> comms, ExecutorOptions options = {});

  // Runs every op of the program once (one optimizer step). microbatches.size() must equal the
  // plan's microbatches; each state holds its inputs and labels. `step` only labels the events.
  // Rethrows the first communication failure (CollectiveTimeout, CollectiveError, ...).
  ExecResult run(std::span<model::MicrobatchState> microbatches, int64_t step);

  const strategy::StepProgram& program() const { return program_; }
  void set_before_optimizer(decltype(ExecutorOptions::before_optimizer) hook) {
    options_.before_optimizer = std::move(hook);
  }

  // Empty when `op` can run here; otherwise why not ("ZeRO reduce-scatter is not implemented by
  // the runtime yet"). Used by the constructor; exposed so callers can list every refusal.
  static std::string unsupported_reason(const strategy::StepProgram& program, const strategy::Op& op);

 private:
  using Handler = void (Executor::*)(const strategy::Op&);
  static Handler handler_for(strategy::OpKind kind);

  void run_forward(const strategy::Op& op);
  void run_backward(const strategy::Op& op);
  void run_optimizer(const strategy::Op& op);
  void issue_all_reduce(const strategy::Op& op);

  void wait_for_deps(const strategy::Op& op);
  void wait_work(int op_id);
  void drain();
  void collect_comm_events();
  void add_compute_event(const strategy::Op& op, double start, double end);
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
  model::LabMlp& model_;
  Optimizer& optimizer_;
  std::vector<comm::Communicator*> comms_;
  ExecutorOptions options_;

  // Per run().
  std::span<model::MicrobatchState> mbs_;
  int64_t step_ = 0;
  std::vector<int> issued_index_;  // op id -> index into issued_, -1 if not a comm op
  std::vector<Issued> issued_;
  int last_comm_stream_op_ = -1;
  ExecResult result_;
};

}  // namespace parlab::train
