// kind = "scaling": one plan at several worker counts, analytic, simulated and measured side by
// side, with speedup, efficiency and each prediction's error against the measurement.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "db/proof_chain.h"
#include "experiments/lib/calibrate.h"
#include "experiments/lib/calibrate_profile.h"
#include "experiments/lib/fidelity.h"
#include "experiments/lib/measure.h"
#include "experiments/lib/predict_cluster.h"
#include "experiments/lib/record.h"
#include "experiments/lib/runner.h"
#include "sim/simulate.h"
#include "trace/trace.h"
#include "strategy/io.h"
#include "base/stats.h"
#include "base/text_table.h"
#include "base/units.h"

namespace parlab::experiments {
namespace {

std::string fixed(double x, const char* fmt) {
  char b[32];
  std::snprintf(b, sizeof b, fmt, x);
  return b;
}

// The simulation's inputs and the digest of its JSON output: the grader re-simulates from these
// and compares the bytes (same inputs, same output is the simulator's contract).
void record_simulation_proof(Context& ctx, db::RunId run, const std::string& model_ref,
                             const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                             const strategy::Plan& plan, const sim::SimOptions& so, const sim::SimResult& r) {
  const std::string bytes = sim::to_json(r).dump();
  db::ProofRecord proof;
  proof.experiment = ctx.experiment;
  proof.run = run;
  proof.kind = "deterministic_simulation";
  proof.inputs = {{"model", resolve_ref(ctx, model_ref)},
                  {"model_digest", db::content_digest(strategy::to_json(model).dump())},
                  {"cluster_toml", strategy::cluster_to_toml(cluster, "")},
                  {"world", plan.world()},
                  {"plan", plan.to_string()},
                  {"warmup_steps", so.warmup_steps},
                  {"steps", so.steps},
                  {"timeline", so.timeline}};
  proof.evidence = {
      {"output_digest", db::content_digest(bytes)}, {"output_bytes", bytes.size()}, {"step_seconds", r.step_seconds}};
  proof.result = "simulated " + std::to_string(plan.world()) + " workers: " + format_ms(r.step_seconds) + " per step";
  proof.passed = true;  // the claim is checked by re-simulating, not by the writer
  ctx.store.add_proof(proof);
}

// Measured rounds: round r runs the worker counts forwards when r is even, backwards when odd.
struct MeasuredRounds {
  std::map<int, std::vector<double>> step, spread;  // workers -> per round
  std::map<int, db::RunId> last_run;
};

// Everything one scaling experiment computes, by worker count.
struct Scaling {
  Scaling(const ScalingTask& task, strategy::ModelSpec m, strategy::ClusterSpec b)
      : t(task), model(std::move(m)), base(std::move(b)) {}
  const ScalingTask& t;
  strategy::ModelSpec model;
  strategy::ClusterSpec base;
  std::optional<StoredCalibration> stored;
  bool measure = false;
  std::map<Source, std::map<int, double>> step;  // source -> workers -> seconds
  std::map<int, double> samples, predicted, measured_spread, measured_speedup;
  std::map<int, strategy::Plan> plans;
  std::map<Source, std::map<int, db::RunId>> run_of;  // source -> workers -> run id
  std::string compute_note;
  MeasuredRounds mr;
};

// One prediction (analytic or simulated) of plan `p` on w workers, recorded as a run.
void predict_one(Context& ctx, Scaling& s, Source src, int w, const strategy::Plan& p, const PredictionCluster& pc) {
  const ScalingTask& t = s.t;
  if (src == Source::kAnalytic) {
    const auto e = strategy::estimate_step(s.model, p, pc.cluster);
    RunGuard run(ctx.store, new_run(ctx, db::RunKind::kAnalytic, t.model, t.cluster, p, t.seed), ctx.outcome);
    record_estimate(ctx.store, run.id(), e);
    run.complete();
    s.run_of[src][w] = run.id();
    s.step[src][w] = e.step_seconds;
    return;
  }
  sim::SimOptions so;
  so.steps = std::min(t.steps, 3);  // a simulated step is deterministic: a few suffice
  so.timeline = true;
  const auto r = sim::simulate_plan(s.model, p, pc.cluster, so);
  RunGuard run(ctx.store, new_run(ctx, db::RunKind::kSimulated, t.model, t.cluster, p, t.seed), ctx.outcome);
  record_sim(ctx.store, run.id(), r);
  // The simulated timeline beside the measured one (chrome://tracing, Perfetto).
  const auto trace = run_dir(ctx, "sim-" + std::to_string(w) + "w") / "trace.json";
  trace::write_chrome_trace_file(trace.string(), r.timeline,
                                 ctx.spec.name + " simulated, " + std::to_string(w) + " workers");
  ctx.store.set_run_param(run.id(), "trace", trace.string());
  run.complete();
  s.run_of[src][w] = run.id();
  record_simulation_proof(ctx, run.id(), t.model, s.model, pc.recorded, p, so, r);
  s.step[src][w] = r.step_seconds;
}

// The plan at each worker count, and every prediction of it.
void predict_all(Context& ctx, Scaling& s) {
  // The workload profile: this workload's own microbatches, run by as many processes as each
  // prediction has workers, before any prediction (predict_cluster.h).
  WorkloadRates rates(s.base, s.model, [&ctx](const std::string& line) { ctx.progress(line); });
  for (int w : s.t.workers) {
    strategy::Plan p = strategy::parse_plan(s.t.plan);
    if (!p.was_given("dp")) p.given.push_back("dp");
    p.dp = w / (p.tp * p.pp);
    p = strategy::resolve(p, s.model, w);
    // Compute from the profile (or the grid), the link from the fit of w ranks.
    const PredictionCluster pc = rates.for_plan(p, w);
    s.compute_note += std::to_string(w) + " worker" + (w > 1 ? "s" : "") + ": " + pc.note + "\n";
    strategy::validate(p, s.model, pc.cluster);
    s.plans[w] = p;
    s.samples[w] = double(p.global_batch);
    s.predicted[w] = strategy::estimate_step(s.model, p, pc.cluster).step_seconds;
    for (Source src : s.t.sources) {
      if (src == Source::kMeasured) continue;  // measured in rounds (measure_rounds)
      ctx.progress("  " + std::string(to_string(src)) + ", " + std::to_string(w) + " worker" + (w > 1 ? "s" : "") +
                   " ...");
      predict_one(ctx, s, src, w, p, pc);
    }
  }
}

// Measured, in rounds of alternating order; each run carries the analytic prediction made with
// this calibration (what `calibrate --if-needed` checks for staleness).
void measure_rounds(Context& ctx, Scaling& s) {
  const ScalingTask& t = s.t;
  for (int round = 0; s.measure && round < t.rounds; ++round) {
    std::vector<int> order = t.workers;
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (int w : order) {
      if (t.rounds > 1)
        ctx.progress("  measured round " + std::to_string(round + 1) + "/" + std::to_string(t.rounds) + ":");
      MeasureRequest req{resolve_ref(ctx, t.model), s.plans[w], t.steps, t.seed, ctx.options.work_dir,
                         ctx.options.parlab_bin};
      const MeasureResult m = measure_plan(ctx, req);
      ctx.store.set_run_metric(m.run, "predicted_step_seconds", s.predicted[w]);
      if (s.base.calibrated && s.stored) ctx.store.set_run_param(m.run, "calibrated_at", s.stored->created_at);
      s.mr.step[w].push_back(m.step_seconds);
      s.mr.spread[w].push_back(m.step_spread_seconds);
      s.mr.last_run[w] = m.run;
    }
  }
  if (!s.measure) return;
  const int w1 = t.workers.front();
  for (int w : t.workers) {
    const auto& v = s.mr.step[w];
    const db::RunId last = s.mr.last_run[w];
    // Over all rounds, on the last round's run (compare prefers them), with each round's step
    // time, which readers pair the same way.
    const parlab::Spread over = record_measured_rounds(ctx.store, last, v, s.mr.spread[w]);
    s.step[Source::kMeasured][w] = over.median;
    s.measured_spread[w] = over.half_iqr;
    // Round by round: the two runs closest in time (strategy/measures.h, the tree's estimator).
    s.measured_speedup[w] = strategy::speedup(s.mr.step[w1], v, s.samples[w1], s.samples[w]).value;
    s.run_of[Source::kMeasured][w] = last;
    ctx.store.set_run_metric(last, "rounds.speedup_paired", s.measured_speedup[w]);
  }
}

// The table: measured first (the truth, with its spread), then each prediction and its error.
std::string scaling_table(const Scaling& s) {
  const ScalingTask& t = s.t;
  const int w1 = t.workers.front();
  std::vector<std::string> header = {"workers", "gbs"};
  for (Source src : t.sources) {
    const std::string name(to_string(src));
    header.insert(header.end(), {name + " step", "speedup", "eff."});
    if (s.measure && src != Source::kMeasured) header.push_back("error");
  }
  TextTable table(header);
  for (int w : t.workers) {
    std::vector<std::string> row = {std::to_string(w), fixed(s.samples.at(w), "%.0f")};
    for (Source src : t.sources) {
      const double tw = s.step.at(src).at(w), t1 = s.step.at(src).at(w1);
      const bool meas = src == Source::kMeasured;
      const double sp = meas ? s.measured_speedup.at(w) : speedup(t1, tw, s.samples.at(w1), s.samples.at(w));
      row.push_back(meas ? format_ms_spread(tw, s.measured_spread.at(w)) : format_ms(tw));
      row.push_back(format_speedup(sp));
      row.push_back(fixed(strategy::efficiency(sp, w, w1), "%.2f"));
      if (s.measure && !meas) row.push_back(format_error(tw, s.step.at(Source::kMeasured).at(w)));
    }
    table.add(row);
  }
  return table.str();
}

// The report under the table: the communication model and how measured figures were taken.
std::string scaling_notes(const Scaling& s) {
  std::string out = s.compute_note;
  if (s.stored && !s.stored->ring_fits.empty()) {
    std::string fits;
    for (const auto& f : s.stored->ring_fits)
      fits += (fits.empty() ? "" : "; ") + std::to_string(f.ranks) +
              " ranks a = " + fixed(f.latency_seconds * 1e6, "%.0f") +
              " us, B = " + fixed(f.link_bytes_per_s / 1e9, "%.2f") + " GB/s";
    out += "communication model: shared-memory all-reduce fitted per rank count (" + fits +
           "); W workers use the fit of W ranks\n";
  }
  if (s.measure)
    out += "measured: median of >= " + std::to_string(kMinMeasuredSteps) + " steps after " +
           std::to_string(kWarmupSteps) + " warm-up, " + std::to_string(s.t.rounds) +
           " round(s) alternating the order; +- is the larger of the steps' and the rounds' spread;\n"
           "measured speedup = median over rounds of the paired t1 / tW\n";
  return out;
}

std::string scaling_headline(const Scaling& s) {
  if (!s.measure) return "predicted only (no measured source)";
  double worst = 0;
  for (Source src : s.t.sources)
    if (src != Source::kMeasured)
      for (int w : s.t.workers)
        worst = std::max(worst, std::fabs(relative_error(s.step.at(src).at(w), s.step.at(Source::kMeasured).at(w))));
  const int wn = s.t.workers.back();
  return "measured " + format_speedup(s.measured_speedup.at(wn)) + " on " + std::to_string(wn) +
         " workers; largest prediction error " + fixed(100 * worst, "%.1f%%");
}

// The table as evidence: every source's step time and run per worker count.
void record_scaling_proof(Context& ctx, const Scaling& s) {
  const ScalingTask& t = s.t;
  nlohmann::json rows = nlohmann::json::array();
  for (int w : t.workers) {
    nlohmann::json row = {{"workers", w}, {"global_batch", s.samples.at(w)}};
    for (Source src : t.sources) {
      const std::string name(to_string(src));
      row[name + "_step_seconds"] = s.step.at(src).at(w);
      row[name + "_run"] = s.run_of.at(src).at(w);
    }
    if (s.measure)
      row["measured_spread_seconds"] = s.measured_spread.at(w),
      row["measured_speedup_paired"] = s.measured_speedup.at(w), row["measured_round_step_seconds"] = s.mr.step.at(w);
    rows.push_back(row);
  }
  nlohmann::json sources = nlohmann::json::array();
  for (Source src : t.sources) sources.push_back(std::string(to_string(src)));
  db::ProofRecord proof;
  proof.experiment = ctx.experiment;
  proof.kind = "scaling_report";
  proof.inputs = {{"model", t.model}, {"cluster", t.cluster}, {"plan", t.plan}, {"workers", t.workers},
                  {"steps", t.steps}, {"sources", sources},   {"seed", t.seed}, {"rounds", t.rounds}};
  proof.evidence = {{"rows", rows}};
  proof.result = ctx.outcome->headline;
  proof.passed = true;  // a record; the grader computes speedups and errors from the rows
  ctx.store.add_proof(proof);
}

}  // namespace

void run_scaling(Context& ctx, const ScalingTask& t) {
  Scaling s(t, strategy::load_model(resolve_ref(ctx, t.model)), strategy::load_cluster(resolve_ref(ctx, t.cluster)));
  if (s.base.calibrated) s.stored = load_stored_calibration(strategy::results_dir());
  s.measure = std::find(t.sources.begin(), t.sources.end(), Source::kMeasured) != t.sources.end();
  predict_all(ctx, s);
  measure_rounds(ctx, s);
  ctx.outcome->report = scaling_table(s) + scaling_notes(s);
  ctx.outcome->headline = scaling_headline(s);
  record_scaling_proof(ctx, s);
  ctx.outcome->ok = true;
}

}  // namespace parlab::experiments
