#pragma once
// Simulated vs measured, from the database: for each worker count (and ZeRO stage) of an
// experiment, the latest completed measured run's step time (median of its steps, or over its
// rounds) with its spread beside the latest simulated and analytic ones, their speedups and each
// prediction's relative error -- marked when it is within the measurement's spread, where an
// error cannot be told from noise; with several ZeRO stages also the split and the measured
// peak memory per rank.
#include <optional>
#include <string>
#include <vector>

#include "db/results_store.h"

namespace parlab::experiments {

struct CompareRow {
  int world = 0;
  int zero = 0;  // the plan's ZeRO stage: rows of one world differ by it (the splits experiment)
  double global_batch = 0;
  std::optional<double> measured_peak_bytes;  // the measured run's largest per-rank peak (memory.max.total)
  std::optional<double> measured, simulated, analytic;  // step seconds
  // The measurement's spread (half the IQR of its steps, or of its rounds when larger) and, for
  // order-alternated rounds, the median of the paired speedups t1 / tW.
  std::optional<double> measured_spread, measured_speedup;
  std::optional<double> measured_others_cores;  // CPU other jobs used during the measurement, in cores
  std::optional<db::RunId> measured_run, simulated_run, analytic_run;
};

struct Comparison {
  std::string experiment;
  std::vector<CompareRow> rows;  // by world size, then ZeRO stage
  // Largest |prediction / measured - 1| over the rows that have both; nullopt without any.
  std::optional<double> worst_simulated_error, worst_analytic_error;
  std::string table() const;
};

// Throws ConfigError when the experiment is unknown or has no runs.
Comparison compare_experiment(db::ResultsStore& store, const std::string& experiment);

}  // namespace parlab::experiments
