// parlab proof kill-resume: kill a worker at a random moment (sometimes inside a checkpoint
// write), let the supervisor resume the job, and show that it ends in the same training state as
// the uninterrupted run (launch::run_kill_resume_proof). Exits non-zero if any trial differs.
#include <fmt/core.h>

#include <optional>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "runtime/device/device.h"
#include "record/proof_recorder.h"
#include "runtime/launch/kill_resume_proof.h"
#include "base/errors.h"

namespace parlab::cli {
namespace {

struct ProofCliOptions {
  launch::ProofOptions proof;
  std::optional<uint64_t> fault_seed;
  double timeout_seconds = 30;
  std::string db;
  bool json = false;
};

void run_kill_resume(ProofCliOptions& o) {
  launch::ProofOptions& p = o.proof;
  p.job.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  // Deterministic by default: the trials follow from the inputs; --fault-seed explores others.
  p.fault_seed = o.fault_seed.value_or(p.job.seed + 1);
  launch::check_proof_options(p);
  if (!o.json) {
    p.on_note = [](const std::string& line) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
    };
    fmt::print("Kill-and-resume proof: {} workers, {} steps, checkpoint every {}, {} trial(s), fault seed {}{}\n",
               p.nproc, p.job.steps, p.checkpoint_every, p.trials, p.fault_seed,
               p.shrink ? ", each trial loses a rank (elastic)" : "");
    fmt::print(
        "Replay a trial with: parlab train --nproc {} --model {}{} --steps {} --seed {} --checkpoint-every {} "
        "--max-restarts 1{} --fault <its fault>\n\n",
        p.nproc, p.job.model,
        (p.job.plan.empty() ? "" : " --plan " + p.job.plan) +
            (p.job.optimizer.empty() ? "" : " --optimizer " + p.job.optimizer) +
            (p.job.data_size > 0 ? " --data-size " + std::to_string(p.job.data_size) : ""),
        p.job.steps, p.job.seed, p.checkpoint_every, p.shrink ? " --min-nproc " + std::to_string(p.nproc - 1) : "");
  }
  std::optional<db::ResultsStore> store;
  std::optional<record::ProofRecorder> recorder;
  if (!o.db.empty()) {
    store.emplace(open_results("--db", o.db, /*read_only=*/false));
    p.sink = &recorder.emplace(*store);
  }
  const launch::ProofReport report = launch::run_kill_resume_proof(p);
  if (report.proof_id && !o.json)
    fmt::print("Recorded proof {} on run {} (and {} trial run(s)) in {}\n", *report.proof_id,
               report.reference_run.value_or(0), report.trials.size(), o.db);
  if (o.json) {
    print_json({{"passed", report.passed},
                {"headline", report.headline()},
                {"inputs", report.inputs()},
                {"evidence", report.evidence()}});
  } else {
    fmt::print("\n{}\n{}\n", report.table(), report.headline());
  }
  if (!report.passed) throw CLI::RuntimeError(1);
}

}  // namespace

void add_proof_command(CLI::App& app) {
  CLI::App* proof = app.add_subcommand("proof", "Run a checked claim end to end and print its evidence");
  proof->require_subcommand(1);
  auto o = std::make_shared<ProofCliOptions>();
  CLI::App* kr = proof->add_subcommand(
      "kill-resume", "Kill a worker at random (sometimes mid-checkpoint), resume, compare with the uninterrupted run");
  kr->footer(
      "Examples:\n"
      "  parlab proof kill-resume --nproc 2 --model lab-mlp --steps 20 --trials 3\n"
      "  parlab proof kill-resume --nproc 2 --model tiny.toml --steps 12 --shrink   # lose a rank, 2 -> 1 workers\n"
      "Same world size: the final parameters and optimizer state must be bit-identical (xxh3_64 of every\n"
      "tensor). --shrink: equal within --tolerance (max |a - b| / max |reference| per tensor).");
  launch::TrainJob& j = o->proof.job;
  j.steps = 20;
  kr->add_option("--nproc,-n", o->proof.nproc, "Worker processes")->capture_default_str();
  kr->add_option("--model,-m", j.model, "Model preset or TOML file (kind = \"mlp\")")->capture_default_str();
  kr->add_option("--cluster,-c", j.cluster, "Cluster preset or TOML file")->capture_default_str();
  kr->add_option("--plan,-p", j.plan, "Plan key=value pairs");
  kr->add_option("--steps", j.steps, "Optimizer steps per run")->capture_default_str();
  kr->add_option("--trials", o->proof.trials, "Killed runs to compare")->capture_default_str();
  kr->add_option("--checkpoint-every", o->proof.checkpoint_every, "Checkpoint interval, steps")->capture_default_str();
  kr->add_option("--seed", j.seed, "Training seed")->capture_default_str();
  kr->add_option("--fault-seed", o->fault_seed, "Seed of the random faults (default: --seed + 1); printed for replay");
  kr->add_option("--optimizer", j.optimizer, "adam | sgd")->check(CLI::IsMember({"adam", "sgd"}));
  kr->add_option("--data-size", j.data_size, "Synthetic dataset samples");
  kr->add_option("--device", j.device, "cpu | cuda (each worker binds LOCAL_RANK's GPU; DDP)")->capture_default_str();
  kr->add_flag("--shrink", o->proof.shrink, "Lose a rank instead (elastic restart with nproc - 1 workers)");
  kr->add_option("--tolerance", o->proof.tolerance, "--shrink: largest relative difference allowed")
      ->capture_default_str();
  kr->add_option("--work-dir", o->proof.work_dir, "Run directories of the reference and the trials")
      ->capture_default_str();
  kr->add_option("--timeout", o->timeout_seconds, "Per-collective and rendezvous timeout, seconds")
      ->capture_default_str();
  kr->add_option("--db", o->db, "Record the proof (and its reference run) in this results database");
  kr->add_flag("--json", o->json, "Print the report as JSON");
  kr->callback([o, kr] {
    seconds_flag("--timeout", o->timeout_seconds);
    refuse_negative_unsigned(*kr, "--seed");
    refuse_negative_unsigned(*kr, "--fault-seed");
    at_least("--tolerance", o->proof.tolerance, 0, 1);
    if (given(*kr, "--data-size") && o->proof.job.data_size < 1)
      throw ConfigError("--data-size", std::to_string(o->proof.job.data_size),
                        "must be at least one global batch of samples");
    if (given(*kr, "--work-dir")) writable_directory("--work-dir", o->proof.work_dir);
    device::require_available(device::parse_kind(o->proof.job.device));
    run_kill_resume(*o);
  });
}

}  // namespace parlab::cli
