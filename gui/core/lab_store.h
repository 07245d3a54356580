#pragma once
// The lab's reads and writes of the results DB (db::ResultsStore): measured points for the
// speedup view, predictions, and finding the run a child process recorded. One short-lived
// store per call: the workers write to the same file from their own processes.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"
#include "gui/core/lab_setup.h"

namespace parlab::gui {

struct MeasuredPoint {
  db::RunId run = 0;
  double step_seconds = 0;               // the run's recorded step time (median of its steps, or over its rounds)
  std::optional<double> spread_seconds;  // its spread (half the interquartile range), when recorded
  double global_batch = 0;
  std::vector<double> rounds;  // per-round step times (strategy::round_steps), when recorded
};

// The newest completed measured run per world size whose model, cluster and split (tp, pp,
// zero, mb and the global batch the series uses at that world) match `setup`.
std::map<int, MeasuredPoint> measured_points(const std::string& db_path, const LabSetup& setup);

// The newest run that recorded `run_dir` as its run directory (how a child `parlab train` run
// is found after it exits).
std::optional<db::RunRecord> run_with_run_dir(const std::string& db_path, const std::string& run_dir);

db::NewPrediction prediction_for(const LabSetup& setup, int workers, double predicted, const std::string& reason,
                                 db::RunKind source = db::RunKind::kSimulated);

}  // namespace parlab::gui
