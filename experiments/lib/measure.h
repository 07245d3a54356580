#pragma once
// Measured runs for experiments: a plan trained for real by Gloo worker processes, its timings
// recorded in the results database.
#include <filesystem>
#include <string>

#include "experiments/lib/runner.h"
#include "strategy/plan.h"

namespace parlab::experiments {

struct MeasureRequest {
  std::string model;
  strategy::Plan plan;  // resolved; dp x tp x pp workers
  int steps = 10;
  uint64_t seed = 1;
  std::filesystem::path work_dir;
  std::string parlab_bin;
};

struct MeasureResult {
  double step_seconds = 0;  // mean over the measured steps (the first is a warm-up)
  db::RunId run = 0;
};

MeasureResult measure_plan(Context& ctx, const MeasureRequest& request);

}  // namespace parlab::experiments
