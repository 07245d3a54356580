#pragma once
// Simulated vs measured, from the database: one row per plan of an experiment (keyed by the whole
// plan: worker count, split, schedule, microbatching -- a splits experiment shows every split),
// the latest completed measured run's step time (median of its steps, or over its rounds) with
// its spread beside the latest simulated and analytic ones, their speedups (strategy/measures.h:
// paired by round where rounds were recorded) and each prediction's relative error -- marked
// when it is within the measurement's spread, where an error cannot be told from noise; with
// several splits also the split and the measured peak memory per rank.
#include <optional>
#include <string>
#include <vector>

#include "db/results_store.h"

namespace parlab::experiments {

struct CompareRow {
  std::string plan;   // the whole plan (strategy::Plan::to_string): the row's key
  std::string split;  // what a reader tells rows apart by: "ZeRO-3 x2", "PP 2 x DP 2 1f1b m8" (the whole plan
                      // where two rows of one worker count would read the same)
  int world = 0;
  int zero = 0;
  double global_batch = 0;
  std::vector<double> measured_rounds;                  // per-round step times, when the run closed a series
  std::optional<double> measured_peak_bytes;            // the measured run's largest per-rank peak (memory.max.total)
  std::optional<double> measured, simulated, analytic;  // step seconds
  // The measurement's spread (half the IQR of its steps, or of its rounds when larger) and, from
  // a database written before rounds were recorded one by one, the paired speedup the run kept.
  std::optional<double> measured_spread, recorded_speedup;
  std::optional<double> measured_others_cores;  // CPU other jobs used during the measurement, in cores
  std::optional<db::RunId> measured_run, simulated_run, analytic_run;
  // Per-round predictions, where each round predicted afresh (the splits experiment's rounds).
  std::vector<double> simulated_rounds, analytic_rounds;
  // Each prediction's relative error (strategy/measures.h: paired by round where both sides
  // recorded rounds); nullopt without the prediction or the measurement.
  std::optional<double> simulated_error() const;
  std::optional<double> analytic_error() const;
};

struct Comparison {
  std::string experiment;
  std::vector<CompareRow> rows;  // by world size, then in the order the plans were first run
  // The measured speedup of row i against the first row (strategy::speedup over their rounds).
  std::optional<double> measured_speedup(size_t i) const;
  // Largest |prediction / measured - 1| over the rows that have both; nullopt without any.
  std::optional<double> worst_simulated_error, worst_analytic_error;
  std::string table() const;
};

// Throws ConfigError when the experiment is unknown or has no runs.
Comparison compare_experiment(db::ResultsStore& store, const std::string& experiment);

// How a plan is named in a row: its short name, plus what tells pipelines apart (schedule,
// chunks, microbatches), sequence parallelism and recomputation. From the plan's JSON as the database holds it.
std::string split_label(const nlohmann::json& plan);

}  // namespace parlab::experiments
