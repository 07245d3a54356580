#pragma once
// Turning estimates, simulations and measurements into database rows, the same way for every
// experiment kind.
#include <filesystem>

#include "db/results_store.h"
#include "experiments/lib/runner.h"
#include "sim/result.h"
#include "sim/simulate.h"
#include "strategy/cost_model.h"
#include "strategy/plan.h"

namespace parlab::experiments {

// A model or cluster reference from an experiment file: a preset name, or a path that is taken
// relative to the experiment file's folder when it exists there.
std::string resolve_ref(const Context& ctx, const std::string& ref);

// A fresh folder for one run's files: <work_dir>/<experiment>/<label>.
std::filesystem::path run_dir(const Context& ctx, const std::string& label);

db::NewRun new_run(const Context& ctx, db::RunKind kind, const std::string& model, const std::string& cluster,
                   const strategy::Plan& plan, uint64_t seed);
// Per-rank timings as step 0 plus the run's metrics (step_seconds, samples_per_s, mfu, ...).
void record_estimate(db::ResultsStore& store, db::RunId run, const strategy::StepEstimate& e);
void record_sim(db::ResultsStore& store, db::RunId run, const sim::SimResult& r);
// A deterministic_simulation proof: the simulation's inputs (the model, `cluster` as TOML, the
// plan, the options) and the digest of its JSON output. The grader re-simulates from these and
// compares the bytes (same inputs, same output is the simulator's contract).
void record_simulation_proof(Context& ctx, db::RunId run, const std::string& model_ref,
                             const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                             const strategy::Plan& plan, const sim::SimOptions& so, const sim::SimResult& r);

}  // namespace parlab::experiments
