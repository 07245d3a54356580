#pragma once
// The cluster a plan of a workload is predicted on, on this machine: one answer for every
// experiment kind that predicts and measures (scaling, splits, decide), so a split is predicted
// with the same models as a worker count.
//
// On a calibrated cpu-local (a calibration `parlab calibrate` made, stored beside the TOML) and the
// lab MLP: compute and memory rates from a profile of the plan's own rank shape (its TP slice,
// its pipeline stage, its microbatch and precision) run by as many processes as the plan has
// workers, in lockstep (calibrate_profile.h); each profile is made once per experiment and shape;
// the link from the all-reduce fit of that many ranks. Any other cluster: the calibration's
// GEMM-rate grid where one is stored, else the preset as written. `note` says which.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "experiments/lib/calibrate.h"
#include "experiments/lib/calibrate_profile.h"
#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::experiments {

struct PredictionCluster {
  strategy::ClusterSpec recorded;  // as a proof records it (cluster_to_toml), before sizing
  strategy::ClusterSpec cluster;   // the same sized to the plan's world (strategy::with_world)
  std::string note;                // the compute model used, in one sentence
};

class WorkloadRates {
 public:
  // `progress` gets a line before each profile (they take a second or two each).
  WorkloadRates(const strategy::ClusterSpec& base, const strategy::ModelSpec& model,
                std::function<void(const std::string&)> progress = {});

  // The cluster `plan` (resolved, on `world` workers) is predicted on. Its measured rates are
  // rounded as the recorded TOML keeps them (10 significant digits), so a grader re-simulating
  // from a proof gets the same bytes.
  PredictionCluster for_plan(const strategy::Plan& plan, int world);

  // Whether compute comes from workload profiles (a calibrated cpu-local and the lab MLP).
  bool profiles() const { return profiles_; }

  // Measures the links of `world` ranks again now (calibrate.h, measure_links) and prices the
  // plans of that many workers with them from here on, instead of the stored calibration's: an
  // experiment in rounds calls it in each round, for each worker count it predicts, as each round
  // profiles its compute afresh. Nothing without profiles or below 2 ranks. `quick`: fewer sizes
  // and repeats (tests).
  void measure_links_now(int world, bool quick = false);

 private:
  const WorkloadProfile& profile(const strategy::Plan& plan, int world);

  strategy::ClusterSpec base_;
  strategy::ModelSpec model_;
  std::function<void(const std::string&)> progress_;
  std::optional<StoredCalibration> stored_;
  bool profiles_ = false;
  // (microbatch, tp, pp, precision, processes, bf16 copies per pass, weight-gradient group,
  //  microbatches, schedule) -> profile
  std::map<std::tuple<int64_t, int, int, int, int, bool, int, int64_t, int>, WorkloadProfile> cache_;
  std::map<int, std::string> links_note_;  // ranks -> how their links were measured again (none: not)
};

}  // namespace parlab::experiments
