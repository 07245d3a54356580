#pragma once
// Shared plumbing of the CLI subcommands: the --model/--cluster/--world/--plan options every
// planning command takes, and small output helpers. Commands stay thin; the work is in libraries.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"
#include "base/text_table.h"

namespace parlab::cli {

struct PlanInputs {
  std::string model;
  double params = 0;          // --params: a bare parameter count instead of --model
  bool params_given = false;  // --params was on the command line (then it must be a count > 0)
  std::string cluster = "dgx-a100";
  int world = 0;             // 0: from --plan (dp*tp*pp) when dp is given, else the cluster's devices
  bool world_given = false;  // --world was on the command line (then it must be >= 1)
  std::string plan;          // key=value list
  int64_t global_batch = 0;  // a subcommand's --gbs: the plan's gbs (0: the plan text's, else the plan policy's)
};

// Adds --model, --params, --cluster, --world, --plan to a subcommand.
void add_plan_inputs(CLI::App* cmd, PlanInputs& in, bool model_required = true);

struct Resolved {
  strategy::ModelSpec model;
  strategy::ClusterSpec cluster;  // sized to the world
  strategy::Plan plan;            // resolved and validated
  int world = 0;
};
// Loads presets/files, sizes the cluster, resolves and validates the plan. Throws ConfigError.
Resolved resolve_inputs(const PlanInputs& in);
// Loads model and cluster and the world size only (the planner searches the plan).
Resolved load_inputs(const PlanInputs& in);

void print_json(const nlohmann::json& j);
// "True"/"False", as the seed's Python prints them.
inline const char* py_bool(bool b) { return b ? "True" : "False"; }

using Table = TextTable;

// Registration of every subcommand (one cmd_*.cpp each).
void add_plan_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_scaling_command(CLI::App& app);
void add_experiment_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_analyze_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_proof_command(CLI::App& app);
void add_runbook_command(CLI::App& app);
void add_grade_command(CLI::App& app);
void add_validate_command(CLI::App& app);

// "64K", "25MB", "1GiB", "1e6" -> bytes. Throws ConfigError naming `field`.
double parse_bytes(const std::string& field, const std::string& text);

}  // namespace parlab::cli
