#pragma once
// What the learner chose in the setup panel, as text exactly as typed, and what it resolves to
// through the strategy library (load_model / load_cluster / parse_plan / resolve / validate).
// The GUI adds no rules of its own: a bad value surfaces as the library's ConfigError, whose
// field names the input to mark ("plan.tp", "--model", "world").
#include <optional>
#include <string>
#include <vector>

#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::gui {

struct SetupInputs {
  std::string model = "lab-mlp";  // preset name or TOML path; ignored when params is set
  std::string params;             // a bare parameter count ("7.5e9"); empty: use `model`
  std::string cluster = "cpu-local";
  int workers = 2;
  // Plan keys (strategy/plan.h spelling) and their text; an empty value means "default".
  // Order is the setup panel's: dp tp pp zero mb microbatches gbs schedule v recompute sp precision.
  std::vector<std::pair<std::string, std::string>> plan;

  std::string value(const std::string& key) const;
  void set(const std::string& key, const std::string& text);
  // "tp=2,zero=1": the keys with a value, as parse_plan reads them.
  std::string plan_text() const;
  // The model as the CLI names it (--model X or the bare count).
  std::string model_label() const;
  // The model and cluster as a child process started elsewhere must name them: a file the lab
  // read relative to its own folder as an absolute path, a preset's name as it is.
  std::string model_for_child() const;
  std::string cluster_for_child() const;
};

// The plan keys the setup panel offers, in its order.
const std::vector<std::string>& setup_plan_keys();

struct SetupError {
  std::string field;    // the ConfigError's field: "plan.tp", "world", "--model", ...
  std::string message;  // its whole one-line message
};

struct LabSetup {
  SetupInputs inputs;
  strategy::ModelSpec model;
  strategy::ClusterSpec base_cluster;  // as loaded (its full size)
  strategy::ClusterSpec cluster;       // resized to the world (with_world)
  strategy::Plan plan;                 // resolved and validated
  int world() const { return plan.world(); }
};

struct SetupResult {
  std::optional<LabSetup> setup;
  std::optional<SetupError> error;
  // When the model and cluster loaded but the plan did not: the ranges the panel still needs.
  std::optional<strategy::ModelSpec> model;
  std::optional<strategy::ClusterSpec> base_cluster;
};

// The most workers the panel offers: a cluster of worker processes sharing this host's cores
// (cpu-local) is the size its file says; any other cluster description is a node that is
// repeated (strategy::with_world), up to kMaxWorkers devices.
inline constexpr int kMaxWorkers = 4096;
int max_workers(const strategy::ClusterSpec& cluster);

// Never throws: every failure comes back as SetupError.
SetupResult resolve_setup(const SetupInputs& in);

// The same split at another worker count, the way `experiment run` scales a plan: dp becomes
// workers / (tp * pp), everything else as given. Throws ConfigError when it does not apply.
strategy::Plan plan_at_workers(const LabSetup& setup, int workers, strategy::ClusterSpec* cluster_out = nullptr);

// Worker counts for the speedup series: powers of two from tp*pp up to the larger of the
// current world and the cluster file's own size, and the current world; only those where the
// split is valid.
std::vector<int> series_workers(const LabSetup& setup);

}  // namespace parlab::gui
