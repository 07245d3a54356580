// kind = "splits": one model on a fixed number of workers under several splits (DDP, ZeRO-1/2/3,
// tensor and pipeline parallelism and their combinations). For each: the step time and exposed communication (analytic,
// simulated, measured), the memory each rank holds by category (the ledger beside the accounting allocator's measured
// peak and the process's resident peak), and the bytes each rank puts on the wire per step (the step program's,
// analytic and simulated alike, beside the recorded calls'). What a learner should see: ZeRO-3 divides model state by
// the world size and pays about 1.5x DDP's traffic (3 parameter-sized collectives of (n-1)/n against DDP's 2).
#include "experiments/lib/kind_splits.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "experiments/lib/fidelity.h"
#include "experiments/lib/measure.h"
#include "experiments/lib/record.h"
#include "experiments/lib/runner.h"
#include "experiments/lib/predict_cluster.h"
#include "sim/simulate.h"
#include "strategy/collectives.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/ledger.h"
#include "strategy/measures.h"
#include "strategy/step_program.h"
#include "base/stats.h"
#include "base/text_table.h"
#include "base/units.h"

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
      bytes +=
          op.bytes * op.count * strategy::bus_bandwidth_factor(strategy::collective_of(op.kind), p.group_of(op).size());
    if (op.kind == strategy::OpKind::kSend) bytes += op.bytes * op.count;  // once over one link
  }
  return bytes;
}
double program_wire_bytes(const strategy::ModelSpec& model, const strategy::Plan& plan) {
  double worst = 0;
  for (int r = 0; r < plan.world(); ++r) worst = std::max(worst, rank_wire_bytes(model, plan, r));
  return worst;
}

std::string fraction(double x) {
  if (x < 0) return "-";
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * x);
  return b;
}

}  // namespace

strategy::Plan split_at(const std::string& text, const strategy::ModelSpec& model, int workers) {
  strategy::Plan p = strategy::parse_plan(text);
  if (!p.was_given("dp")) p.given.push_back("dp");
  p.dp = workers / (p.tp * p.pp);
  return strategy::resolve(p, model, workers);
}

SplitRow run_split(Context& ctx, const SplitRequest& q) {
  const strategy::Plan& p = q.plan;
  SplitRow row;
  row.ledger = strategy::worst_stage(strategy::ledger_per_stage(q.model, p, q.cluster));
  row.program_wire = program_wire_bytes(q.model, p);
  if (p.pp > 1) row.bubble_formula = strategy::bubble_fraction_of_total(p.pp, p.v, p.microbatches);
  for (Source src : q.sources) {
    ctx.progress("  " + q.label + ", " + std::string(to_string(src)) + " ...");
    if (src == Source::kAnalytic) {
      const auto e = strategy::estimate_step(q.model, p, q.cluster);
      RunGuard run(ctx.store, new_run(ctx, db::RunKind::kAnalytic, q.model_ref, q.cluster_ref, p, q.seed), ctx.outcome);
      record_estimate(ctx.store, run.id(), e);
      run.complete();
      row.runs[src] = run.id();
      row.step[src] = e.step_seconds;
      row.exposed[src] = e.ranks.empty() ? 0 : e.ranks.front().exposed_comm_seconds;
    } else if (src == Source::kSimulated) {
      sim::SimOptions so;
      so.steps = simulated_steps(q.steps);
      std::optional<sim::SimResult> fresh;
      if (!q.simulated) fresh = sim::simulate_plan(q.model, p, q.cluster, so);
      const sim::SimResult& r = q.simulated ? *q.simulated : *fresh;
      RunGuard run(ctx.store, new_run(ctx, db::RunKind::kSimulated, q.model_ref, q.cluster_ref, p, q.seed),
                   ctx.outcome);
      record_sim(ctx.store, run.id(), r);
      // On the cluster it ran on (a profile's rates, sized to the plan's world), so the row can
      // be re-simulated byte for byte, as a scaling experiment's can.
      record_simulation_proof(ctx, run.id(), q.model_ref, q.model, q.cluster, p, so, r);
      run.complete();
      row.runs[src] = run.id();
      row.step[src] = r.step_seconds;
      row.exposed[src] = r.ranks.empty() ? 0 : r.ranks.front().exposed_comm_seconds;
      if (p.pp > 1) row.bubble_simulated = r.walked_bubble_fraction;
    } else {
      MeasureRequest req{resolve_ref(ctx, q.model_ref), p, q.steps, q.seed, ctx.options.work_dir,
                         ctx.options.parlab_bin};
      const MeasureResult m = measure_plan(ctx, req);
      row.step[src] = m.step_seconds;
      row.measured_spread = m.step_spread_seconds;
      row.measured_run = m.run;
      row.runs[src] = m.run;
      row.exposed[src] = m.exposed_comm_seconds;
      if (p.pp > 1) row.bubble_measured = m.bubble.mean, row.bubble_measured_max = m.bubble.max_rank;
      double worst = 0;
      for (double b : m.wire_bytes_per_step) worst = std::max(worst, b);
      row.measured_wire = worst;
      for (const train::MemoryReport& r : m.memory)
        if (!row.measured || r.measured_peak_total_bytes > row.measured->measured_peak_total_bytes) row.measured = r;
    }
  }
  return row;
}

namespace {

std::string step_cell(const SplitRow& r, Source src) {
  if (src != Source::kMeasured) return format_ms(r.step.at(src));
  return format_ms_spread(r.step.at(src), r.measured_spread);
}

std::string error_cell(const SplitRow& r, Source src) {
  if (!r.step.count(Source::kMeasured)) return "-";
  const auto rounds = [&](Source s) { return r.rounds.count(s) ? r.rounds.at(s) : std::vector<double>{r.step.at(s)}; };
  return format_paired_error(rounds(src), rounds(Source::kMeasured), r.measured_spread);
}

// The pipeline bubble of each pipelined split: formula, simulated, measured ("" without one).
std::string bubble_table(const SplitsTask& t, const std::vector<SplitRow>& rows) {
  TextTable bubble({"plan", "schedule", "formula (p-1)/(vm+p-1)", "simulated (largest rank)",
                    "measured (mean of ranks)", "measured (largest rank)"});
  bool any_pipeline = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SplitRow& r = rows[i];
    if (r.bubble_formula < 0) continue;
    any_pipeline = true;
    strategy::Plan p = strategy::parse_plan(t.plans[i]);
    bubble.add({t.plans[i], std::string(strategy::to_string(p.schedule)), fraction(r.bubble_formula),
                fraction(r.bubble_simulated), fraction(r.bubble_measured), fraction(r.bubble_measured_max)});
  }
  return any_pipeline ? bubble.str() : std::string();
}

// Peak memory per rank and category: measured / the ledger, and the resident peak.
std::string memory_table(const SplitsTask& t, const std::vector<SplitRow>& rows) {
  TextTable memory({"plan", "parameters", "gradients", "optimizer", "activations", "temporary", "total", "resident"});
  for (size_t i = 0; i < rows.size(); ++i) {
    const SplitRow& r = rows[i];
    const double ledger[] = {r.ledger.params_bytes, r.ledger.grads_bytes, r.ledger.optimizer_bytes,
                             r.ledger.activations_bytes, r.ledger.temp_bytes};
    std::vector<std::string> line = {t.plans[i]};
    for (int c = 0; c < model::kMemoryCategories; ++c)
      line.push_back((r.measured ? mb(double(r.measured->measured_peak_bytes[c])) + " / " : std::string()) +
                     mb(ledger[c]));
    line.push_back((r.measured ? mb(double(r.measured->measured_peak_total_bytes)) + " / " : std::string()) +
                   mb(r.ledger.total_bytes()));
    line.push_back(r.measured && r.measured->resident_peak_bytes > 0 ? mb(double(r.measured->resident_peak_bytes))
                                                                     : "-");
    memory.add(line);
  }
  return memory.str();
}

// Several rounds (SplitsTask::rounds): every split profiled, predicted and measured once per
// round, the order reversed every other round, so a prediction and its measurement are minutes
// apart at most and a minute in which the machine slowed lands on one round of a split. A split's
// figure from each source is the median of its rounds; the measured +- the larger of the steps'
// spread and the rounds' (the machine's drift). Recorded on the split's last run of each source,
// as the scaling experiment records its rounds, where compare and the CPU table read them.
void combine_rounds(Context& ctx, const std::vector<std::vector<SplitRow>>& rounds, std::vector<SplitRow>& rows) {
  for (size_t i = 0; i < rows.size(); ++i) {
    SplitRow& row = rows[i];
    for (auto& [src, step] : row.step) {
      std::vector<double> v, spread, exposed;
      for (const auto& round : rounds) {
        v.push_back(round[i].step.at(src));
        exposed.push_back(round[i].exposed.at(src));
        spread.push_back(round[i].measured_spread);
      }
      const db::RunId last = rounds.back()[i].runs.at(src);
      const parlab::Spread over = record_source_rounds(ctx.store, src, last, v, spread);
      step = over.median;
      row.rounds[src] = v;
      row.exposed[src] = parlab::median(exposed);
      row.runs[src] = last;
      if (src != Source::kMeasured) continue;
      row.measured_spread = over.half_iqr;
      row.measured_run = last;
    }
  }
}

}  // namespace

void run_splits(Context& ctx, const SplitsTask& t) {
  const strategy::ModelSpec model = strategy::load_model(resolve_ref(ctx, t.model));
  // Each split predicted as a worker count is (predict_cluster.h): its rank shape profiled on
  // this machine by as many processes as it has workers, the link fitted for that many ranks.
  const strategy::ClusterSpec base = strategy::load_cluster(resolve_ref(ctx, t.cluster));
  // Every plan checked before anything runs: a bad one fails at once, not after minutes of
  // profiles and measurements of the others.
  for (const std::string& text : t.plans)
    strategy::validate(split_at(text, model, t.workers), model, strategy::with_world(base, t.workers));
  WorkloadRates rates(base, model, [&ctx](const std::string& line) { ctx.progress(line); });
  std::vector<std::string> notes;
  std::vector<std::vector<SplitRow>> rounds;
  for (int round = 0; round < t.rounds; ++round) {
    // Each round profiles afresh (a new cache), beside the measurements it predicts, ...
    if (round > 0) rates = WorkloadRates(base, model, [&ctx](const std::string& line) { ctx.progress(line); });
    // ... and measures its links again: ZeRO's time is mostly communication, which drifts too.
    if (t.rounds > 1) rates.measure_links_now(t.workers);
    std::vector<SplitRow>& rows = rounds.emplace_back(t.plans.size());
    for (size_t k = 0; k < t.plans.size(); ++k) {
      const size_t i = in_round_order(k, t.plans.size(), round);
      const strategy::Plan p = split_at(t.plans[i], model, t.workers);
      const PredictionCluster pc = rates.for_plan(p, t.workers);
      strategy::validate(p, model, pc.cluster);
      if (round == 0 && std::find(notes.begin(), notes.end(), pc.note) == notes.end()) notes.push_back(pc.note);
      const std::string label =
          t.rounds > 1 ? t.plans[i] + " (round " + std::to_string(round + 1) + "/" + std::to_string(t.rounds) + ")"
                       : t.plans[i];
      rows[i] = run_split(ctx, {label, t.model, t.cluster, model, pc.cluster, p, t.sources, t.steps, t.seed});
    }
  }
  std::vector<SplitRow> rows = rounds.front();
  if (t.rounds > 1) combine_rounds(ctx, rounds, rows);
  const bool measured = std::find(t.sources.begin(), t.sources.end(), Source::kMeasured) != t.sources.end();

  // One row per split: each prediction's error against the measurement, beside its +-.
  std::vector<std::string> head = {"plan"};
  for (Source src : t.sources) head.push_back(std::string(to_string(src)) + " step");
  for (Source src : t.sources)
    if (measured && src != Source::kMeasured) head.push_back(std::string(to_string(src)) + " error");
  for (Source src : t.sources) head.push_back(std::string(to_string(src)) + " exposed");
  head.insert(head.end(), {"wire/rank (program)", "wire/rank (recorded)", "vs DDP"});
  TextTable time(head);
  const double ddp_wire = rows.front().program_wire;
  for (size_t i = 0; i < rows.size(); ++i) {
    const SplitRow& r = rows[i];
    std::vector<std::string> line = {t.plans[i]};
    for (Source src : t.sources) line.push_back(step_cell(r, src));
    for (Source src : t.sources)
      if (measured && src != Source::kMeasured) line.push_back(error_cell(r, src));
    for (Source src : t.sources) line.push_back(ms(r.exposed.at(src)));
    char ratio[32];
    std::snprintf(ratio, sizeof ratio, "%.2fx", ddp_wire > 0 ? r.program_wire / ddp_wire : 0.0);
    line.insert(line.end(), {mb(r.program_wire), r.measured_wire >= 0 ? mb(r.measured_wire) : "-", ratio});
    time.add(line);
  }
  const std::string memory = memory_table(t, rows), pipeline = bubble_table(t, rows);
  ctx.outcome->report =
      "Time and traffic per step (" + std::to_string(t.workers) +
      " workers; measured: median step +- half its interquartile range, ~ marks an error within it;"
      " error = prediction / measured - 1; wire bytes = bytes per call x bus factor, per rank):\n" +
      time.str() +
      "\nPeak memory per rank (measured by the accounting allocator / the ledger; resident = the "
      "process's peak RSS):\n" +
      memory +
      (pipeline.empty() ? std::string()
                        : "\nPipeline bubble (idle share of the step's pipeline span per rank):\n" + pipeline);
  for (const std::string& n : notes) ctx.outcome->report += n + "\n";
  char headline[240];
  const SplitRow& last = rows.back();
  std::snprintf(headline, sizeof headline, "%s: model state %s per rank (DDP %s), traffic %.2fx DDP's",
                t.plans.back().c_str(), mb(last.ledger.model_state_bytes()).c_str(),
                mb(rows.front().ledger.model_state_bytes()).c_str(), ddp_wire > 0 ? last.program_wire / ddp_wire : 0.0);
  ctx.outcome->headline = headline;
  ctx.outcome->ok = true;
}

}  // namespace parlab::experiments
