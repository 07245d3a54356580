// Experiment kinds that run the Gloo runtime: measured scaling points, the one-worker
// equivalence test and the kill-and-resume proof. Every run goes through run_training (real
// worker processes under the supervisor) and is recorded by record::RunRecorder.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "experiments/lib/calibrate_measure.h"
#include "experiments/lib/measure.h"
#include "experiments/lib/record.h"
#include "experiments/lib/runner.h"
#include "record/proof_recorder.h"
#include "record/run_recorder.h"
#include "runtime/checkpoint/checkpoint.h"
#include "runtime/checkpoint/safetensors.h"
#include "runtime/device/device.h"
#include "runtime/launch/kill_resume_proof.h"
#include "runtime/launch/process.h"
#include "runtime/launch/run_training.h"
#include "runtime/launch/supervisor.h"
#include "runtime/train/dump.h"
#include "runtime/train/telemetry.h"
#include "strategy/measures.h"
#include "strategy/collectives.h"
#include "base/errors.h"
#include "base/text_table.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

std::vector<std::string> worker_command(const Context& ctx) {
  if (ctx.options.parlab_bin.empty())
    throw RuntimeError("measured runs need the parlab binary's path (RunnerOptions::parlab_bin)");
  return launch::worker_command_for(ctx.options.parlab_bin);
}

launch::TrainJobSpec job_spec(const Context& ctx, const std::string& model, const std::string& plan, int nproc,
                              int64_t steps, uint64_t seed, const std::string& label) {
  launch::TrainJobSpec spec;
  spec.job.model = resolve_ref(ctx, model);
  spec.job.plan = plan;
  spec.job.steps = steps;
  spec.job.seed = seed;
  spec.job.run_dir = run_dir(ctx, label);
  spec.nproc = nproc;
  spec.fresh = true;  // each measurement starts from scratch
  spec.worker_command = worker_command(ctx);
  return spec;
}

// Trains `spec` with progress lines, recorded as a measured run; throws if the job failed.
launch::TrainOutcome train_recorded(Context& ctx, const launch::TrainJobSpec& spec, const std::string& what) {
  record::RunRecorder rec = record::RunRecorder::begin(ctx.store, spec, ctx.experiment);
  ctx.outcome->runs.push_back(rec.run());
  launch::TrainCallbacks cb;
  cb.recorder = &rec;
  const int64_t total = spec.job.steps;
  cb.on_step = [&ctx, what, total](const launch::StepSummary& s, int64_t) {
    if (s.step == 0 || (s.step + 1) % 5 == 0 || s.step + 1 == total) {
      char b[160];
      std::snprintf(b, sizeof b, "  %s: step %lld/%lld, %.0f ms/step, loss %.4f", what.c_str(), (long long)s.step + 1,
                    (long long)total, s.step_seconds * 1e3, s.loss);
      ctx.progress(b);
    }
  };
  launch::TrainOutcome out = launch::run_training(spec, cb);
  if (!out.ok) throw RuntimeError(what + " failed: " + out.message);
  return out;
}

// Normwise relative difference ||a - b|| / ||b|| over every tensor the two have in common, and
// the name of the worst tensor.
struct Diff {
  double worst = 0;
  std::string tensor;
};
Diff compare_tensors(const std::map<std::string, std::vector<float>>& a,
                     const std::map<std::string, std::vector<float>>& b) {
  Diff d;
  for (const auto& [name, va] : a) {
    const auto it = b.find(name);
    if (it == b.end() || it->second.size() != va.size())
      throw RuntimeError("equivalence: tensor " + name + " differs in shape");
    double num = 0, den = 0;
    for (size_t i = 0; i < va.size(); ++i) {
      const double x = double(va[i]) - double(it->second[i]);
      num += x * x;
      den += double(it->second[i]) * it->second[i];
    }
    const double rel = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    if (rel > d.worst || d.tensor.empty()) d.worst = std::max(d.worst, rel), d.tensor = name;
  }
  return d;
}

std::map<std::string, std::vector<float>> read_safetensors(const fs::path& file) {
  const auto f = checkpoint::SafetensorsFile::open(file);
  std::map<std::string, std::vector<float>> out;
  for (const auto& t : f.tensors()) out[t.name] = f.read_f32(t.name);
  return out;
}

// The parameters of a run's final checkpoint (optimizer state left out: its moments are
// compared through the weights they produce).
std::map<std::string, std::vector<float>> final_weights(const fs::path& run_dir,
                                                        const std::vector<std::string>& names) {
  const auto loaded = checkpoint::load_checkpoint(checkpoint::LoadOptions(launch::checkpoint_root(run_dir)));
  if (!loaded.checkpoint) throw RuntimeError("equivalence: no checkpoint in " + run_dir.string());
  std::map<std::string, std::vector<float>> out;
  for (const auto& n : names) out[n] = loaded.checkpoint->read_tensor(n);
  return out;
}

// Bytes each rank's collectives put on the wire per step, from its recorded events.
std::vector<double> wire_bytes_per_step(const std::vector<train::OpEvent>& events, const strategy::Plan& plan,
                                        int world) {
  std::vector<double> bytes(static_cast<size_t>(world), 0.0);
  std::vector<std::set<int64_t>> steps(static_cast<size_t>(world));
  for (const train::OpEvent& e : events) {
    if (e.rank < 0 || e.rank >= world) continue;
    if (e.op == "send") {  // a pipeline send: its bytes cross one link once
      bytes[e.rank] += e.bytes;
      steps[e.rank].insert(e.step);
      continue;
    }
    const auto op = strategy::parse_collective_op(e.op);
    if (!op) continue;
    // Tensor-parallel collectives (on the compute stream) span the TP group, the others the DP group.
    const int n = e.group.rfind("tp.", 0) == 0 ? plan.tp : plan.dp;
    bytes[e.rank] += e.bytes * strategy::bus_bandwidth_factor(*op, n);
    steps[e.rank].insert(e.step);
  }
  for (int r = 0; r < world; ++r)
    if (!steps[r].empty()) bytes[r] /= double(steps[r].size());
  return bytes;
}

std::string sci(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2e", x);
  return b;
}

}  // namespace

// The median over the steps after the warm-up (page faults, rendezvous, cold caches), with the
// spread of those steps, so a step that another job slowed moves neither.
parlab::Spread measured_step_seconds(const std::vector<launch::StepSummary>& steps) {
  std::map<int64_t, const launch::StepSummary*> by_step;
  for (const auto& s : steps) by_step[s.step] = &s;
  std::vector<double> v;
  for (const auto& [step, s] : by_step) {
    if (step < kWarmupSteps) continue;
    const auto before = by_step.find(step - 1);
    const bool cadence =
        before != by_step.end() && before->second->end_seconds > 0 && s->end_seconds > before->second->end_seconds;
    v.push_back(cadence ? s->end_seconds - before->second->end_seconds : s->step_seconds);
  }
  return parlab::spread_of(v);
}

parlab::Spread record_measured_rounds(db::ResultsStore& store, db::RunId run, const std::vector<double>& v,
                                      const std::vector<double>& spreads) {
  parlab::Spread out;
  out.n = int(v.size());
  out.median = parlab::median(v);
  const double between = (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / 2;
  out.half_iqr = std::max(parlab::median(spreads), between);
  store.set_run_metric(run, "rounds", double(v.size()));
  for (size_t r = 0; r < v.size(); ++r) store.set_run_metric(run, strategy::round_step_metric(int(r)), v[r]);
  store.set_run_metric(run, "rounds.step_seconds", out.median);
  store.set_run_metric(run, "rounds.step_seconds_spread", out.half_iqr);
  return out;
}

parlab::Spread record_source_rounds(db::ResultsStore& store, Source source, db::RunId run,
                                    const std::vector<double>& steps, const std::vector<double>& spreads) {
  if (source == Source::kMeasured) return record_measured_rounds(store, run, steps, spreads);
  return record_measured_rounds(store, run, steps, std::vector<double>(steps.size(), 0.0));
}

MeasureResult measure_plan(Context& ctx, const MeasureRequest& req) {
  const int world = req.plan.world();
  const int measured_steps = std::max(req.steps, kMinMeasuredSteps);
  auto spec = job_spec(ctx, req.model, req.plan.to_string(), world, measured_steps + kWarmupSteps, req.seed,
                       "measured-" + std::to_string(world) + "w");
  spec.job.trace = true;  // per-op events, for the measured timeline beside the simulated one
  const measure::CpuSample before = measure::sample_cpu();
  const launch::TrainOutcome out =
      train_recorded(ctx, spec, "measured, " + std::to_string(world) + " worker" + (world > 1 ? "s" : ""));
  // What other jobs took from the machine meanwhile (the workers are this process's waited-for
  // children, so their CPU is ours): a measurement under load is told apart from an error.
  const double others = measure::others_busy_cores(before, measure::sample_cpu());
  MeasureResult r;
  r.run = ctx.outcome->runs.back();
  const auto trace = spec.job.run_dir / "trace.json";
  train::write_measured_trace(trace.string(), launch::read_run_events(spec.job.run_dir, world),
                              ctx.spec.name + " measured, " + std::to_string(world) + " workers");
  ctx.store.set_run_param(r.run, "trace", trace.string());
  const parlab::Spread step = measured_step_seconds(out.steps);
  r.step_seconds = step.median;
  r.step_spread_seconds = step.half_iqr;
  r.steps_measured = step.n;
  r.memory = out.memory;
  for (const launch::RankSummary& rs : out.rank_table)
    r.exposed_comm_seconds += rs.mean.exposed_comm_seconds / out.rank_table.size();
  const std::vector<train::OpEvent> events = launch::read_run_events(spec.job.run_dir, world);
  r.wire_bytes_per_step = wire_bytes_per_step(events, req.plan, world);
  if (req.plan.pp > 1) {
    r.bubble = train::measured_bubble(events);
    ctx.store.set_run_metric(r.run, "bubble_fraction_measured", r.bubble.mean);
    ctx.store.set_run_metric(r.run, "bubble_fraction_measured_max_rank", r.bubble.max_rank);
  }
  // The comparison's step time: the median over the measured steps (warm-up left out), and its
  // spread (half the interquartile range), which `compare` shows as +-.
  ctx.store.set_run_metric(r.run, "step_seconds", r.step_seconds);
  ctx.store.set_run_metric(r.run, "step_seconds_spread", r.step_spread_seconds);
  ctx.store.set_run_metric(r.run, "step_seconds_samples", r.steps_measured);
  ctx.store.set_run_metric(r.run, "machine.others_busy_cores", others);
  ctx.store.set_run_metric(r.run, "machine.loadavg", measure::loadavg_1min());
  ctx.store.set_run_param(r.run, "step_seconds_definition",
                          "median over steps " + std::to_string(kWarmupSteps) + ".." +
                              std::to_string(measured_steps + kWarmupSteps - 1) +
                              " (steps before are warm-up) of the time between the last rank finishing the step before "
                              "and the last rank finishing this one; spread = (q75 - q25) / 2");
  return r;
}

namespace {

// One trained configuration of an equivalence experiment: its run dir and loss curve.
struct EquivalenceRun {
  fs::path dir;
  std::vector<double> losses;
};

// A plan's keys on top of the base plan ("gbs=128" and "zero=3"): later keys win.
std::string with_keys(const std::string& base, const std::string& extra) {
  return strategy::parse_plan(extra, strategy::parse_plan(base)).given_text();
}

EquivalenceRun train_equivalence(Context& ctx, const EquivalenceTask& t, const std::string& plan, int w,
                                 const std::string& label) {
  auto spec = job_spec(ctx, t.model, plan, w, t.steps, t.seed, label);
  spec.job.device = t.device;
  if (t.data_size > 0) spec.job.data_size = t.data_size;
  spec.job.dump_dir = spec.job.run_dir / "dump";
  spec.job.checkpoint_every = t.steps;  // one checkpoint: the final weights to compare
  const auto out =
      train_recorded(ctx, spec, (plan.empty() ? "" : plan + ", ") + std::to_string(w) + " worker" + (w > 1 ? "s" : ""));
  EquivalenceRun r{spec.job.run_dir, {}};
  for (const auto& s : out.steps) r.losses.push_back(s.loss);
  return r;
}

}  // namespace

void run_equivalence(Context& ctx, const EquivalenceTask& t) {
  device::require_available(device::parse_kind(t.device, "device"));  // before any process starts
  const int ref_workers = t.workers.front();
  const EquivalenceRun ref =
      train_equivalence(ctx, t, t.plan, ref_workers, "equivalence-" + std::to_string(ref_workers) + "w");
  // Gradients of step 0 as the optimizer applied them (reduced over ranks, gathered under ZeRO;
  // rank 0's copy).
  const auto ref_grads =
      read_safetensors(train::dump_dir_for_rank(ref.dir / "dump", 0, ref_workers) / "grads.safetensors");
  std::vector<std::string> names;
  for (const auto& [n, v] : ref_grads) names.push_back(n);
  const auto ref_weights = final_weights(ref.dir, names);
  const std::vector<std::string> plans = t.plans.empty() ? std::vector<std::string>{""} : t.plans;

  TextTable table({"plan", "workers", "gradients (step 0)", "worst tensor",
                   "weights (step " + std::to_string(t.steps) + ")", "loss curve", "within " + sci(t.tolerance) + "?"});
  nlohmann::json evidence = nlohmann::json::object();
  bool all = true;
  double worst_all = 0;
  for (size_t k = 0; k < plans.size(); ++k) {
    const std::string plan = with_keys(t.plan, plans[k]);
    const strategy::Plan split = strategy::parse_plan(plan);
    for (int w : t.workers) {
      if (w == ref_workers) continue;
      // A model split needs whole tensor x pipeline groups: tp=2,pp=2 runs on 4 workers, not 2.
      if (w % (split.tp * split.pp) != 0 || (split.was_given("dp") && w != split.dp * split.tp * split.pp)) continue;
      const std::string label =
          "equivalence-" + (plans.size() > 1 ? "p" + std::to_string(k) + "-" : "") + std::to_string(w) + "w";
      const EquivalenceRun run = train_equivalence(ctx, t, plan, w, label);
      const auto g = compare_tensors(
          read_safetensors(train::dump_dir_for_rank(run.dir / "dump", 0, w) / "grads.safetensors"), ref_grads);
      const auto p = compare_tensors(final_weights(run.dir, names), ref_weights);
      double loss = 0;
      for (size_t i = 0; i < run.losses.size() && i < ref.losses.size(); ++i)
        loss = std::max(loss, std::fabs(run.losses[i] - ref.losses[i]) / std::max(1e-12, std::fabs(ref.losses[i])));
      const bool ok = g.worst <= t.tolerance && p.worst <= t.tolerance && loss <= t.tolerance;
      all = all && ok;
      worst_all = std::max({worst_all, g.worst, p.worst, loss});
      const std::string shown = plans[k].empty() ? (t.plan.empty() ? "(default)" : t.plan) : plans[k];
      table.add({shown, std::to_string(w), sci(g.worst), g.tensor, sci(p.worst), sci(loss), ok ? "yes" : "NO"});
      // One plan: keyed by the worker count, as before plans existed; several: "plan@workers".
      const std::string key = t.plans.empty() ? std::to_string(w) : shown + "@" + std::to_string(w);
      evidence[key] = {{"plan", plan},
                       {"workers", w},
                       {"grad_relative_difference", g.worst},
                       {"grad_worst_tensor", g.tensor},
                       {"weight_relative_difference", p.worst},
                       {"loss_relative_difference", loss}};
    }
  }
  char headline[200];
  std::snprintf(headline, sizeof headline, "%s: largest relative difference to 1 worker %.2e (tolerance %.0e)",
                all ? "equivalent" : "NOT equivalent", worst_all, t.tolerance);
  db::ProofRecord proof;
  proof.experiment = ctx.experiment;
  proof.run = ctx.outcome->runs.front();
  proof.kind = "equivalence";
  proof.inputs = {{"model", t.model}, {"plan", t.plan},           {"plans", t.plans}, {"workers", t.workers},
                  {"steps", t.steps}, {"tolerance", t.tolerance}, {"seed", t.seed}};
  if (t.device != "cpu") proof.inputs["device"] = t.device;  // cpu proofs keep their inputs as before
  proof.result = headline;
  proof.passed = all;
  proof.evidence = evidence;
  ctx.store.add_proof(proof);
  ctx.outcome->report =
      "Normwise relative difference ||x_W - x_1|| / ||x_1|| against one worker (fp32 sums in another order differ in "
      "the\n"
      "last bits; the tolerance allows that and nothing more):\n\n" +
      table.str();
  ctx.outcome->headline = headline;
  ctx.outcome->ok = all;
}

void run_kill_resume(Context& ctx, const KillResumeTask& t) {
  device::require_available(device::parse_kind(t.device, "device"));  // before any process starts
  launch::ProofOptions o;
  o.job.model = resolve_ref(ctx, t.model);
  o.job.plan = t.plan;
  o.job.steps = t.steps;
  o.job.seed = t.seed;
  o.job.device = t.device;
  o.nproc = t.nproc;
  o.trials = t.trials;
  o.checkpoint_every = t.checkpoint_every;
  o.fault_seed = t.seed;
  o.work_dir = run_dir(ctx, "proof");
  o.worker_command = worker_command(ctx);
  o.on_note = [&ctx](const std::string& s) { ctx.progress("  " + s); };
  record::ProofRecorder recorder(ctx.store, ctx.experiment);
  o.sink = &recorder;
  const launch::ProofReport rep = launch::run_kill_resume_proof(o);
  // The reference's final checkpoint is what every trial resumed towards: check it holds everything.
  record_checkpoint_completeness(ctx, o.work_dir / "reference", t.steps, rep.reference_run);
  if (rep.reference_run) ctx.outcome->runs.push_back(*rep.reference_run);
  for (const auto& tr : rep.trials)
    if (tr.run) ctx.outcome->runs.push_back(*tr.run);
  ctx.outcome->report = rep.table();
  ctx.outcome->headline = rep.headline();
  ctx.outcome->ok = rep.passed;
}

}  // namespace parlab::experiments
