// --verify: the cheap checks re-run by the grader (see verify.h).
#include "rubric/verify.h"

#include <fmt/core.h>

#include <cmath>

#include "rubric/checks.h"
#include "runtime/launch/kill_resume_proof.h"
#include "runtime/launch/process.h"
#include "rubric/check_util.h"
#include "base/errors.h"
#include "strategy/ledger.h"
#include "base/units.h"

namespace parlab::rubric {
namespace {

using nlohmann::json;

const Proof* by_id(const Evidence& e, std::int64_t id) {
  for (const Proof& p : e.proofs)
    if (p.row.id == id) return &p;
  return nullptr;
}

void mark(CriterionResult& r, bool ok, const std::string& why) {
  r.reproduced = r.reproduced.value_or(true) && ok;
  r.integrity.push_back(std::string(ok ? "verified: " : "does not reproduce: ") + why);
  if (!ok) r.detail = "the grader's re-run disagrees with the recorded evidence: " + why;
}

// The re-run could not start here (a model file this machine lacks, no binary): said, and the
// evidence keeps its verdict; only a re-run that disagrees takes points away.
void cannot_rerun(CriterionResult& r, const std::string& why) { r.integrity.push_back("not re-run here: " + why); }

void verify_seed(const Proof& p, CriterionResult& r) {
  const json& in = p.inputs;
  strategy::RuleInputs ri;
  ri.params_bytes = in.value("params_gb", 0.0) * units::kGB;
  ri.grads_bytes = in.value("grads_gb", 0.0) * units::kGB;
  ri.optimizer_bytes = in.value("optimizer_gb", 0.0) * units::kGB;
  ri.activations_bytes = in.value("activations_gb", 0.0) * units::kGB;
  ri.largest_layer_bytes = in.value("largest_layer_gb", 0.0) * units::kGB;
  ri.device_bytes = in.value("device_gb", 0.0) * units::kGB;
  const strategy::RuleVerdict v = strategy::apply_rule(ri);
  const json& ev = p.evidence;
  const bool same = std::fabs(v.replica_bytes / units::kGB - ev.value("replica_gb", -1.0)) < 1e-9 &&
                    v.ddp_fits == ev.value("ddp_fits", !v.ddp_fits) &&
                    v.shard_model_state == ev.value("shard_model_state", !v.shard_model_state) &&
                    v.tensor_split_needed == ev.value("tensor_split_needed", !v.tensor_split_needed) &&
                    v.pipeline_candidate == ev.value("pipeline_candidate", !v.pipeline_candidate);
  mark(r, same,
       fmt::format("proof #{}: the ledger rule on its inputs gives replica {:g} GB, DDP fits {}", p.row.id,
                   v.replica_bytes / units::kGB, v.ddp_fits));
}

void verify_simulation(const Proof& p, CriterionResult& r) {
  try {
    const std::string a = detail::resimulate(p.inputs), b = detail::resimulate(p.inputs);
    mark(r, a == b && a == p.evidence.value("output_digest", std::string()),
         fmt::format("proof #{}: simulated twice more, {}", p.row.id, a == b ? "identical" : "the two runs differ"));
  } catch (const Error& e) {
    cannot_rerun(r, fmt::format("proof #{}: {}", p.row.id, e.what()));
  }
}

// The reference and trial 0 again, from the recorded inputs and the reference run's row.
void verify_kill_resume(const Evidence& e, const Proof& p, const GradeOptions& o, CriterionResult& r) {
  const db::RunRecord* run = p.row.run_id ? e.run(*p.row.run_id) : nullptr;
  if (!run) return mark(r, false, "the proof names no reference run to re-run");
  if (o.parlab_bin.empty()) return cannot_rerun(r, "no parlab binary to start workers with");
  launch::ProofOptions po;
  po.job.model = detail::locate_model(run->model);
  po.job.cluster = run->cluster;
  po.job.seed = run->seed;
  po.job.steps = p.inputs.value("steps", 0);
  po.nproc = p.inputs.value("nproc", 2);
  po.fault_seed = p.inputs.value("fault_seed", 1);
  po.trials = 1;
  po.worker_command = launch::worker_command_for(o.parlab_bin);
  po.work_dir = (o.work_dir.empty() ? std::filesystem::temp_directory_path() / "parlab-grade-verify" : o.work_dir) /
                ("proof-" + std::to_string(p.row.id));
  po.on_note = o.progress;
  const auto params = e.params.count(run->id) ? e.params.at(run->id) : std::map<std::string, std::string>{};
  po.job.plan = params.count("plan_text") ? params.at("plan_text") : "";
  try {
    po.checkpoint_every = params.count("checkpoint_every") ? std::stoll(params.at("checkpoint_every")) : 5;
  } catch (const std::exception&) {
    po.checkpoint_every = 5;
  }
  try {  // the batch the run pinned (runs recorded before it was a parameter carry it as gbs= in plan_text)
    po.job.global_batch = params.count("global_batch") ? std::stoll(params.at("global_batch")) : 0;
  } catch (const std::exception&) {
    po.job.global_batch = 0;
  }
  try {
    const launch::ProofReport rep = launch::run_kill_resume_proof(po);
    const json trials = p.evidence.value("trials", json::array());
    const std::string want_ref = p.evidence.value("reference_hash", std::string());
    const std::string want_trial = trials.empty() ? "" : trials[0].value("final_hash", std::string());
    const bool ok = rep.reference_hash == want_ref && !rep.trials.empty() && rep.trials[0].final_hash == want_trial;
    mark(r, ok,
         fmt::format("proof #{}: reference hash {} (recorded {}), trial 0 {} (recorded {})", p.row.id,
                     rep.reference_hash, want_ref, rep.trials.empty() ? "-" : rep.trials[0].final_hash, want_trial));
  } catch (const ConfigError& err) {
    cannot_rerun(r, fmt::format("proof #{}: {}", p.row.id, err.what()));
  } catch (const Error& err) {
    mark(r, false, fmt::format("proof #{}: the re-run failed: {}", p.row.id, err.what()));
  }
}

}  // namespace

void verify_report(const Rubric& rubric, const Evidence& e, const GradeOptions& o, Report& report) {
  for (size_t i = 0; i < rubric.criteria.size(); ++i) {
    const Criterion& c = rubric.criteria[i];
    CriterionResult& r = report.criteria[i];
    if (r.proofs.empty() || r.status != Status::kPassed) continue;
    const Proof* latest = by_id(e, r.proofs.back());
    if (!latest) continue;
    if (c.check == "seed_worked_example")
      verify_seed(*latest, r);
    else if (c.check == "deterministic_simulation")
      for (std::int64_t id : r.proofs) verify_simulation(*by_id(e, id), r);
    else if (c.check == "kill_resume")
      verify_kill_resume(e, *latest, o, r);
  }
}

}  // namespace parlab::rubric
