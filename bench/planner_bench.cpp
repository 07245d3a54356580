// Planner speed: the whole search of gpt-175b on 1024 A100s (dgx-a100, global batch 1536) and of
// gpt-1t on 4096 (issue 34's two searches), and the cost of one program walk. Goals: under 0.3 s
// and under 1 s on a quiet machine. Prints figures beside their goals; never fails on timing.
//
// `bench_planner MODEL WORLD GBS` runs that one search once and prints its time: what
// `valgrind --tool=callgrind` counts when wall-clock times are unreliable (a loaded machine).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "strategy/io.h"
#include "strategy/planner.h"

using namespace parlab::strategy;

namespace {

// Best of `repeats` searches.
PlanReport search(const std::string& model, int world, int64_t gbs, int repeats, double& best) {
  const ModelSpec m = load_model(model);
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), world);
  PlannerOptions o;
  o.global_batch = gbs;
  best = 1e9;
  PlanReport r;
  for (int i = 0; i < repeats; ++i) {
    r = search_plans(m, c, o);
    best = std::min(best, r.search_seconds);
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double best = 0;
  if (argc == 4) {
    const PlanReport r = search(argv[1], std::atoi(argv[2]), std::atoll(argv[3]), 1, best);
    std::printf("%s x %s (gbs %lld): %.3f s, choice %s\n", argv[1], argv[2], (long long)r.global_batch, best,
                r.top.empty() ? "none" : r.top.front().plan.short_name().c_str());
    return 0;
  }
  const PlanReport big = search("gpt-1t", 4096, 0, 3, best);
  std::printf("planner: gpt-1t on 4096 x dgx-a100, global batch %lld\n", (long long)big.global_batch);
  std::printf("  search wall time (best/3) %.3f s      goal: under 1 s\n", best);

  const PlanReport r = search("gpt-175b", 1024, 1536, 3, best);
  const ModelSpec m = load_model("gpt-175b");
  const ClusterSpec c = with_world(load_cluster("dgx-a100"), 1024);
  std::printf("planner: gpt-175b on 1024 x dgx-a100, global batch 1536\n");
  std::printf("  plans enumerated          %lld (valid %lld, fitting %lld)\n", (long long)r.evaluated,
              (long long)r.valid, (long long)r.fitting);
  std::printf("  search wall time (best/3) %.3f s      goal: under 0.3 s\n", best);
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
  for (int i = 0; i < walks; ++i) sink += estimate_step(m, layers, p, c, /*detail=*/false).step_seconds;
  const double walk = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / walks;
  std::printf("  closed-form estimate      %.1f us per plan\n", quick * 1e6);
  std::printf("  program walk (pp %d, m %lld) %.2f ms per plan (the best %d are walked)\n", p.pp,
              (long long)p.microbatches, walk * 1e3, PlannerOptions{}.walk);
  std::printf("  choice: %s, %.2f s per step  [%s]\n", p.short_name().c_str(), r.top.front().step_seconds(),
              sink > 0 ? "ok" : "?");
  return 0;
}
