// parlab plan: "find what cannot fit". The memory ledger of a plan, per pipeline stage, beside
// the seed's rule baseline and the parallelism candidates it proposes.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>

#include "cli/common.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "strategy/ledger.h"
#include "strategy/units.h"

namespace parlab::cli {
namespace {

struct PlanOptions {
  PlanInputs in;
  std::string ledger_gb;  // the seed's hand ledger: params=28,grads=28,...
  double device_gb = 0;
  bool json = false;
};

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / units::kGB); }

// --ledger-gb params=28,grads=28,optimizer=56,activations=18,largest-layer=6
strategy::RuleInputs parse_ledger_gb(const std::string& text, double device_gb) {
  strategy::RuleInputs in;
  bool seen[5] = {};
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    pos = comma + 1;
    if (item.empty()) continue;
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw ConfigError("--ledger-gb", item, "expected key=GB pairs: params, grads, optimizer, activations, largest-layer");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v))
      throw ConfigError("--ledger-gb " + key, value, "must be a number of GB");
    if (v < 0) throw ConfigError("--ledger-gb " + key, value, "must be >= 0");
    const double bytes = v * units::kGB;
    int idx = -1;
    if (key == "params" || key == "parameters") in.params_bytes = bytes, idx = 0;
    else if (key == "grads" || key == "gradients") in.grads_bytes = bytes, idx = 1;
    else if (key == "optimizer") in.optimizer_bytes = bytes, idx = 2;
    else if (key == "activations") in.activations_bytes = bytes, idx = 3;
    else if (key == "largest-layer" || key == "largest_layer") in.largest_layer_bytes = bytes, idx = 4;
    else throw ConfigError("--ledger-gb " + key, value, "unknown key; allowed: params, grads, optimizer, activations, largest-layer");
    seen[idx] = true;
  }
  const char* names[] = {"params", "grads", "optimizer", "activations", "largest-layer"};
  for (int i = 0; i < 5; ++i)
    if (!seen[i]) throw ConfigError(std::string("--ledger-gb ") + names[i], "(missing)", "all five of params, grads, optimizer, activations, largest-layer are needed");
  if (!(device_gb > 0)) throw ConfigError("--device-gb", fmt::format("{}", device_gb), "must be a positive number of GB");
  in.device_bytes = device_gb * units::kGB;
  return in;
}

void print_rule(const strategy::RuleInputs& in, const strategy::RuleVerdict& v) {
  // The seed's parallelism_budget.py, line for line.
  fmt::print("DDP fits: {}\n", py_bool(v.ddp_fits));
  fmt::print("shard model state: {}\n", py_bool(v.shard_model_state));
  fmt::print("tensor split needed: {}\n", py_bool(v.tensor_split_needed));
  fmt::print("pipeline candidate: {}\n", py_bool(v.pipeline_candidate));
  fmt::print("estimated replica GB: {:g}\n", v.replica_bytes / units::kGB);
  fmt::print("blocker: {}\n", v.blocker);
  fmt::print("candidates: {}\n", fmt::join(v.candidates, ", "));
  (void)in;
}

nlohmann::json seed_json(const strategy::RuleInputs& in, const strategy::RuleVerdict& v) {
  strategy::MemoryLedger replica;
  replica.params_bytes = in.params_bytes;
  replica.grads_bytes = in.grads_bytes;
  replica.optimizer_bytes = in.optimizer_bytes;
  replica.activations_bytes = in.activations_bytes;
  replica.device_bytes = in.device_bytes;
  return {{"ranks", {strategy::to_json(replica)}}, {"fits", replica.fits()}, {"rule", strategy::to_json(in, v)}};
}

void run_seed_ledger(const PlanOptions& o) {
  const auto in = parse_ledger_gb(o.ledger_gb, o.device_gb);
  const auto v = strategy::apply_rule(in);
  if (o.json) return print_json(seed_json(in, v));
  Table t({"component", "GB"});
  t.add({"parameters", fmt::format("{:g}", in.params_bytes / units::kGB)});
  t.add({"gradients", fmt::format("{:g}", in.grads_bytes / units::kGB)});
  t.add({"optimizer state", fmt::format("{:g}", in.optimizer_bytes / units::kGB)});
  t.add({"activations", fmt::format("{:g}", in.activations_bytes / units::kGB)});
  t.add({"replica total", fmt::format("{:g}", v.replica_bytes / units::kGB)});
  t.add({"largest layer", fmt::format("{:g}", in.largest_layer_bytes / units::kGB)});
  t.add({"device", fmt::format("{:g}", in.device_bytes / units::kGB)});
  fmt::print("Memory ledger (GB = 1e9 bytes)\n{}\n", t.str());
  print_rule(in, v);
}

void print_ledger(const Resolved& r, const std::vector<strategy::MemoryLedger>& stages) {
  const auto& m = r.model;
  const auto& c = r.cluster;
  if (m.has_layers())
    fmt::print("Model    {} ({}): {} parameters, {} layers, hidden {}, largest layer {} parameters\n",
               m.name, m.kind_name(), units::format_count(m.total_params()), m.layers, m.hidden,
               units::format_count(double(m.largest_layer_params())));
  else
    fmt::print("Model    a bare parameter count: {} parameters\n", units::format_count(m.param_count));
  fmt::print("Cluster  {}: {} node(s) x {} {} ({} = {:.0f} GiB each)\n", c.name, c.nodes, c.devices_per_node,
             c.device.name, units::format_bytes(c.device.memory_bytes), c.device.memory_bytes / units::kGiB);
  fmt::print("Plan     {}  [{}]\n", r.plan.short_name(), r.plan.to_string());
  fmt::print("         global batch {} = microbatch {} x {} microbatches x dp {}\n\n", r.plan.global_batch,
             r.plan.microbatch, r.plan.microbatches, r.plan.dp);

  Table t({"stage", "rank", "params", "grads", "optimizer", "activations", "temp", "total", "device", "fits"});
  for (const auto& l : stages)
    t.add({std::to_string(l.stage), std::to_string(l.rank), gb(l.params_bytes), gb(l.grads_bytes),
           gb(l.optimizer_bytes), gb(l.activations_bytes), gb(l.temp_bytes), gb(l.total_bytes()),
           gb(l.device_bytes), l.fits() ? "yes" : "NO"});
  fmt::print("Memory ledger per rank (GB = 1e9 bytes; every rank of a pipeline stage holds the same)\n{}\n", t.str());

  const auto worst = strategy::worst_stage(stages);
  if (worst.fits())
    fmt::print("Verdict: fits. The fullest rank (stage {}) uses {} of {} ({:.0f}%).\n\n", worst.stage,
               units::format_bytes(worst.total_bytes()), units::format_bytes(worst.device_bytes),
               100 * worst.total_bytes() / worst.device_bytes);
  else
    fmt::print("Verdict: does NOT fit. Stage {} needs {} but a device holds {} ({:.1f}x over).\n\n", worst.stage,
               units::format_bytes(worst.total_bytes()), units::format_bytes(worst.device_bytes),
               worst.total_bytes() / worst.device_bytes);
}

void run_model_ledger(const PlanOptions& o) {
  const Resolved r = resolve_inputs(o.in);
  const auto stages = strategy::ledger_per_stage(r.model, r.plan, r.cluster);
  const auto in = strategy::rule_inputs(r.model, r.plan, r.cluster);
  const auto v = strategy::apply_rule(in);
  if (o.json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& l : stages) ranks.push_back(strategy::to_json(l));
    const auto worst = strategy::worst_stage(stages);
    print_json({{"model", strategy::to_json(r.model)}, {"cluster", strategy::to_json(r.cluster)},
                {"plan", strategy::to_json(r.plan)}, {"world", r.world}, {"ranks", ranks},
                {"worst", strategy::to_json(worst)}, {"fits", worst.fits()},
                {"rule", strategy::to_json(in, v)}});
    return;
  }
  print_ledger(r, stages);
  fmt::print("Rule baseline (the seed's decision procedure on one unsplit replica, mb {}):\n", r.plan.microbatch);
  print_rule(in, v);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Memory ledger of a plan: what each rank must hold (parameters, gradients, optimizer state,\n"
      "activations, temporary buffers) against its device, and the seed's rule baseline.\n"
      "Examples:\n"
      "  parlab plan --model gpt-175b --cluster dgx-a100 --world 1024 --plan tp=8,pp=16,zero=1\n"
      "  parlab plan --params 7.5e9 --cluster h200\n"
      "  parlab plan --ledger-gb params=28,grads=28,optimizer=56,activations=18,largest-layer=6 --device-gb 80");
  add_plan_inputs(cmd, opts->in);
  auto* ledger = cmd->add_option("--ledger-gb", opts->ledger_gb,
                                 "A hand ledger in GB instead of a model: params=,grads=,optimizer=,activations=,largest-layer=");
  cmd->add_option("--device-gb", opts->device_gb, "Device memory in GB for --ledger-gb")->needs(ledger);
  cmd->add_flag("--json", opts->json, "Machine-readable output with every number");
  cmd->callback([opts] {
    if (!opts->ledger_gb.empty()) {
      if (!opts->in.model.empty() || opts->in.params > 0)
        throw ConfigError("--ledger-gb", opts->ledger_gb, "plans a hand ledger; drop --model/--params");
      return run_seed_ledger(*opts);
    }
    run_model_ledger(*opts);
  });
}

}  // namespace parlab::cli
