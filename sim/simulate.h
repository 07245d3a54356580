#pragma once
// The simulator's front door: a plan (or hand-made step programs, or one collective) run on a
// SimGrid platform built from a ClusterSpec. Each call simulates in a child process of its own
// (sim/isolate.h), so it can be called any number of times from one program.
//
//   SimResult r = simulate_plan(model, plan, cluster, {.steps = 3});
//   r.step_seconds, r.ranks[i].compute_seconds / exposed_comm_seconds / bubble_seconds,
//   r.collectives, r.hang (who waits where when a fault stopped a rank)
//
// Long simulations (a 1024-GPU plan takes seconds, 4096 ranks tens of seconds) report progress
// and can be cancelled, e.g. from a desktop program that simulates on a worker thread:
//
//   std::atomic<bool> cancel{false};              // the UI thread sets it (a Cancel button)
//   SimOptions o;
//   o.on_progress = [&](double done, std::string_view what) {
//     emit progressed(done, QString::fromUtf8(what.data(), what.size()));  // e.g. a Qt signal
//   };
//   o.cancel = &cancel;
//   try { SimResult r = simulate_plan(model, plan, cluster, o); }
//   catch (const SimulationCancelled&) { /* nothing to clean up */ }
//
// The keys are the analytic model's (strategy/cost_model.h); sim/result.h says how each is
// measured.
#include <atomic>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sim/faults.h"
#include "sim/isolate.h"
#include "sim/result.h"
#include "sim/schedule.h"
#include "strategy/cluster_spec.h"
#include "strategy/cost_model.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"
#include "strategy/step_program.h"

namespace parlab::sim {

struct SimOptions {
  int warmup_steps = 1;  // simulated first and left out of the averages
  int steps = 1;         // measured steps
  std::vector<Fault> faults;
  // Coalesce multi-call collectives and merge identical algorithm steps (ScheduleOptions): the
  // same times on idle links with far fewer simulated messages; false simulates every call and
  // every step (slower; finer under contention).
  bool coalesce_calls = true;
  bool merge_steps = true;
  AlgorithmChoice algorithm = AlgorithmChoice::kAuto;
  // Time collective steps that have their links to themselves in closed form, not as one
  // SimGrid flow per message (sim/executor.h): the same times, far less work. false: every
  // message is a flow (for checking the closed form, or measuring SimGrid itself).
  bool closed_form = true;
  // Simulate position 0 of each TP group only, where the plan's TP positions are symmetric
  // (sim/symmetry.h): the same result, in 1/tp of the actors. false: every rank (for checking it).
  bool tp_symmetry = true;
  bool timeline = false;          // fill SimResult::timeline (for --trace)
  std::vector<int> detail_ranks;  // ranks whose collectives are listed; empty: one per stage

  // Progress: called on the calling thread (the simulation itself runs in a child process),
  // about every 0.2 s of wall time while the simulation runs, never after simulate_* returned.
  // fraction_done in [0, 1] (ops executed over ops to execute, all ranks, all steps; the last
  // call may be below 1); `what` is one human line ("building 4096 step programs", "0.8 s
  // simulated, 123 of 456 ops, ..."), valid during the call only. Keep it short: the
  // simulation does not wait for it, but its next report does.
  std::function<void(double fraction_done, std::string_view what)> on_progress;
  // Cancellation: when *cancel becomes true (any thread), the simulation stops within ~50 ms
  // (while the step programs are being built -- a second or two for 4096 ranks -- once they
  // are) and simulate_* throws SimulationCancelled (sim/isolate.h). Must outlive the call.
  // simulate_* may run on a worker thread: the child it forks writes only to its pipes (no
  // stdio stream another thread could have locked) and leaves with _exit.
  const std::atomic<bool>* cancel = nullptr;
};

// Builds every rank's program (strategy::build_step) and simulates them. `plan` resolved and
// validated; `cluster` is resized to the plan's world (strategy::with_world).
SimResult simulate_plan(const strategy::ModelSpec& model, const strategy::Plan& plan,
                        const strategy::ClusterSpec& cluster, const SimOptions& options = {});

// Several plans (the planner's candidates), each simulated in its own process, up to `parallel`
// at once (0: one per core): the results of simulate_plan, in the order of `plans`. Progress
// reports the mean fraction over the plans; cancellation stops all of them.
std::vector<SimResult> simulate_plans(const strategy::ModelSpec& model, const std::vector<strategy::Plan>& plans,
                                      const strategy::ClusterSpec& cluster, const SimOptions& options = {},
                                      int parallel = 0);

// Simulates the given programs (one per rank of the world, programs[i].rank == i not required
// but every group member must be present). For tests and what-ifs on hand-edited programs.
SimResult simulate_programs(const std::vector<strategy::StepProgram>& programs, const strategy::ModelSpec& model,
                            const strategy::ClusterSpec& cluster, const SimOptions& options = {});

// One collective on `ranks` devices, every rank arriving at t = 0: the simulated twin of an
// nccl-tests line, beside the analytic collective_time(). Default: every step simulated, every
// message a SimGrid flow (closed_form: alone on its links, the collective is timed in closed form).
struct CollectiveResult {
  strategy::CollectiveOp op = strategy::CollectiveOp::kAllReduce;
  double bytes = 0;
  int ranks = 0;
  std::string algorithm;
  std::string
      protocol;  // NCCL's protocol of a single-node NVLink ring ("measured": the preset's curve); empty otherwise
  int channels = 1;
  double seconds = 0;
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
  int64_t messages = 0;
  int64_t flows = 0;  // of the messages, those SimGrid carried as flows
  strategy::CollectiveEstimate analytic;
};
CollectiveResult simulate_collective(strategy::CollectiveOp op, double bytes, int ranks,
                                     const strategy::ClusterSpec& cluster, const ScheduleOptions& schedule = {},
                                     const std::vector<Fault>& faults = {}, bool closed_form = false);
nlohmann::json to_json(const CollectiveResult& result);

// The per-rank programs of a plan (what simulate_plan runs).
std::vector<strategy::StepProgram> build_programs(const strategy::ModelSpec& model, const strategy::Plan& plan);

}  // namespace parlab::sim
