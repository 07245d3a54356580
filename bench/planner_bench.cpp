// Planner speed: plans evaluated per second when exhausting every plan of gpt-175b on 1024
// A100s (dgx-a100), and the cost of one program walk. Goal: the whole search well under 1 s.
// Prints figures beside their goals; never fails on timing.
#include <chrono>
#include <cstdio>

#include "strategy/io.h"
#include "strategy/planner.h"

using namespace parlab::strategy;

int main() {
  const ModelSpec m = load_model("gpt-175b");
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 1024);
  PlannerOptions o;
  o.global_batch = 1536;
  double best = 1e9;
  PlanReport r;
  for (int i = 0; i < 3; ++i) {
    r = search_plans(m, c, o);
    best = std::min(best, r.search_seconds);
  }
  std::printf("planner: gpt-175b on 1024 x dgx-a100, global batch 1536\n");
  std::printf("  plans enumerated          %lld (valid %lld, fitting %lld)\n", (long long)r.evaluated,
              (long long)r.valid, (long long)r.fitting);
  std::printf("  search wall time (best/3) %.3f s      goal: well under 1 s\n", best);
  std::printf("  plans evaluated per second %.0f\n", r.evaluated / best);

  // Closed form alone, and one walk, to say where the time goes.
  const auto layers = m.layer_list();
  const Plan p = r.top.front().plan;
  const int n = 2000;
  auto t0 = std::chrono::steady_clock::now();
  double sink = 0;
  for (int i = 0; i < n; ++i) sink += quick_estimate(m, layers, p, c).step_seconds;
  const double quick = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / n;
  t0 = std::chrono::steady_clock::now();
  const int walks = 20;
  for (int i = 0; i < walks; ++i) sink += estimate_step(m, p, c).step_seconds;
  const double walk = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / walks;
  std::printf("  closed-form estimate      %.1f us per plan\n", quick * 1e6);
  std::printf("  program walk (pp %d, m %lld) %.2f ms per plan (the best %d are walked)\n", p.pp,
              (long long)p.microbatches, walk * 1e3, o.walk);
  std::printf("  choice: %s, %.2f s per step  [%s]\n", p.short_name().c_str(), r.top.front().step_seconds(),
              sink > 0 ? "ok" : "?");
  return 0;
}
