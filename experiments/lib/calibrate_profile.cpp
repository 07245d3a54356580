#include "experiments/lib/calibrate_profile.h"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <numeric>
#include <optional>
#include <vector>

#include "runtime/model/lab_mlp.h"
#include "runtime/train/core_home.h"
#include "runtime/train/data.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/trainer.h"
#include "strategy/cost_model.h"
#include "base/errors.h"
#include "strategy/step_program.h"
#include "base/stats.h"

namespace parlab::experiments {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
// This process's CPU time (every thread of it, user and system), seconds.
double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

constexpr int kMaxProcesses = 64;
constexpr int64_t kMaxMicrobatchesPerStep = 8;

// What the profiling processes share: the barrier every microbatch and update starts at, the
// barriers of each tensor-parallel group (`tp` consecutive processes), which its members meet at
// after every block's forward and backward as the group's all-reduces make them, the repeat count
// process 0 chooses after its warm-up, and each process's medians.
struct Shared {
  pthread_barrier_t barrier;
  pthread_barrier_t tp_barrier[kMaxProcesses];
  int tp_groups = 0;
  int64_t tp_meetings = 0, microbatches_run = 0, bf16_copies = 0;  // process 0's, over the whole profile
  int repeats = 0;
  int64_t parameters = 0;
  double fwdbwd[kMaxProcesses], fwdbwd_spread[kMaxProcesses], data[kMaxProcesses], update[kMaxProcesses],
      update_spread[kMaxProcesses], clear[kMaxProcesses], first_touch[kMaxProcesses];
  // The same steps timed to the barrier after them (the last process's end): per microbatch, and
  // the update's.
  double microbatch_span[kMaxProcesses], update_span[kMaxProcesses];
  // The CPU time the same work took (WorkloadProfile::microbatch_cpu_seconds).
  double microbatch_cpu[kMaxProcesses], update_cpu[kMaxProcesses];
  char error[kMaxProcesses][160];
};

// ZeRO-2/3's buckets as a step makes them (train/executor_zero.cpp): a few of the default bucket
// size at once, zeroed as they are made, then freed. New memory each time: page faults, the
// kernel zeroing each page, the allocator's mappings.
constexpr int kTouchBuffers = 4;
constexpr size_t kTouchBytes = size_t(25) << 20;
double first_touch_seconds() {
  std::vector<std::vector<float>> buffers;
  const auto t0 = Clock::now();
  for (int k = 0; k < kTouchBuffers; ++k) buffers.emplace_back(kTouchBytes / sizeof(float), 0.0f);
  const double seconds = since(t0);
  buffers.clear();
  return seconds;
}

// What one profiling process runs: a rank's shape, its microbatch and a step's microbatches, its
// precision; `tp` > 1: its tensor-parallel group meets after every block's forward and backward;
// `bf16_per_pass`: the bf16 weight copies are made again for every forward and every backward, as
// a ZeRO-3 rank under mixed precision makes them from each layer's gather (train/executor_zero.cpp)
// where any other rank makes them once a step.
struct LoopShape {
  model::MlpShape shape;
  int64_t b = 0;
  int per_step = 1;
  strategy::Precision precision = strategy::Precision::kFp32;
  int tp = 1;
  bool bf16_per_pass = false;
  int weight_grad_group = 1;  // strategy::weight_grad_group: a step's microbatches defer as training's do
  int in_flight = 1;          // microbatches_in_flight
};

// One microbatch's forward or backward; with `group`, its tensor-parallel group meets there after
// every block, as the group's all-reduces make it (`meetings` counts them).
void run_pass(model::LabMlp& net, model::MicrobatchState& mb, bool forward, pthread_barrier_t* group, int64_t* meetings,
              bool bf16_per_pass) {
  if (bf16_per_pass) net.drop_bf16_copies();
  if (group == nullptr) {
    if (forward)
      net.forward(mb);
    else
      net.backward(mb);
    return;
  }
  const int blocks = int(net.shape().blocks);
  const auto meet = [&] {
    pthread_barrier_wait(group);
    if (meetings) ++*meetings;
  };
  for (int k = 0; k <= blocks; ++k) {
    const int l = forward ? k : blocks - k;
    if (forward)
      net.forward_layer(l, mb);
    else
      net.backward_layer(l, mb);
    if (l < blocks) meet();
  }
}

// A step's passes in a pipeline stage's order: (forward?, microbatch), `in_flight` - 1 forwards
// ahead of the backwards (0: each forward right before its backward).
std::vector<std::pair<bool, int>> pass_order(int per_step, int in_flight) {
  std::vector<std::pair<bool, int>> order;
  const int ahead = std::clamp(in_flight, 1, per_step) - 1;
  for (int k = 0; k < ahead; ++k) order.emplace_back(true, k);
  for (int k = 0; k < per_step; ++k) {
    if (k + ahead < per_step) order.emplace_back(true, k + ahead);
    order.emplace_back(false, k);
  }
  return order;
}

// One process's timings, a value per timed step.
struct Series {
  std::vector<double> fwdbwd, fill, update, clear, touch, microbatch_span, update_span, microbatch_cpu, update_cpu;
};

// Their medians (and spreads) into the process's slots of the shared block.
void store_medians(const Series& x, Shared* s, int me) {
  const auto cs = parlab::spread_of(x.fwdbwd), us = parlab::spread_of(x.update);
  s->fwdbwd[me] = cs.median, s->fwdbwd_spread[me] = cs.relative();
  s->update[me] = us.median, s->update_spread[me] = us.relative();
  s->data[me] = parlab::median(x.fill), s->clear[me] = parlab::median(x.clear);
  s->first_touch[me] = double(kTouchBuffers * kTouchBytes) / parlab::median(x.touch);
  s->microbatch_span[me] = parlab::median(x.microbatch_span), s->update_span[me] = parlab::median(x.update_span);
  s->microbatch_cpu[me] = parlab::median(x.microbatch_cpu), s->update_cpu[me] = parlab::median(x.update_cpu);
}

// Step `step`'s `loop.per_step` microbatches (data and forward, and backward; in a pipeline stage's
// order; the gradients accumulate); `group`: the tensor-parallel group's barrier, or none; `count`:
// where process 0 counts its microbatches and meetings. Returns the data's and the passes' times
// per microbatch (a step's sum over its microbatches).
std::pair<double, double> run_step_passes(model::LabMlp& net, const train::SyntheticDataset& data,
                                          const LoopShape& loop, int step, pthread_barrier_t* group, Shared* count) {
  const int per_step = loop.per_step;
  const int64_t b = loop.b;
  std::vector<std::optional<model::MicrobatchState>> live(static_cast<size_t>(per_step));
  std::vector<int64_t> indices(static_cast<size_t>(b), 0);
  double d = 0, c = 0;
  for (const auto& [forward, k] : pass_order(per_step, loop.in_flight)) {
    std::optional<model::MicrobatchState>& mb = live[static_cast<size_t>(k)];
    if (forward) {
      std::iota(indices.begin(), indices.end(), int64_t((step * per_step + k) % 4) * b);
      mb.emplace(net.new_microbatch(b, b));
      const auto t0 = Clock::now();
      data.fill(indices, *mb);
      d += since(t0) / per_step;
    } else {
      net.set_weight_grads_deferrable(k + 1 < per_step);  // the executor's rule for DDP and ZeRO-1
    }
    const auto t0 = Clock::now();
    run_pass(net, *mb, forward, group, count ? &count->tp_meetings : nullptr, loop.bf16_per_pass);
    c += since(t0) / per_step;
    if (!forward) {
      mb.reset();
      if (count) ++count->microbatches_run;
    }
  }
  return {d, c};
}

// The profile's loop in one process, writing its medians to slot `me` of `s`; `together`: it is
// one of a lockstep group that meets at `s`'s barrier; `tp` > 1: its tensor-parallel group also
// meets after every block's forward and backward (the waits for the slowest member are then in
// the microbatch's time, as they are in a tensor-parallel step's).
void profile_loop(const LoopShape& loop, int repeats, Shared* s, int me, bool together) {
  const model::MlpShape& shape = loop.shape;
  const int64_t b = loop.b;
  const int per_step = loop.per_step, tp = together ? loop.tp : 1;
  const auto sync = [s, together] {
    if (together) pthread_barrier_wait(&s->barrier);
  };
  const bool tp_sync = together && tp > 1;
  model::LabMlp net(shape, 1, 0, shape.num_layers(), model::ModelStorage{.weight_grad_group = loop.weight_grad_group});
  if (loop.precision == strategy::Precision::kMixed) net.set_mixed_precision(true);
  net.set_bf16_copies_per_pass(loop.bf16_per_pass);
  train::SyntheticDataset data({.seed = uint64_t(1 + me),
                                .size = b * (4 * repeats * per_step + per_step),
                                .width = shape.hidden,
                                .classes = shape.classes});
  auto opt = train::make_optimizer(train::AdamWConfig{}, {0, int64_t(net.params().size())});
  Series x;
  // The trainer's order per step: the clear, the step's microbatches (run_step_passes), the
  // optimizer. Step 0 warms up (page faults, first-touch of the buffers).
  for (int i = 0; i <= repeats; ++i) {
    sync();
    const auto step_start = Clock::now();
    auto t0 = step_start;
    net.zero_grads();
    const double z = since(t0);
    double cpu0 = cpu_seconds();
    const auto [d, c] =
        run_step_passes(net, data, loop, i, tp_sync ? &s->tp_barrier[me / tp] : nullptr, me == 0 ? s : nullptr);
    if (me == 0) s->bf16_copies = net.bf16_copies_made();
    const double mb_cpu = (cpu_seconds() - cpu0) / per_step;
    sync();
    // The step's makespan: its microbatches ended on every process when the last one's did.
    const double span = (since(step_start) - z) / per_step;
    t0 = Clock::now();
    cpu0 = cpu_seconds();
    opt->step(net.params(), net.grads());
    const double u = since(t0), u_cpu = cpu_seconds() - cpu0;
    sync();
    const double u_span = since(t0);
    const double f = first_touch_seconds();
    if (i == 0) {
      // Small workloads repeat more (a second and a half of timed work, up to 4x the repeats), so
      // that neither a few preempted microbatches nor a slow half second of a shared machine
      // (seen: a 0.45 s profile 11% slower than the 1-worker steps measured seconds later) sets
      // the rates every prediction uses. Process 0 chooses for all: they meet at every barrier.
      // A step of several microbatches is several of them: at least 5 steps (a median of fewer
      // is one noisy stretch of a shared machine away from the truth), and as many microbatches
      // in all as `repeats` asked for.
      const int floor = std::max(std::min(5, repeats), (repeats + per_step - 1) / per_step);
      const int chosen = std::clamp(int(1.5 / (per_step * (c + d) + u + z)), floor, 4 * repeats);
      if (me == 0) s->repeats = chosen;
      sync();  // (one process: no barrier, and its own choice)
      repeats = s->repeats;
      continue;
    }
    x.fill.push_back(d), x.fwdbwd.push_back(c), x.update.push_back(u), x.clear.push_back(z), x.touch.push_back(f);
    x.microbatch_span.push_back(span), x.update_span.push_back(u_span);
    x.microbatch_cpu.push_back(mb_cpu), x.update_cpu.push_back(u_cpu);
  }
  store_medians(x, s, me);
  s->repeats = repeats;
  s->parameters = int64_t(net.params().size());
}

// Shared memory for `n` processes, with the barriers set up for them: one for all, one per group
// of `tp` (unmapped by the deleter).
std::unique_ptr<Shared, void (*)(Shared*)> make_shared_block(int n, int tp) {
  void* m = ::mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) throw RuntimeError(std::string("workload profile: mmap: ") + std::strerror(errno));
  auto* s = new (m) Shared{};
  pthread_barrierattr_t a;
  pthread_barrierattr_init(&a);
  pthread_barrierattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_barrier_init(&s->barrier, &a, unsigned(n));
  s->tp_groups = tp > 1 && n % tp == 0 ? n / tp : 0;
  for (int g = 0; g < s->tp_groups; ++g) pthread_barrier_init(&s->tp_barrier[g], &a, unsigned(tp));
  pthread_barrierattr_destroy(&a);
  return {s, [](Shared* p) {
            for (int g = 0; g < p->tp_groups; ++g) pthread_barrier_destroy(&p->tp_barrier[g]);
            pthread_barrier_destroy(&p->barrier);
            ::munmap(p, sizeof(Shared));
          }};
}

// Runs the loop in `n` forked processes and waits for all of them. A process that fails makes
// the others wait at a barrier forever, so the first failure kills the rest.
void run_forked(int n, const std::function<void(int)>& body, Shared* s) {
  std::vector<pid_t> pids;
  for (int i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      for (pid_t p : pids) ::waitpid(p, nullptr, 0);
      throw RuntimeError(std::string("workload profile: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      int code = 0;
      try {
        body(i);
      } catch (const std::exception& e) {
        std::snprintf(s->error[i], sizeof s->error[i], "%s", e.what());
        code = 1;
      }
      ::_exit(code);
    }
    pids.push_back(pid);
  }
  std::string failure;
  for (size_t left = pids.size(); left > 0; --left) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) break;
    if (failure.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      const int i = int(std::find(pids.begin(), pids.end(), pid) - pids.begin());
      failure = "process " + std::to_string(i) + " of " + std::to_string(n) + " failed" +
                (i < n && s->error[i][0] ? std::string(": ") + s->error[i] : std::string());
      for (pid_t p : pids)
        if (p != pid) ::kill(p, SIGKILL);
    }
  }
  if (!failure.empty()) throw RuntimeError("workload profile: " + failure);
}

double mean_of(const double* x, int n) { return std::accumulate(x, x + n, 0.0) / n; }

// How many processes each core ran, where the profile ran more than the host's cores (1 else).
double shared_cores(const strategy::ClusterSpec& cluster, const WorkloadProfile& p) {
  return cluster.shares_cores() && p.processes > cluster.cores_per_node ? double(p.processes) / cluster.cores_per_node
                                                                        : 1.0;
}

}  // namespace

bool bf16_copies_per_pass(const strategy::Plan& plan) {
  return plan.precision == strategy::Precision::kMixed && plan.zero == 3 && plan.dp > 1;
}

WorkloadProfile profile_workload(const strategy::ModelSpec& m, const strategy::Plan& plan, int processes, int repeats) {
  if (repeats < 1) throw ConfigError("repeats", std::to_string(repeats), "must be >= 1");
  if (processes < 1 || processes > kMaxProcesses)
    throw ConfigError("processes", std::to_string(processes), "must be 1.." + std::to_string(kMaxProcesses));
  if (m.kind != strategy::ModelKind::kMlp) throw ConfigError("model", m.name, "the workload profile runs the lab MLP");
  const int64_t b = plan.microbatch;
  if (b <= 0) throw ConfigError("microbatch", std::to_string(b), "must be positive");
  // One rank's shape: its tensor-parallel slice of every block's FFN, its pipeline stage's blocks.
  model::MlpShape shape = train::mlp_shape(m);
  if (plan.tp > 1) shape.ffn = std::max<int64_t>(1, shape.ffn / plan.tp);
  if (plan.pp > 1) shape.blocks = std::max<int64_t>(1, (shape.blocks + plan.pp - 1) / plan.pp);
  // A step's microbatches, back to back as the trainer runs them (at most 8, or one weight-gradient
  // group: the rate is reached).
  const int group = strategy::weight_grad_group(plan);
  const int per_step =
      static_cast<int>(std::clamp<int64_t>(plan.microbatches, 1, std::max<int64_t>(kMaxMicrobatchesPerStep, group)));
  // Tensor-parallel groups meet after every block (consecutive processes, as the plan's TP groups
  // are consecutive ranks), when the profile runs the plan's whole world.
  const int tp = plan.tp > 1 && processes % plan.tp == 0 ? plan.tp : 1;
  auto shared = make_shared_block(processes, tp);
  Shared* s = shared.get();
  const LoopShape loop{.shape = shape,
                       .b = b,
                       .per_step = per_step,
                       .precision = plan.precision,
                       .tp = tp,
                       .bf16_per_pass = bf16_copies_per_pass(plan),
                       .weight_grad_group = group,
                       .in_flight = microbatches_in_flight(plan, per_step)};
  if (processes == 1) {
    // World size 1 writes the same slots, without a barrier or a fork.
    profile_loop(loop, repeats, s, 0, false);
  } else {
    // Each process placed as the trainer places its rank (runtime/train/core_home.h): ranks that
    // meet inside the step stay on their core where they outnumber the cores evenly.
    const bool homes = train::core_homes_enabled();
    run_forked(
        processes,
        [&](int me) {
          if (homes) train::CoreHome::for_rank(plan, me, processes).settle();
          profile_loop(loop, repeats, s, me, true);
        },
        s);
  }
  WorkloadProfile p;
  p.processes = processes;
  p.tp_meetings_per_microbatch = s->microbatches_run > 0 ? double(s->tp_meetings) / double(s->microbatches_run) : 0;
  p.hidden = shape.hidden, p.ffn = shape.ffn, p.blocks = shape.blocks, p.classes = shape.classes;
  p.microbatch = b;
  p.parameters = s->parameters;
  p.repeats = s->repeats;
  p.microbatches_per_step = per_step;
  p.microbatches_in_flight = loop.in_flight;
  p.weight_grad_group = group;
  p.bf16_copies_per_pass = loop.bf16_per_pass;
  p.bf16_copies_per_microbatch = s->microbatches_run > 0 ? double(s->bf16_copies) / double(s->microbatches_run) : 0;
  p.fwdbwd_seconds = mean_of(s->fwdbwd, processes), p.fwdbwd_spread = mean_of(s->fwdbwd_spread, processes);
  p.optimizer_seconds = mean_of(s->update, processes), p.optimizer_spread = mean_of(s->update_spread, processes);
  p.data_seconds = mean_of(s->data, processes);
  p.clear_seconds = mean_of(s->clear, processes);
  p.first_touch_bytes_per_s = mean_of(s->first_touch, processes);
  p.microbatch_makespan_seconds = mean_of(s->microbatch_span, processes);
  p.optimizer_makespan_seconds = mean_of(s->update_span, processes);
  p.microbatch_cpu_seconds = mean_of(s->microbatch_cpu, processes);
  p.optimizer_cpu_seconds = mean_of(s->update_cpu, processes);
  return p;
}

int microbatches_in_flight(const strategy::Plan& plan, int per_step) {
  if (plan.pp <= 1) return 1;
  return std::clamp(plan.schedule == strategy::Schedule::kGPipe ? per_step : plan.pp, 1, std::max(per_step, 1));
}

WorkloadProfile profile_workload(const strategy::ModelSpec& m, int64_t b, int repeats, strategy::Precision precision) {
  strategy::Plan plan;
  plan.microbatch = b;
  plan.precision = precision;
  return profile_workload(m, plan, 1, repeats);
}

SharedCorePricing shared_core_pricing(const strategy::ClusterSpec& cluster, const strategy::Plan& plan,
                                      const WorkloadProfile& p) {
  if (!(shared_cores(cluster, p) > 1)) return SharedCorePricing::kOwnTimes;
  if (strategy::meets_once_a_step(plan) && p.microbatch_cpu_seconds > 0 && p.optimizer_cpu_seconds > 0)
    return SharedCorePricing::kCpuTime;
  if (p.microbatch_makespan_seconds > 0 && p.optimizer_makespan_seconds > 0) return SharedCorePricing::kMakespan;
  return SharedCorePricing::kOwnTimes;
}

strategy::ClusterSpec cluster_for_profile(const strategy::ClusterSpec& cluster, const strategy::ModelSpec& model,
                                          const strategy::Plan& plan, const WorkloadProfile& p) {
  if (!cluster.calibrated || cluster.name != "cpu-local" || p.microbatch_seconds() <= 0 || p.optimizer_seconds <= 0)
    return cluster;
  // The FLOPs of what was profiled: the rank's shape (a profile filled in by hand may leave it at
  // the model's), one microbatch through all its layers, as the step program counts them.
  strategy::ModelSpec ran = model;
  if (p.hidden > 0) ran.hidden = p.hidden, ran.ffn = p.ffn, ran.layers = p.blocks, ran.classes = p.classes;
  // The trainer's kernels do not recompute activations, so neither did the profile: its FLOPs are
  // the forward and backward alone, and a plan that recomputes pays its extra forwards at that rate
  // (counted with them, the rate rose by the recomputation and the plan cost what one without it
  // did: `parlab plan` priced deep-mlp's DDP x3 with full recomputation at the same 245 ms).
  strategy::Plan one = plan;
  one.microbatch = p.microbatch;
  one.tp = one.pp = one.v = 1;
  one.recompute = strategy::Recompute::kNone;
  const strategy::LayerRange all{0, int(ran.layer_list().size())};
  const double flops = strategy::forward_flops(ran, one, all) + strategy::backward_flops(ran, one, all);
  // Processes beyond the cores each got a share of one; the models share the cores out again:
  // wall times are given per core (x processes / cores), CPU times are a core's already.
  const double share = shared_cores(cluster, p);
  const SharedCorePricing pricing = shared_core_pricing(cluster, plan, p);
  const double per_core = pricing == SharedCorePricing::kCpuTime ? 1.0 : share;
  double microbatch = p.microbatch_seconds(), update = p.optimizer_seconds;
  if (pricing == SharedCorePricing::kCpuTime)
    microbatch = p.microbatch_cpu_seconds, update = p.optimizer_cpu_seconds;
  else if (pricing == SharedCorePricing::kMakespan)
    microbatch = p.microbatch_makespan_seconds, update = p.optimizer_makespan_seconds;
  strategy::ClusterSpec c = cluster;
  c.device.peak_flops_fp32 = c.device.peak_flops_bf16 = per_core * flops / microbatch;
  c.device.gemm_efficiency = 1.0;
  c.device.memory_bytes_per_s =
      per_core * double(p.parameters) * strategy::optimizer_traffic_bytes_per_param(plan) / update;
  c.device.memory_efficiency = 1.0;
  if (p.first_touch_bytes_per_s > 0) c.device.first_touch_bytes_per_s = share * p.first_touch_bytes_per_s;
  c.device.gemm_rates.clear();  // the profile measured this workload's own rate
  return c;
}

std::string describe(const WorkloadProfile& p, const strategy::ClusterSpec& profiled, const strategy::Plan& plan) {
  // The gradient clear as the cost model charges it (a kZeroGrad op of the parameters' fp32
  // gradients at the update's rate), beside the profile's own measurement of it.
  strategy::Op clear;
  clear.kind = strategy::OpKind::kZeroGrad;
  clear.memory_bytes = double(p.parameters) * strategy::grad_accumulation_bytes_per_element(strategy::Plan{});
  if (p.weight_grad_group > 1)  // the first group product writes the blocks' weights (strategy/plan.h)
    clear.first_write_bytes =
        double(p.blocks * 2 * p.hidden * p.ffn) * strategy::grad_accumulation_bytes_per_element(strategy::Plan{});
  const double modelled = strategy::compute_seconds_alone(clear, profiled, strategy::Precision::kFp32);
  const std::string on =
      p.processes == 1 ? std::string("one process") : std::to_string(p.processes) + " processes in lockstep";
  std::string group = p.microbatches_in_flight > 1 ? std::string() : std::string(", back to back");
  group += p.weight_grad_group > 1
               ? ", weight gradients over " + std::to_string(p.weight_grad_group) + " microbatches at once"
               : std::string();
  if (p.microbatches_in_flight > 1)
    group += ", in a pipeline stage's order (" + std::to_string(p.microbatches_in_flight) + " in flight)";
  std::string makespan;
  const SharedCorePricing pricing = shared_core_pricing(profiled, plan, p);
  if (pricing != SharedCorePricing::kOwnTimes) {
    const bool cpu = pricing == SharedCorePricing::kCpuTime;
    char m[320];
    std::snprintf(m, sizeof m, "; %d processes on %d cores: priced on %s, %.2f ms a microbatch and %.2f ms the update",
                  p.processes, profiled.cores_per_node,
                  cpu ? "their CPU time (the ranks meet once a step)" : "the steps' makespans",
                  (cpu ? p.microbatch_cpu_seconds : p.microbatch_makespan_seconds) * 1e3,
                  (cpu ? p.optimizer_cpu_seconds : p.optimizer_makespan_seconds) * 1e3);
    makespan = m;
  }
  char b[1280];
  std::snprintf(b, sizeof b,
                "compute model: a profile of this workload's rank shape (h %lld, f %lld, %lld blocks) on %s%s%s "
                "(median of %d steps of %d microbatches of %lld%s, after a warm-up): forward+backward "
                "%.2f ms a microbatch +-%.0f%%, data %.2f ms "
                "-> %.1f GFLOP/s; AdamW over %.1f M "
                "parameters %.2f ms -> %.2f GB/s (gradient clear: measured %.2f ms, modelled %.2f ms); new "
                "memory made and zeroed at %.2f GB/s%s; communication from the calibration",
                (long long)p.hidden, (long long)p.ffn, (long long)p.blocks, on.c_str(),
                p.tp_meetings_per_microbatch > 0 ? ", each tensor-parallel group meeting after every block" : "",
                p.bf16_copies_per_pass ? ", its bf16 weight copies made every pass as ZeRO-3's gathers make them" : "",
                p.repeats, p.microbatches_per_step, (long long)p.microbatch, group.c_str(), p.fwdbwd_seconds * 1e3,
                100 * p.fwdbwd_spread, p.data_seconds * 1e3, profiled.device.peak_flops_fp32 / 1e9,
                double(p.parameters) / 1e6, p.optimizer_seconds * 1e3, profiled.device.memory_bytes_per_s / 1e9,
                p.clear_seconds * 1e3, modelled * 1e3, p.first_touch_bytes_per_s / 1e9, makespan.c_str());
  return b;
}

}  // namespace parlab::experiments
