// kind = "planner": the planner on a large model; its top candidates recorded as analytic runs
// and, when asked, simulated beside them.
#include <cstdio>

#include "experiments/lib/record.h"
#include "experiments/lib/runner.h"
#include "sim/simulate.h"
#include "strategy/io.h"
#include "strategy/planner.h"
#include "base/text_table.h"
#include "base/units.h"

namespace parlab::experiments {

void run_planner(Context& ctx, const PlannerTask& t) {
  const strategy::ModelSpec model = strategy::load_model(resolve_ref(ctx, t.model));
  const strategy::ClusterSpec cluster =
      strategy::with_world(strategy::load_cluster(resolve_ref(ctx, t.cluster)), t.world);
  strategy::PlannerOptions po;
  po.global_batch = t.global_batch;
  po.top = t.top;
  ctx.progress("  searching plans for " + model.name + " on " + std::to_string(t.world) + " devices ...");
  const auto rep = strategy::search_plans(model, cluster, po);

  std::vector<std::string> header = {"#", "plan", "memory", "analytic step", "MFU"};
  if (t.simulate_top > 0) header.insert(header.end(), {"simulated step", "sim/analytic"});
  TextTable table(header);
  int i = 0;
  for (const auto& cand : rep.top) {
    ++i;
    RunGuard run(ctx.store, new_run(ctx, db::RunKind::kAnalytic, t.model, t.cluster, cand.plan, 0), ctx.outcome);
    record_estimate(ctx.store, run.id(), *cand.walked);
    run.complete();
    char mem[48], step[48], mfu[32];
    std::snprintf(mem, sizeof mem, "%.0f/%.0f GB", cand.worst.total_bytes() / units::kGB,
                  cand.worst.device_bytes / units::kGB);
    std::snprintf(step, sizeof step, "%s", units::format_seconds(cand.step_seconds()).c_str());
    std::snprintf(mfu, sizeof mfu, "%.1f%%", 100 * cand.walked->mfu);
    std::vector<std::string> row = {std::to_string(i), cand.plan.short_name(), mem, step, mfu};
    if (i <= t.simulate_top) {
      ctx.progress("  simulating candidate " + std::to_string(i) + ": " + cand.plan.short_name() + " (" +
                   std::to_string(cand.plan.world()) + " ranks) ...");
      sim::SimOptions so;
      so.steps = 1;
      const sim::SimResult sr = sim::simulate_plan(model, cand.plan, cluster, so);
      RunGuard srun(ctx.store, new_run(ctx, db::RunKind::kSimulated, t.model, t.cluster, cand.plan, 0), ctx.outcome);
      record_sim(ctx.store, srun.id(), sr);
      srun.complete();
      char ratio[32];
      std::snprintf(ratio, sizeof ratio, "%.3f", sr.step_seconds / cand.step_seconds());
      row.push_back(units::format_seconds(sr.step_seconds));
      row.push_back(ratio);
    } else if (t.simulate_top > 0) {
      row.push_back("-");
      row.push_back("-");
    }
    table.add(row);
  }
  std::string report = table.str() + "\n";
  for (const auto& line : rep.explanation) report += line + "\n";
  ctx.outcome->report = report;
  if (rep.top.empty()) {
    ctx.outcome->headline = "no plan fits";
    ctx.outcome->ok = true;
    return;
  }
  ctx.outcome->headline = "choice: " + rep.top.front().plan.short_name() + " at " +
                          units::format_seconds(rep.top.front().step_seconds()) + " per step (" +
                          std::to_string(rep.fitting) + " of " + std::to_string(rep.valid) + " valid plans fit)";
  ctx.outcome->ok = true;
}

}  // namespace parlab::experiments
