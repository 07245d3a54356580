#pragma once
// Where a rank's compute thread goes back to, where the ranks on a host outnumber the cores they
// may run on: its own core (local rank mod those cores), each time the step's data-parallel
// meeting has let every rank go (before the update and after the step's last collective), and
// then the whole set again, so the kernel can still move it.
//
// Why (measured on a 2-vCPU VM, Linux 6.18): the kernel places threads it wakes next to a thread
// of the job that already runs. The data-parallel meeting that ends a step's backward releases
// every rank at once, and the woken ranks pile onto one vCPU: sampled every 60 ms during held2
// ZeRO-1 on 4 workers, 19% of the samples had two or more of the job's threads runnable on one
// vCPU while the other sat idle, and the ranks' backwards ended 32-99 ms into the step where a
// fair share of the two cores ends all four at about 69. The simulator shares the cores fairly, so
// the trainer ran DDP on 4 workers 7-9% slower than predicted. Sent home, the ranks start the
// update and the next step spread over the cores: DDP on 4 workers, alternated runs, held2 156-179
// ms a step without, 142-152 with; deep-mlp 270-302 without, 256-275 with (docs/DESIGN.md).
//
// Only for ranks that meet once a step (strategy::meets_once_a_step: DDP, ZeRO-1/2), the plans the
// simulator runs on a fair share of the cores. Where ranks meet inside the step (tensor-parallel
// all-reduces, pipeline hand-offs, ZeRO-3's gathers) the profile prices the cores as the kernel
// shares them among such ranks (its makespans), and sending them home measured nothing either
// way: ZeRO-3 on 4 workers 294-325 ms without, 305-323 with; TP 4 175-182 / 180-217. Nor for
// ranks within the cores. Four system calls a step; nothing else changes.
#include <sched.h>

#include <optional>
#include <vector>

#include "strategy/plan.h"

namespace parlab::train {

class CoreHome {
 public:
  // The system call that moves the calling thread (tests pass a recorder).
  using SetAffinity = int (*)(pid_t, size_t, const cpu_set_t*);

  CoreHome() = default;  // inactive: return_home() does nothing
  // The home of `local_rank` of `local_ranks` ranks on this host, for `plan`, given the CPUs this
  // thread may run on now: active where local_ranks exceeds them and the plan's ranks meet once a step.
  static CoreHome for_rank(const strategy::Plan& plan, int local_rank, int local_ranks,
                           SetAffinity set = ::sched_setaffinity);
  // The rule, on a list of allowed CPUs: their (local_rank mod size)th, or none.
  static std::optional<int> choose(const std::vector<int>& allowed, const strategy::Plan& plan, int local_rank,
                                   int local_ranks);

  bool active() const { return home_ >= 0; }
  int cpu() const { return home_; }
  // Moves the calling thread onto its home CPU, then allows it every CPU it was allowed before.
  void return_home() const;

 private:
  int home_ = -1;
  cpu_set_t allowed_{};
  SetAffinity set_ = ::sched_setaffinity;
};

}  // namespace parlab::train
