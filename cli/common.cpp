#include "cli/common.h"

#include "cli/checks.h"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "base/errors.h"
#include "strategy/io.h"

namespace parlab::cli {

void add_plan_inputs(CLI::App* cmd, PlanInputs& in, bool model_required) {
  auto* model = cmd->add_option(
      "--model,-m", in.model,
      "Model preset (" + fmt::format("{}", fmt::join(strategy::model_preset_names(), ", ")) + ") or a TOML file");
  auto* params = cmd->add_option("--params", in.params, "Plan a bare parameter count instead of a model (e.g. 7.5e9)")
                     ->each([&in](const std::string&) { in.params_given = true; });
  model->excludes(params);
  params->excludes(model);
  (void)model_required;
  cmd->add_option(
         "--cluster,-c", in.cluster,
         "Cluster preset (" + fmt::format("{}", fmt::join(strategy::cluster_preset_names(), ", ")) + ") or a TOML file")
      ->capture_default_str();
  cmd->add_option("--world,-n", in.world, "Number of devices (default: dp*tp*pp of --plan, else the cluster's)")
      ->each([&in](const std::string&) { in.world_given = true; });
  cmd->add_option("--plan,-p", in.plan,
                  "Plan as key=value pairs: dp, tp, pp, zero (0-3), mb, microbatches, gbs, "
                  "schedule (gpipe|1f1b|interleaved), v, recompute (none|selective|full), sp (on|off), "
                  "precision (fp32|mixed), optimizer (adam|sgd), bucket_mb");
}

Resolved load_inputs(const PlanInputs& in) {
  Resolved r;
  if (in.params_given)
    r.model = strategy::params_model(positive("--params", in.params, 1e15));
  else if (!in.model.empty())
    r.model = strategy::load_model(in.model);
  else
    throw ConfigError("--model", "(missing)", "give --model NAME|FILE or --params COUNT");
  const strategy::ClusterSpec base = strategy::load_cluster(in.cluster);
  const strategy::Plan parsed = strategy::parse_plan(in.plan);
  if (in.world_given && in.world < 1)
    throw ConfigError("--world", std::to_string(in.world), "must be a positive number of devices");
  int world = in.world;
  if (world == 0 && parsed.dp > 0) world = parsed.dp * parsed.tp * parsed.pp;
  if (world == 0) world = base.devices();
  r.cluster = strategy::with_world(base, world);
  r.world = world;
  r.plan = parsed;
  if (in.global_batch > 0) {
    if (parsed.was_given("gbs") && parsed.global_batch != in.global_batch)
      throw ConfigError("--gbs", std::to_string(in.global_batch),
                        "contradicts the plan's gbs=" + std::to_string(parsed.global_batch) + "; give one of them");
    r.plan.global_batch = in.global_batch;
    if (!parsed.was_given("gbs")) r.plan.given.push_back("gbs");
  }
  return r;
}

Resolved resolve_inputs(const PlanInputs& in) {
  Resolved r = load_inputs(in);
  r.plan = strategy::resolve(r.plan, r.model, r.world);
  strategy::validate(r.plan, r.model, r.cluster);
  return r;
}

void print_json(const nlohmann::json& j) { fmt::print("{}\n", j.dump(2)); }

}  // namespace parlab::cli
