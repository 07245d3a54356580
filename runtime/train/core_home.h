#pragma once
// Where a rank's compute thread runs, where the ranks on a host outnumber the cores they may run
// on: its own core (local rank mod those cores). Ranks that meet once a step go back to it; ranks
// that meet inside the step stay on it.
//
// Why (measured on a 2-vCPU VM, Linux 6.18): the kernel places threads it wakes next to a thread
// of the job that already runs.
// - The data-parallel meeting that ends a step's backward releases every rank at once, and the
//   woken ranks pile onto one vCPU: sampled every 60 ms during held2 ZeRO-1 on 4 workers, 19% of
//   the samples had two or more of the job's threads runnable on one vCPU while the other sat
//   idle, and the ranks' backwards ended 32-99 ms into the step where a fair share of the two
//   cores ends all four at about 69. So a rank of DDP or ZeRO-1/2 (strategy::meets_once_a_step)
//   goes home each time the meeting has let every rank go (before the update and after the step's
//   last collective), then gets its whole set of CPUs back, so the kernel can still move it
//   between meetings: DDP on 4 workers, alternated runs, held2 156-179 ms a step without, 142-152
//   with; deep-mlp 270-302 without, 256-275 with. Pinned for good instead, DDP lost 10-23%: its
//   all-reduce threads and the update want the other core.
// - A tensor-parallel group meets after every block. Where its pair is the only work (a
//   pipeline's fill and drain), the kernel keeps the pair on one vCPU, taking turns (a trace of
//   held2 TP2 x PP2 on 4 workers: one member computes a block while the other waits in the
//   all-reduce, then the other way round), while the other vCPU idles. The simulator gives each
//   a core there. Sent home after every wait, ZeRO-3 lost 5% to the moves; so ranks that meet
//   inside the step (tensor-parallel all-reduces, pipeline hand-offs, ZeRO-3's gathers) stay on
//   their core, from the trainer's construction on (the communicators' threads, made before, may
//   still run anywhere). Alternated runs of 10 steps, held2 TP2 x PP2: 188-209 ms without,
//   166-179 with; deep-mlp 291-304 / 238-294; TP 4, TP2 x DP2, pp=4 and ZeRO-3 unchanged within
//   the machine's noise. Only where the ranks divide evenly over the cores: 3 ranks on 2 cores would
//   put two on one core for the whole step, and the group would run at that core's pace.
//
// Not for ranks within the cores, nor on the GPU. At most four system calls a step.
#include <sched.h>

#include <optional>
#include <vector>

#include "strategy/plan.h"

namespace parlab::train {

// Whether homes are given at all: not with PARLAB_CORE_HOME=off (placement left to the kernel, to
// compare, or on a kernel it hurts). The worker and the workload profile both ask here.
bool core_homes_enabled();

class CoreHome {
 public:
  // The system call that moves the calling thread (tests pass a recorder).
  using SetAffinity = int (*)(pid_t, size_t, const cpu_set_t*);

  // How a rank keeps to its home: none; going back to it after the step's meeting; staying on it.
  enum class Keep { kNone, kReturns, kStays };

  CoreHome() = default;  // inactive: settle() and return_home() do nothing
  // The home of `local_rank` of `local_ranks` ranks on this host, for `plan`, given the CPUs this
  // thread may run on now (keep()).
  static CoreHome for_rank(const strategy::Plan& plan, int local_rank, int local_ranks,
                           SetAffinity set = ::sched_setaffinity);
  // The rule: where `local_ranks` exceed `cpus`, ranks that meet once a step return home; ranks
  // that meet inside the step stay there, where they divide evenly over the cores.
  static Keep keep(const strategy::Plan& plan, int local_ranks, int cpus);
  // The home on a list of allowed CPUs: their (local_rank mod size)th, or none (keep() is kNone).
  static std::optional<int> choose(const std::vector<int>& allowed, const strategy::Plan& plan, int local_rank,
                                   int local_ranks);

  bool active() const { return home_ >= 0; }
  bool returns() const { return active() && keep_ == Keep::kReturns; }
  int cpu() const { return home_; }
  // A rank that stays home: moves the calling thread onto its home CPU for good.
  void settle() const;
  // A rank that returns home: moves the calling thread onto its home CPU, then allows it every
  // CPU it was allowed before.
  void return_home() const;

 private:
  int home_ = -1;
  Keep keep_ = Keep::kNone;
  cpu_set_t allowed_{};
  SetAffinity set_ = ::sched_setaffinity;
};

}  // namespace parlab::train
