#include "experiments/lib/runner.h"

#include <chrono>
#include <cstdio>

#include "base/errors.h"

namespace parlab::experiments {

void Context::progress(const std::string& line) const {
  if (options.progress)
    options.progress(line);
  else
    std::fprintf(stderr, "%s\n", line.c_str());
}

Outcome run_experiment(const ExperimentSpec& spec, db::ResultsStore& store, const RunnerOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  Outcome out;
  out.name = spec.name;
  out.kind = spec.kind;
  out.experiment =
      store.upsert_experiment({spec.name, spec.file, spec.title + (spec.notice.empty() ? "" : "\n" + spec.notice)});
  Context ctx(spec, store, out.experiment, options);
  ctx.outcome = &out;
  try {
    std::visit(
        [&](const auto& task) {
          using T = std::decay_t<decltype(task)>;
          if constexpr (std::is_same_v<T, LedgerTask>)
            run_ledger(ctx, task);
          else if constexpr (std::is_same_v<T, ScalingTask>)
            run_scaling(ctx, task);
          else if constexpr (std::is_same_v<T, ScalingLabTask>)
            run_scaling_lab(ctx, task);
          else if constexpr (std::is_same_v<T, EquivalenceTask>)
            run_equivalence(ctx, task);
          else if constexpr (std::is_same_v<T, KillResumeTask>)
            run_kill_resume(ctx, task);
          else if constexpr (std::is_same_v<T, SplitsTask>)
            run_splits(ctx, task);
          else if constexpr (std::is_same_v<T, HangDrillTask>)
            run_hang_drill(ctx, task);
          else if constexpr (std::is_same_v<T, ElasticTask>)
            run_elastic(ctx, task);
          else if constexpr (std::is_same_v<T, DecideTask>)
            run_decide(ctx, task);
          else
            run_planner(ctx, task);
        },
        spec.task);
  } catch (const Error& e) {
    out.ok = false;
    out.error = e.what();
    if (out.headline.empty()) out.headline = std::string("failed: ") + e.what();
  } catch (const std::exception& e) {
    out.ok = false;
    out.error = std::string("unexpected error: ") + e.what();
    out.headline = out.error;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace parlab::experiments
