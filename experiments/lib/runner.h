#pragma once
// The batch runner: runs experiment definitions one after another, records every result in the
// results database, prints each experiment's report and a summary. A failed experiment is
// recorded as failed and the batch goes on (nothing the user asked for is lost).
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/results_store.h"
#include "experiments/lib/spec.h"

namespace parlab::experiments {

struct RunnerOptions {
  std::filesystem::path work_dir = "results/runs";  // run directories of measured runs
  std::string parlab_bin;                           // the binary that workers re-execute
  // Progress lines ("[2/4] scaling_1_2_4: measured, 2 workers, step 6/10"); default: stderr.
  std::function<void(const std::string&)> progress;
};

// What one experiment produced.
struct Outcome {
  std::string name;
  std::string kind;
  bool ok = false;       // ran, and any proof it makes passed
  std::string headline;  // one line for the summary
  std::string report;    // the full text report (tables)
  std::string error;     // when it could not run
  db::ExperimentId experiment = 0;
  std::vector<db::RunId> runs;
  double seconds = 0;
};

// One experiment kind's implementation (one file each under experiments/lib/kind_*.cpp).
class Context {
 public:
  Context(const ExperimentSpec& spec, db::ResultsStore& store, db::ExperimentId id, const RunnerOptions& options)
      : spec(spec), store(store), experiment(id), options(options) {}
  void progress(const std::string& line) const;

  const ExperimentSpec& spec;
  db::ResultsStore& store;
  db::ExperimentId experiment;
  const RunnerOptions& options;
  Outcome* outcome = nullptr;
};

Outcome run_experiment(const ExperimentSpec& spec, db::ResultsStore& store, const RunnerOptions& options);

// Kind implementations (kind_*.cpp).
void run_ledger(Context& ctx, const LedgerTask& task);
void run_scaling(Context& ctx, const ScalingTask& task);
void run_scaling_lab(Context& ctx, const ScalingLabTask& task);
void run_equivalence(Context& ctx, const EquivalenceTask& task);
void run_kill_resume(Context& ctx, const KillResumeTask& task);
void run_planner(Context& ctx, const PlannerTask& task);
void run_splits(Context& ctx, const SplitsTask& task);
void run_decide(Context& ctx, const DecideTask& task);
void run_hang_drill(Context& ctx, const HangDrillTask& task);  // kind_drills.cpp
void run_elastic(Context& ctx, const ElasticTask& task);       // kind_drills.cpp
// The completeness of a run's final checkpoint as a proof row ("checkpoint_complete"): every
// parameter with its optimizer buffers, the step, sampler, RNG and optimizer counters, verified
// against the manifest's checksums (kind_drills.cpp).
void record_checkpoint_completeness(Context& ctx, const std::filesystem::path& run_dir, int64_t steps,
                                    std::optional<db::RunId> run);

}  // namespace parlab::experiments

namespace parlab::experiments {

// A run in the database that is marked failed unless complete() is called: a kind that throws
// half-way leaves its rows and an honest status.
class RunGuard {
 public:
  RunGuard(db::ResultsStore& store, const db::NewRun& run, Outcome* outcome)
      : store_(store), id_(store.begin_run(run)) {
    if (outcome) outcome->runs.push_back(id_);
  }
  RunGuard(const RunGuard&) = delete;
  RunGuard& operator=(const RunGuard&) = delete;
  ~RunGuard() {
    if (done_) return;
    try {
      store_.mark_run_status(id_, db::RunStatus::kFailed,
                             failure_.empty() ? "the experiment stopped before this run finished" : failure_);
    } catch (...) {}
  }
  db::RunId id() const { return id_; }
  void complete() {
    store_.mark_run_status(id_, db::RunStatus::kCompleted);
    done_ = true;
  }
  void fail(const std::string& why) { failure_ = why; }

 private:
  db::ResultsStore& store_;
  db::RunId id_;
  bool done_ = false;
  std::string failure_;
};

}  // namespace parlab::experiments
