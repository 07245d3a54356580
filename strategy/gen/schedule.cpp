// Pipeline schedules: the order in which one stage runs forward and backward slots.
//
// GPipe (Huang et al. 2019): every microbatch forward, then every backward. Simple; holds all m
// microbatches' activations.
//
// 1F1B (PipeDream-Flush, Narayanan et al. 2021; Megatron's non-interleaved schedule): stage s of
// p runs
//   warmup    min(p - s - 1, m) forwards,
//   steady    (m - warmup) pairs of one forward and one backward,
//   cooldown  the remaining warmup backwards.
// Same bubble as GPipe, (p - 1)/m of the ideal time, but only p - s microbatches in flight.
//
// Interleaved 1F1B (Narayanan et al. SC'21): each stage holds v model chunks; virtual stage
// c * p + s. Microbatches enter in groups of p; the k-th forward runs chunk (k / p) % v on
// microbatch (k / (p v)) p + k % p, backward chunks in reverse. Warm-up is 2 (p - s - 1) +
// (v - 1) p forwards (all of them when m == p). The bubble shrinks to (p - 1)/(v m).
#include "strategy/gen/builder.h"

#include <algorithm>

namespace parlab::strategy::gen {
namespace {

std::vector<Slot> gpipe(int m) {
  std::vector<Slot> out;
  for (int i = 0; i < m; ++i) out.push_back({true, i, 0, Phase::kWarmup});
  for (int i = 0; i < m; ++i) out.push_back({false, i, 0, Phase::kCooldown});
  return out;
}

std::vector<Slot> one_f_one_b(int p, int s, int m) {
  std::vector<Slot> out;
  const int warmup = std::min(p - s - 1, m);
  const int steady = m - warmup;
  for (int i = 0; i < warmup; ++i) out.push_back({true, i, 0, Phase::kWarmup});
  for (int i = 0; i < steady; ++i) {
    out.push_back({true, warmup + i, 0, Phase::kSteady});
    out.push_back({false, i, 0, Phase::kSteady});
  }
  for (int i = steady; i < m; ++i) out.push_back({false, i, 0, Phase::kCooldown});
  return out;
}

std::vector<Slot> interleaved(int p, int s, int m, int v) {
  const int total = m * v;
  int warmup = (m == p) ? total : std::min(2 * (p - s - 1) + (v - 1) * p, total);
  auto chunk_of = [&](int k, bool forward) {
    const int c = (k % (p * v)) / p;
    return forward ? c : v - 1 - c;
  };
  auto microbatch_of = [&](int k) { return (k / (p * v)) * p + k % p; };
  std::vector<Slot> out;
  for (int k = 0; k < warmup; ++k) out.push_back({true, microbatch_of(k), chunk_of(k, true), Phase::kWarmup});
  const int remaining = total - warmup;
  for (int k = 0; k < remaining; ++k) {
    const int f = warmup + k;
    out.push_back({true, microbatch_of(f), chunk_of(f, true), Phase::kSteady});
    out.push_back({false, microbatch_of(k), chunk_of(k, false), Phase::kSteady});
  }
  for (int k = remaining; k < total; ++k)
    out.push_back({false, microbatch_of(k), chunk_of(k, false), Phase::kCooldown});
  return out;
}

}  // namespace

std::vector<Slot> schedule_slots(const Plan& plan, int stage) {
  const int m = int(plan.microbatches);
  switch (plan.schedule) {
    case Schedule::kGPipe:
      return gpipe(m);
    case Schedule::k1F1B:
      return one_f_one_b(plan.pp, stage, m);
    case Schedule::kInterleaved:
      return interleaved(plan.pp, stage, m, plan.v);
  }
  return {};
}

}  // namespace parlab::strategy::gen
