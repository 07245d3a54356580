#include "runtime/launch/kill_resume_proof.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/compute/counter_rng.h"
#include "base/errors.h"
#include "base/text_table.h"
#include "base/units.h"

namespace parlab::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr checkpoint::SavePhase kPhases[] = {
    checkpoint::SavePhase::kMidShardWrite,       checkpoint::SavePhase::kAfterShardWrite,
    checkpoint::SavePhase::kBeforeManifest,      checkpoint::SavePhase::kBeforeRename,
    checkpoint::SavePhase::kBeforePointerUpdate, checkpoint::SavePhase::kAfterPointerUpdate};

// The j-th random word of trial `trial`: SplitMix64 read at a counter, as everything seeded in
// parlab is (runtime/compute/counter_rng.h), so a trial's draw depends on (seed, trial) only.
uint64_t draw(uint64_t seed, int trial, uint64_t j) {
  const uint64_t key = compute::mix64(compute::mix64(seed) + static_cast<uint64_t>(trial) * compute::kSplitMixGamma);
  return compute::mix64(key + (j + 1) * compute::kSplitMixGamma);
}

TrainJobSpec job_spec(const ProofOptions& o, const fs::path& run_dir, const std::vector<std::string>& faults) {
  TrainJobSpec spec;
  spec.job = o.job;
  spec.job.run_dir = run_dir;
  spec.job.checkpoint_every = o.checkpoint_every;
  spec.job.faults = faults;
  spec.nproc = o.nproc;
  spec.min_nproc = o.shrink ? o.nproc - 1 : o.nproc;
  spec.max_restarts = faults.empty() ? 0 : 1;
  spec.fresh = true;
  spec.worker_command = o.worker_command;
  return spec;
}

// One run of the proof, recorded when the options carry a sink.
TrainOutcome run_job(const ProofOptions& o, const TrainJobSpec& spec, std::optional<int64_t>& id) {
  if (!o.sink) return run_training(spec);
  const std::unique_ptr<RunSink> rec = o.sink->begin_run(spec);
  id = rec->run_id();
  TrainCallbacks cb;
  cb.recorder = rec.get();
  return run_training(spec, cb);
}

// The final checkpoint's tensors (step == steps), read whole.
checkpoint::TrainingState final_tensors(const fs::path& run_dir, int64_t steps) {
  checkpoint::LoadOptions lo(checkpoint_root(run_dir), steps);
  lo.record_last_known_good = false;
  const checkpoint::LoadResult r = checkpoint::load_checkpoint(lo);
  if (!r.checkpoint || r.checkpoint->step() != steps)
    throw RuntimeError("no verified final checkpoint at step " + std::to_string(steps) + " in " + run_dir.string() +
                       ": " + r.summary());
  return r.checkpoint->read_all();
}

// Largest per-tensor normwise difference, max |a - b| / max |ref|, and where it is.
void compare_within(const checkpoint::TrainingState& ref, const checkpoint::TrainingState& got, TrialReport& t) {
  for (const checkpoint::Tensor& a : ref.tensors) {
    const checkpoint::Tensor* b = got.find(a.name);
    if (!b || b->data.size() != a.data.size()) {
      t.max_relative_diff = INFINITY;
      t.worst_tensor = a.name + " (missing or resized)";
      return;
    }
    double diff = 0, scale = 0;
    for (size_t i = 0; i < a.data.size(); ++i) {
      diff = std::max(diff, std::abs(double(a.data[i]) - double(b->data[i])));
      scale = std::max(scale, std::abs(double(a.data[i])));
    }
    const double rel = scale > 0 ? diff / scale : diff;
    if (rel >= t.max_relative_diff) {
      t.max_relative_diff = rel;
      t.worst_tensor = a.name;
    }
  }
}

std::string first_difference(const train::StateFingerprint& ref, const train::StateFingerprint& got) {
  if (ref.step != got.step) return "step " + std::to_string(got.step) + " vs " + std::to_string(ref.step);
  if (ref.optimizer_step != got.optimizer_step) return "optimizer step counter differs";
  if (!(ref.sampler == got.sampler)) return "sampler " + got.sampler.to_string() + " vs " + ref.sampler.to_string();
  for (size_t i = 0; i < ref.tensors.size() && i < got.tensors.size(); ++i)
    if (ref.tensors[i] != got.tensors[i]) return "first differing tensor: " + ref.tensors[i].first;
  return "tensor lists differ";
}

TrialReport run_trial(const ProofOptions& o, int k, const train::StateFingerprint& ref_state,
                      const std::optional<checkpoint::TrainingState>& ref_tensors) {
  TrialReport t;
  t.trial = k;
  const FaultSpec f = draw_trial_fault(o.fault_seed, k, o.nproc, o.job.steps, o.checkpoint_every, o.shrink);
  t.fault = f.to_string();
  t.rank = f.rank;
  t.step = f.step;
  t.during_checkpoint = f.kind == FaultKind::kKillDuringCheckpoint;
  if (t.during_checkpoint) t.phase = checkpoint::save_phase_name(f.phase);
  if (o.on_note) o.on_note("trial " + std::to_string(k) + ": --fault " + t.fault);
  const fs::path dir = o.work_dir / ("trial-" + std::to_string(k));
  const TrainOutcome out = run_job(o, job_spec(o, dir, {t.fault}), t.run);
  t.completed = out.ok;
  if (!out.incidents.empty()) {
    t.latency = out.incidents.front().latency;
    t.restart_seconds = t.latency.total_seconds;
    t.steps_lost = out.incidents.front().steps_lost;
  }
  if (!out.ok) {
    t.message = "the job did not finish: " + out.message.substr(0, out.message.find('\n'));
    return t;
  }
  if (out.incidents.empty()) {
    t.message = "the fault never fired: nothing was tested";
    return t;
  }
  if (!out.final_state) {
    t.message = "no final state reported";
    return t;
  }
  t.final_hash = out.final_state->combined_hex();
  t.identical = out.final_state->combined == ref_state.combined;
  if (!o.shrink) {
    t.passed = t.identical;
    if (!t.identical) t.message = first_difference(ref_state, *out.final_state);
    return t;
  }
  compare_within(*ref_tensors, final_tensors(dir, o.job.steps), t);
  t.passed = t.max_relative_diff <= o.tolerance && out.final_state->step == ref_state.step &&
             out.final_state->sampler == ref_state.sampler;
  if (!t.passed)
    t.message =
        fmt::format("{} differs by {:.3g} (tolerance {:.3g})", t.worst_tensor, t.max_relative_diff, o.tolerance);
  return t;
}

}  // namespace

FaultSpec draw_trial_fault(uint64_t seed, int trial, int nproc, int64_t steps, int64_t every, bool shrink) {
  FaultSpec f;
  const auto below = [&](uint64_t j, int64_t n) {
    return static_cast<int64_t>(draw(seed, trial, j) % static_cast<uint64_t>(n));
  };
  f.rank = static_cast<int>(below(1, nproc));
  f.step = steps > 1 ? 1 + below(2, steps - 1) : 0;
  if (shrink) {
    f.kind = FaultKind::kLoseRank;
    return f;
  }
  std::vector<int64_t> saves;
  for (int64_t s = 1; s <= steps; ++s)
    if (is_checkpoint_step(s, every, steps)) saves.push_back(s);
  if (saves.empty() || below(0, 2) == 0) {
    f.kind = FaultKind::kKill;
    return f;
  }
  f.kind = FaultKind::kKillDuringCheckpoint;
  f.step = saves[static_cast<size_t>(below(3, static_cast<int64_t>(saves.size())))];
  f.phase = kPhases[below(4, std::size(kPhases))];
  // Only the shard phases run on every rank; the commit phases run on rank 0.
  if (f.phase != checkpoint::SavePhase::kMidShardWrite && f.phase != checkpoint::SavePhase::kAfterShardWrite)
    f.rank = 0;
  return f;
}

void check_proof_options(const ProofOptions& o) {
  if (o.nproc < 1) throw ConfigError("--nproc", std::to_string(o.nproc), "must be at least 1 worker");
  if (o.trials < 1) throw ConfigError("--trials", std::to_string(o.trials), "must be at least 1");
  if (o.checkpoint_every < 1)
    throw ConfigError("--checkpoint-every", std::to_string(o.checkpoint_every),
                      "must be at least 1: a resume needs checkpoints");
  if (o.job.steps < 2)
    throw ConfigError("--steps", std::to_string(o.job.steps), "must be at least 2 to kill a job in the middle");
  if (o.shrink && o.nproc < 2)
    throw ConfigError("--nproc", std::to_string(o.nproc), "must be at least 2 to lose a rank (--shrink)");
  if (!(o.tolerance >= 0)) throw ConfigError("--tolerance", std::to_string(o.tolerance), "must be >= 0");
}

ProofReport run_kill_resume_proof(const ProofOptions& o) {
  check_proof_options(o);

  ProofReport report;
  report.nproc = o.nproc;
  report.steps = o.job.steps;
  report.device = o.job.device;
  report.fault_seed = o.fault_seed;
  report.shrink = o.shrink;
  report.tolerance = o.tolerance;
  report.work_dir = o.work_dir;
  if (o.on_note)
    o.on_note("reference: " + std::to_string(o.nproc) + " workers, " + std::to_string(o.job.steps) +
              " steps, uninterrupted");
  const TrainOutcome ref = run_job(o, job_spec(o, o.work_dir / "reference", {}), report.reference_run);
  if (!ref.ok || !ref.final_state) throw RuntimeError("the uninterrupted reference run failed: " + ref.message);
  report.reference_hash = ref.final_state->combined_hex();
  std::optional<checkpoint::TrainingState> ref_tensors;
  if (o.shrink) ref_tensors = final_tensors(o.work_dir / "reference", o.job.steps);
  report.passed = true;
  for (int k = 0; k < o.trials; ++k) {
    TrialReport t;
    try {
      t = run_trial(o, k, *ref.final_state, ref_tensors);
    } catch (const Error& e) {
      t.trial = k;
      t.message = e.what();
    }
    if (o.on_note) o.on_note("trial " + std::to_string(k) + ": " + (t.passed ? "passed" : "FAILED: " + t.message));
    report.passed = report.passed && t.passed;
    report.trials.push_back(std::move(t));
  }
  if (o.sink) report.proof_id = o.sink->add_proof(report);
  return report;
}

std::string ProofReport::table() const {
  TextTable t({"trial", "rank killed", "step", "during checkpoint?", "restart latency", "steps lost",
               "final-state hash", shrink ? "within tolerance?" : "identical?"});
  for (const TrialReport& r : trials) {
    t.add(
        {std::to_string(r.trial), std::to_string(r.rank) + (shrink ? " (lost)" : ""), std::to_string(r.step),
         r.during_checkpoint ? "yes (" + r.phase + ")" : "no",
         r.restart_seconds ? units::format_seconds(*r.restart_seconds) : "-",
         r.steps_lost ? std::to_string(*r.steps_lost) : "-", r.final_hash.empty() ? "-" : r.final_hash,
         shrink ? (r.passed ? fmt::format("yes ({:.2g})", r.max_relative_diff) : "NO") : (r.identical ? "yes" : "NO")});
  }
  return t.str();
}

std::string ProofReport::headline() const {
  int ok = 0;
  for (const TrialReport& t : trials) ok += t.passed ? 1 : 0;
  if (shrink)
    return fmt::format(
        "kill-and-resume (elastic, {} -> {} workers): {}/{} trials within {:.2g} of the uninterrupted run", nproc,
        nproc - 1, ok, trials.size(), tolerance);
  return fmt::format("kill-and-resume ({} workers): {}/{} trials bit-identical to the uninterrupted run (hash {})",
                     nproc, ok, trials.size(), reference_hash);
}

json ProofReport::inputs() const {
  json j = {{"nproc", nproc},         {"steps", steps},          {"fault_seed", fault_seed},     {"shrink", shrink},
            {"tolerance", tolerance}, {"trials", trials.size()}, {"work_dir", work_dir.string()}};
  if (device != "cpu") j["device"] = device;  // cpu proofs keep their inputs as before
  return j;
}

json ProofReport::evidence() const {
  json rows = json::array();
  for (const TrialReport& t : trials) {
    json r = {{"trial", t.trial},
              {"fault", t.fault},
              {"rank", t.rank},
              {"step", t.step},
              {"during_checkpoint", t.during_checkpoint},
              {"phase", t.phase},
              {"completed", t.completed},
              {"final_hash", t.final_hash},
              {"identical", t.identical},
              {"passed", t.passed},
              {"message", t.message}};
    if (t.run) r["run"] = *t.run;
    if (t.restart_seconds) r["restart_seconds"] = *t.restart_seconds;
    if (t.steps_lost) r["steps_lost"] = *t.steps_lost;
    if (t.latency.detection_seconds) r["detection_seconds"] = *t.latency.detection_seconds;
    if (t.latency.teardown_seconds) r["teardown_seconds"] = *t.latency.teardown_seconds;
    if (t.latency.restart_seconds) r["spawn_rendezvous_seconds"] = *t.latency.restart_seconds;
    if (t.latency.state_load_seconds) r["state_load_seconds"] = *t.latency.state_load_seconds;
    if (t.latency.first_step_seconds) r["first_step_seconds"] = *t.latency.first_step_seconds;
    if (shrink) r["max_relative_diff"] = t.max_relative_diff, r["worst_tensor"] = t.worst_tensor;
    rows.push_back(std::move(r));
  }
  json e = {{"reference_hash", reference_hash}, {"trials", rows}, {"table", table()}};
  if (reference_run) e["reference_run"] = *reference_run;
  return e;
}

}  // namespace parlab::launch
