#include "runtime/train/core_home.h"

#include <cstdlib>
#include <string_view>

namespace parlab::train {

bool core_homes_enabled() {
  const char* v = std::getenv("PARLAB_CORE_HOME");
  return !(v && std::string_view(v) == "off");
}

CoreHome::Keep CoreHome::keep(const strategy::Plan& plan, int local_ranks, int cpus) {
  if (cpus <= 0 || local_ranks <= cpus) return Keep::kNone;
  if (strategy::meets_once_a_step(plan)) return Keep::kReturns;
  return local_ranks % cpus == 0 ? Keep::kStays : Keep::kNone;
}

std::optional<int> CoreHome::choose(const std::vector<int>& allowed, const strategy::Plan& plan, int local_rank,
                                    int local_ranks) {
  if (local_rank < 0 || keep(plan, local_ranks, static_cast<int>(allowed.size())) == Keep::kNone) return std::nullopt;
  return allowed[static_cast<size_t>(local_rank) % allowed.size()];
}

CoreHome CoreHome::for_rank(const strategy::Plan& plan, int local_rank, int local_ranks, SetAffinity set) {
  CoreHome h;
  h.set_ = set;
  if (sched_getaffinity(0, sizeof h.allowed_, &h.allowed_) != 0) return {};
  std::vector<int> allowed;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &h.allowed_)) allowed.push_back(c);
  if (const std::optional<int> home = choose(allowed, plan, local_rank, local_ranks)) {
    h.home_ = *home;
    h.keep_ = keep(plan, local_ranks, static_cast<int>(allowed.size()));
  }
  return h.active() ? h : CoreHome{};
}

void CoreHome::settle() const {
  if (!active() || keep_ != Keep::kStays) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(home_, &one);
  set_(0, sizeof one, &one);  // best effort: refused, the thread stays where the kernel puts it
}

void CoreHome::return_home() const {
  if (!returns()) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(home_, &one);
  // Best effort: a refused call (a cpuset changed under the job) leaves the thread where it was.
  if (set_(0, sizeof one, &one) == 0) set_(0, sizeof allowed_, &allowed_);
}

}  // namespace parlab::train
