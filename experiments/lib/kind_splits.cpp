// kind = "splits": one model on a fixed number of workers under several splits (DDP, ZeRO-1/2/3,
// tensor and pipeline parallelism and their combinations). For each: the step time and exposed communication (analytic, simulated,
// measured), the memory each rank holds by category (the ledger beside the accounting
// allocator's measured peak and the process's resident peak), and the bytes each rank puts on
// the wire per step (the step program's, analytic and simulated alike, beside the recorded
// calls'). What a learner should see: ZeRO-3 divides model state by the world size and pays
// about 1.5x DDP's traffic (3 parameter-sized collectives of (n-1)/n against DDP's 2).
#include <algorithm>
#include <cstdio>
#include <map>

#include "experiments/lib/measure.h"
#include "experiments/lib/record.h"
#include "experiments/lib/runner.h"
#include "experiments/lib/predict_cluster.h"
#include "sim/simulate.h"
#include "strategy/collectives.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/ledger.h"
#include "strategy/step_program.h"
#include "strategy/text_table.h"
#include "strategy/units.h"

namespace parlab::experiments {
namespace {

std::string ms(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f ms", s * 1e3);
  return b;
}
std::string mb(double bytes) { return units::format_bytes(bytes); }

// Bytes the busiest rank's program puts on the wire per step (bus factor x bytes per call;
// pipeline stages differ: a middle stage sends both ways).
double program_wire_bytes(const strategy::ModelSpec& model, const strategy::Plan& plan);
double rank_wire_bytes(const strategy::ModelSpec& model, const strategy::Plan& plan, int rank) {
  const strategy::StepProgram p = strategy::build_step(model, plan, rank);
  double bytes = 0;
  for (const strategy::Op& op : p.ops) {
    if (op.is_collective())
      bytes += op.bytes * op.count * strategy::bus_bandwidth_factor(strategy::collective_of(op.kind), p.group_of(op).size());
    if (op.kind == strategy::OpKind::kSend) bytes += op.bytes * op.count;  // once over one link
  }
  return bytes;
}
double program_wire_bytes(const strategy::ModelSpec& model, const strategy::Plan& plan) {
  double worst = 0;
  for (int r = 0; r < plan.world(); ++r) worst = std::max(worst, rank_wire_bytes(model, plan, r));
  return worst;
}

struct Row {
  std::map<Source, double> step, exposed;
  double program_wire = 0, measured_wire = -1;
  strategy::MemoryLedger ledger;
  std::optional<train::MemoryReport> measured;  // the rank with the largest measured total
  // Pipelines: bubble fraction by the formula (p-1)/(v m + p-1), simulated (the largest rank's,
  // walked over the step) and measured (mean over ranks, and the largest rank's).
  double bubble_formula = -1, bubble_simulated = -1, bubble_measured = -1, bubble_measured_max = -1;
};

std::string fraction(double x) {
  if (x < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

}  // namespace

void run_splits(Context& ctx, const SplitsTask& t) {
  const strategy::ModelSpec model = strategy::load_model(resolve_ref(ctx, t.model));
  // Each split predicted as a worker count is (predict_cluster.h): its rank shape profiled on
  // this machine by as many processes as it has workers, the link fitted for that many ranks.
  WorkloadRates rates(strategy::load_cluster(resolve_ref(ctx, t.cluster)), model,
                      [&ctx](const std::string& line) { ctx.progress(line); });
  std::vector<std::string> notes;
  std::vector<Row> rows;
  for (const std::string& text : t.plans) {
    strategy::Plan p = strategy::parse_plan(text);
    if (!p.was_given("dp")) p.given.push_back("dp");
    p.dp = t.workers / (p.tp * p.pp);
    p = strategy::resolve(p, model, t.workers);
    const PredictionCluster pc = rates.for_plan(p, t.workers);
    const strategy::ClusterSpec& cluster = pc.cluster;
    strategy::validate(p, model, cluster);
    if (std::find(notes.begin(), notes.end(), pc.note) == notes.end()) notes.push_back(pc.note);
    Row row;
    row.ledger = strategy::worst_stage(strategy::ledger_per_stage(model, p, cluster));
    row.program_wire = program_wire_bytes(model, p);
    if (p.pp > 1) row.bubble_formula = strategy::bubble_fraction_of_total(p.pp, p.v, p.microbatches);
    for (Source src : t.sources) {
      ctx.progress("  " + text + ", " + std::string(to_string(src)) + " ...");
      if (src == Source::kAnalytic) {
        const auto e = strategy::estimate_step(model, p, cluster);
        RunGuard run(ctx.store, new_run(ctx, db::RunKind::kAnalytic, t.model, t.cluster, p, t.seed), ctx.outcome);
        record_estimate(ctx.store, run.id(), e);
        run.complete();
        row.step[src] = e.step_seconds;
        row.exposed[src] = e.ranks.empty() ? 0 : e.ranks.front().exposed_comm_seconds;
      } else if (src == Source::kSimulated) {
        sim::SimOptions so;
        so.steps = std::min(t.steps, 3);
        const auto r = sim::simulate_plan(model, p, cluster, so);
        RunGuard run(ctx.store, new_run(ctx, db::RunKind::kSimulated, t.model, t.cluster, p, t.seed), ctx.outcome);
        record_sim(ctx.store, run.id(), r);
        run.complete();
        row.step[src] = r.step_seconds;
        row.exposed[src] = r.ranks.empty() ? 0 : r.ranks.front().exposed_comm_seconds;
        if (p.pp > 1) row.bubble_simulated = r.walked_bubble_fraction;
      } else {
        MeasureRequest req{resolve_ref(ctx, t.model), p, t.steps, t.seed, ctx.options.work_dir, ctx.options.parlab_bin};
        const MeasureResult m = measure_plan(ctx, req);
        row.step[src] = m.step_seconds;
        row.exposed[src] = m.exposed_comm_seconds;
        if (p.pp > 1) row.bubble_measured = m.bubble.mean, row.bubble_measured_max = m.bubble.max_rank;
        double worst = 0;
        for (double b : m.wire_bytes_per_step) worst = std::max(worst, b);
        row.measured_wire = worst;
        for (const train::MemoryReport& r : m.memory)
          if (!row.measured || r.measured_peak_total_bytes > row.measured->measured_peak_total_bytes) row.measured = r;
      }
    }
    rows.push_back(std::move(row));
  }

  std::vector<std::string> head = {"plan"};
  for (Source src : t.sources) head.push_back(std::string(to_string(src)) + " step");
  for (Source src : t.sources) head.push_back(std::string(to_string(src)) + " exposed");
  head.insert(head.end(), {"wire/rank (program)", "wire/rank (recorded)", "vs DDP"});
  TextTable time(head);
  const double ddp_wire = rows.front().program_wire;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::vector<std::string> line = {t.plans[i]};
    for (Source src : t.sources) line.push_back(ms(r.step.at(src)));
    for (Source src : t.sources) line.push_back(ms(r.exposed.at(src)));
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", ddp_wire > 0 ? r.program_wire / ddp_wire : 0.0);
    line.insert(line.end(), {mb(r.program_wire), r.measured_wire >= 0 ? mb(r.measured_wire) : "-", ratio});
    time.add(line);
  }
  TextTable bubble({"plan", "schedule", "formula (p-1)/(vm+p-1)", "simulated (largest rank)", "measured (mean of ranks)",
                    "measured (largest rank)"});
  bool any_pipeline = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (r.bubble_formula < 0) continue;
    any_pipeline = true;
    strategy::Plan p = strategy::parse_plan(t.plans[i]);
    bubble.add({t.plans[i], std::string(strategy::to_string(p.schedule)), fraction(r.bubble_formula),
                fraction(r.bubble_simulated), fraction(r.bubble_measured), fraction(r.bubble_measured_max)});
  }
  TextTable memory({"plan", "parameters", "gradients", "optimizer", "activations", "temporary", "total", "resident"});
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const double ledger[] = {r.ledger.params_bytes, r.ledger.grads_bytes, r.ledger.optimizer_bytes,
                             r.ledger.activations_bytes, r.ledger.temp_bytes};
    std::vector<std::string> line = {t.plans[i]};
    for (int c = 0; c < model::kMemoryCategories; ++c)
      line.push_back((r.measured ? mb(double(r.measured->measured_peak_bytes[c])) + " / " : std::string()) + mb(ledger[c]));
    line.push_back((r.measured ? mb(double(r.measured->measured_peak_total_bytes)) + " / " : std::string()) +
                   mb(r.ledger.total_bytes()));
    line.push_back(r.measured && r.measured->resident_peak_bytes > 0 ? mb(double(r.measured->resident_peak_bytes)) : "-");
    memory.add(line);
  }
  ctx.outcome->report = "Time and traffic per step (" + std::to_string(t.workers) +
                        " workers; wire bytes = bytes per call x bus factor, per rank):\n" + time.str() +
                        "\nPeak memory per rank (measured by the accounting allocator / the ledger; resident = the "
                        "process's peak RSS):\n" + memory.str() +
                        (any_pipeline ? "\nPipeline bubble (idle share of the step's pipeline span per rank):\n" + bubble.str()
                                      : std::string());
  for (const std::string& n : notes) ctx.outcome->report += n + "\n";
  char headline[240];
  const Row& last = rows.back();
  std::snprintf(headline, sizeof headline, "%s: model state %s per rank (DDP %s), traffic %.2fx DDP's", t.plans.back().c_str(),
                mb(last.ledger.model_state_bytes()).c_str(), mb(rows.front().ledger.model_state_bytes()).c_str(),
                ddp_wire > 0 ? last.program_wire / ddp_wire : 0.0);
  ctx.outcome->headline = headline;
  ctx.outcome->ok = true;
}

}  // namespace parlab::experiments
