// parlab plan: "find what cannot fit". The memory ledger of a plan, per pipeline stage, beside
// the seed's rule baseline and the parallelism candidates it proposes.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <charconv>
#include <limits>
#include <map>
#include <optional>
#include <cmath>

#include "cli/checks.h"
#include "cli/common.h"
#include "cli/sim_progress.h"
#include "base/errors.h"
#include "experiments/lib/decide.h"
#include "experiments/lib/predict_cluster.h"
#include "strategy/io.h"
#include "base/key_values.h"
#include "strategy/ledger.h"
#include "strategy/planner.h"
#include "strategy/step_program.h"
#include "sim/simulate.h"
#include "base/units.h"

namespace parlab::cli {
namespace {

struct PlanOptions {
  PlanInputs in;
  std::string ledger_gb;  // the seed's hand ledger: params=28,grads=28,...
  double device_gb = 0;
  bool json = false;
  bool search = false;
  int64_t gbs = 0;
  int top = 5;
  int program_rank = -1;
  int simulate = 0;  // simulate the top K candidates
  // Price the candidates again on workload profiles of their own (price_on_this_machine):
  // --profile asks for it on any calibrated cpu-local, --no-profile never; neither: where the
  // ranks outnumber a calibrated cpu-local's cores.
  bool profile = false, no_profile = false;
};

std::string gb(double bytes) { return fmt::format("{:.2f}", bytes / units::kGB); }

// --ledger-gb params=28,grads=28,optimizer=56,activations=18,largest-layer=6
strategy::RuleInputs parse_ledger_gb(const std::string& text, double device_gb) {
  strategy::RuleInputs in;
  bool seen[5] = {};
  for (const parlab::KeyValue& kv : parlab::split_key_values_strict(text, "--ledger-gb")) {
    if (!kv.has_equals)
      throw ConfigError("--ledger-gb", kv.item,
                        "expected key=GB pairs: params, grads, optimizer, activations, largest-layer");
    const std::string& key = kv.key;
    const std::string& value = kv.value;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(v))
      throw ConfigError("--ledger-gb " + key, value, "must be a number of GB");
    if (v < 0) throw ConfigError("--ledger-gb " + key, value, "must be >= 0");
    const double bytes = v * units::kGB;
    int idx = -1;
    if (key == "params" || key == "parameters")
      in.params_bytes = bytes, idx = 0;
    else if (key == "grads" || key == "gradients")
      in.grads_bytes = bytes, idx = 1;
    else if (key == "optimizer")
      in.optimizer_bytes = bytes, idx = 2;
    else if (key == "activations")
      in.activations_bytes = bytes, idx = 3;
    else if (key == "largest-layer" || key == "largest_layer")
      in.largest_layer_bytes = bytes, idx = 4;
    else
      throw ConfigError("--ledger-gb " + key, value,
                        "unknown key; allowed: params, grads, optimizer, activations, largest-layer");
    seen[idx] = true;
  }
  const char* names[] = {"params", "grads", "optimizer", "activations", "largest-layer"};
  for (int i = 0; i < 5; ++i)
    if (!seen[i])
      throw ConfigError(std::string("--ledger-gb ") + names[i], "(missing)",
                        "all five of params, grads, optimizer, activations, largest-layer are needed");
  positive("--device-gb", device_gb, 1e9);
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
    fmt::print("Model    {} ({}): {} parameters, {} layers, hidden {}, largest layer {} parameters\n", m.name,
               m.kind_name(), units::format_count(m.total_params()), m.layers, m.hidden,
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
           gb(l.optimizer_bytes), gb(l.activations_bytes), gb(l.temp_bytes), gb(l.total_bytes()), gb(l.device_bytes),
           l.fits() ? "yes" : "NO"});
  fmt::print("Memory ledger per rank (GB = 1e9 bytes; every rank of a pipeline stage holds the same)\n{}", t.str());
  fmt::print("State    {}\n\n", strategy::state_convention(r.plan));

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

nlohmann::json estimate_json(const strategy::StepEstimate& e) {
  nlohmann::json cols = nlohmann::json::array();
  for (const auto& c : e.collectives)
    cols.push_back({{"rank", c.rank},
                    {"op", c.op},
                    {"group", c.group},
                    {"tag", c.tag},
                    {"bytes", c.bytes},
                    {"count", c.count},
                    {"ranks", c.ranks},
                    {"seconds", c.seconds},
                    {"algorithm", c.algorithm},
                    {"start_seconds", c.start_seconds},
                    {"end_seconds", c.end_seconds}});
  return {{"step_seconds", e.step_seconds},
          {"bubble_fraction_of_ideal", e.bubble_fraction_of_ideal},
          {"bubble_fraction_of_total", e.bubble_fraction_of_total},
          {"walked_bubble_fraction", e.walked_bubble_fraction},
          {"samples_per_s", e.samples_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"mfu", e.mfu},
          {"collectives", cols}};
}

void print_estimate(const Resolved& r, const strategy::StepEstimate& e) {
  Table t({"stage", "rank", "compute", "exposed comm", "bubble", "step"});
  for (const auto& rt : e.ranks)
    t.add({std::to_string(rt.stage), std::to_string(rt.rank), units::format_seconds(rt.compute_seconds),
           units::format_seconds(rt.exposed_comm_seconds), units::format_seconds(rt.bubble_seconds),
           units::format_seconds(rt.step_seconds)});
  fmt::print(
      "Estimated step (analytic model: critical path through one compute and one communication stream per rank)\n{}\n",
      t.str());
  fmt::print("Step {}: {:.1f} samples/s, {} tokens/s, MFU {:.1f}%\n", units::format_seconds(e.step_seconds),
             e.samples_per_s, units::format_count(e.tokens_per_s), 100 * e.mfu);
  if (r.plan.pp > 1)
    fmt::print(
        "Pipeline bubble: {:.1f}% of the ideal time ((p-1)/(v m)), {:.1f}% of the total ((p-1)/(v m + p - 1)); "
        "walked: {:.1f}% of the step on the idlest stage\n",
        100 * e.bubble_fraction_of_ideal, 100 * e.bubble_fraction_of_total, 100 * e.walked_bubble_fraction);
  // Collectives of the first walked rank, grouped by group and op.
  struct Sum {
    int calls = 0;
    double bytes = 0, seconds = 0;
  };
  std::map<std::pair<std::string, std::string>, Sum> sums;
  for (const auto& c : e.collectives) {
    if (c.rank != e.ranks.front().rank) continue;
    auto& s = sums[{c.group.substr(0, c.group.find('.')), c.op}];
    s.calls += c.count;
    s.bytes += c.bytes * c.count;
    s.seconds += c.seconds * c.count;
  }
  if (!sums.empty()) {
    Table ct({"group", "collective", "calls", "bytes", "time"});
    for (const auto& [k, v] : sums)
      ct.add(
          {k.first, k.second, std::to_string(v.calls), units::format_bytes(v.bytes), units::format_seconds(v.seconds)});
    fmt::print("\nCollectives per step on rank {} (before overlap)\n{}", e.ranks.front().rank, ct.str());
  }
}

void run_model_ledger(const PlanOptions& o) {
  const Resolved r = resolve_inputs(o.in);
  if (o.program_rank >= 0) {
    if (o.program_rank >= r.world)
      throw ConfigError("--program", std::to_string(o.program_rank),
                        "must be a rank below the world size (" + std::to_string(r.world) + ")");
    fmt::print("{}", strategy::to_text(strategy::build_step(r.model, r.plan, o.program_rank)));
    return;
  }
  const auto stages = strategy::ledger_per_stage(r.model, r.plan, r.cluster);
  const auto in = strategy::rule_inputs(r.model, r.plan, r.cluster);
  const auto v = strategy::apply_rule(in);
  const bool can_estimate = r.model.has_layers();
  strategy::StepEstimate est;
  if (can_estimate) est = strategy::estimate_step(r.model, r.plan, r.cluster);
  if (o.json) {
    nlohmann::json ranks = nlohmann::json::array();
    for (size_t i = 0; i < stages.size(); ++i) {
      auto j = strategy::to_json(stages[i]);
      if (can_estimate) {
        const auto& t = est.ranks[i];
        j["compute_seconds"] = t.compute_seconds;
        j["exposed_comm_seconds"] = t.exposed_comm_seconds;
        j["bubble_seconds"] = t.bubble_seconds;
        j["step_seconds"] = t.step_seconds;
      }
      ranks.push_back(j);
    }
    const auto worst = strategy::worst_stage(stages);
    nlohmann::json out{{"model", strategy::to_json(r.model)},
                       {"cluster", strategy::to_json(r.cluster)},
                       {"plan", strategy::to_json(r.plan)},
                       {"world", r.world},
                       {"ranks", ranks},
                       {"worst", strategy::to_json(worst)},
                       {"fits", worst.fits()},
                       {"rule", strategy::to_json(in, v)}};
    if (can_estimate) out.update(estimate_json(est));
    print_json(out);
    return;
  }
  print_ledger(r, stages);
  if (can_estimate) {
    print_estimate(r, est);
    fmt::print("\n");
  }
  fmt::print("Rule baseline (the seed's decision procedure on one unsplit replica, mb {}):\n", r.plan.microbatch);
  print_rule(in, v);
}

std::string plan_cell(const strategy::Plan& p) {
  std::string s = fmt::format("dp {} tp {} pp {}", p.dp, p.tp, p.pp);
  if (p.zero) s += fmt::format(" zero {}", p.zero);
  s += fmt::format(" mb {} x{}", p.microbatch, p.microbatches);
  if (p.pp > 1)
    s += p.schedule == strategy::Schedule::kInterleaved ? fmt::format(" interleaved v{}", p.v)
                                                        : " " + std::string(strategy::to_string(p.schedule));
  if (p.recompute != strategy::Recompute::kNone) s += " rc " + std::string(strategy::to_string(p.recompute));
  if (p.sequence_parallel) s += " sp";
  return s;
}

nlohmann::json candidate_json(const strategy::Candidate& c) {
  nlohmann::json j{{"plan", strategy::to_json(c.plan)},
                   {"worst", strategy::to_json(c.worst)},
                   {"quick",
                    {{"step_seconds", c.quick.step_seconds},
                     {"compute_seconds", c.quick.compute_seconds},
                     {"tp_comm_seconds", c.quick.tp_comm_seconds},
                     {"bubble_seconds", c.quick.bubble_seconds},
                     {"dp_exposed_seconds", c.quick.dp_exposed_seconds},
                     {"optimizer_seconds", c.quick.optimizer_seconds}}},
                   {"step_seconds", c.step_seconds()}};
  if (c.walked) {
    j["samples_per_s"] = c.walked->samples_per_s;
    j["mfu"] = c.walked->mfu;
    nlohmann::json ranks = nlohmann::json::array();
    for (const auto& r : c.walked->ranks)
      ranks.push_back({{"rank", r.rank},
                       {"stage", r.stage},
                       {"compute_seconds", r.compute_seconds},
                       {"exposed_comm_seconds", r.exposed_comm_seconds},
                       {"bubble_seconds", r.bubble_seconds},
                       {"step_seconds", r.step_seconds}});
    j["ranks"] = ranks;
    j["bubble_fraction_of_ideal"] = c.walked->bubble_fraction_of_ideal;
    j["bubble_fraction_of_total"] = c.walked->bubble_fraction_of_total;
  }
  return j;
}

// The simulated twin of the best K candidates (SimGrid; contention and topology included).
// Each in its own process, as many at once as there are cores.
std::vector<std::optional<sim::SimResult>> simulate_top(const PlanOptions& o, const Resolved& r,
                                                        const strategy::PlanReport& rep) {
  std::vector<std::optional<sim::SimResult>> simulated(rep.top.size());
  std::vector<strategy::Plan> to_simulate;
  for (size_t i = 0; i < rep.top.size() && int(i) < o.simulate; ++i) {
    if (!o.json)
      fmt::print(stderr, "simulating candidate {} of {}: {} ({} ranks) ...\n", i + 1,
                 std::min<size_t>(rep.top.size(), o.simulate), rep.top[i].plan.short_name(), rep.top[i].plan.world());
    to_simulate.push_back(rep.top[i].plan);
  }
  if (!to_simulate.empty()) {
    SimProgressLine progress("simulating");
    sim::SimOptions so;
    if (!o.json) so.on_progress = progress.callback();
    auto results = sim::simulate_plans(r.model, to_simulate, r.cluster, so);
    progress.done();
    for (size_t i = 0; i < results.size(); ++i) simulated[i] = std::move(results[i]);
  }
  return simulated;
}

nlohmann::json on_this_machine_json(const experiments::DecideCandidates& c);

void print_search_json(const Resolved& r, const strategy::PlanReport& rep,
                       const std::vector<std::optional<sim::SimResult>>& simulated,
                       const std::optional<experiments::DecideCandidates>& profiled) {
  nlohmann::json top = nlohmann::json::array();
  for (size_t i = 0; i < rep.top.size(); ++i) {
    auto j = candidate_json(rep.top[i]);
    if (simulated[i]) j["simulated"] = sim::to_json(*simulated[i]);
    top.push_back(j);
  }
  nlohmann::json neighbours = nlohmann::json::array();
  for (const auto& n : rep.neighbours)
    neighbours.push_back({{"label", n.label},
                          {"possible", n.possible},
                          {"why_not", n.why_not},
                          {"comm_added_seconds", n.comm_added_seconds},
                          {"compute_saved_seconds", n.compute_saved_seconds},
                          {"step_seconds", n.step_seconds},
                          {"sentence", n.sentence}});
  nlohmann::json out{{"model", strategy::to_json(r.model)},
                     {"cluster", strategy::to_json(r.cluster)},
                     {"world", rep.world},
                     {"global_batch", rep.global_batch},
                     {"evaluated", rep.evaluated},
                     {"valid", rep.valid},
                     {"fitting", rep.fitting},
                     {"search_seconds", rep.search_seconds},
                     {"top", top},
                     {"neighbours", neighbours},
                     {"rule", strategy::to_json(rep.rule_inputs, rep.rule)},
                     {"rule_choice_name", rep.rule_choice_name},
                     {"rule_choice_problem", rep.rule_choice_problem},
                     {"explanation", rep.explanation}};
  if (rep.rule_choice) out["rule_choice"] = candidate_json(*rep.rule_choice);
  if (rep.smallest_split) out["smallest_split"] = candidate_json(*rep.smallest_split);
  if (!rep.top.empty()) out["step_seconds"] = rep.top.front().step_seconds();
  if (profiled) out["on_this_machine"] = on_this_machine_json(*profiled);
  print_json(out);
}

// The fastest plans that fit, one row each (with their simulated twins when asked for).
std::string top_table(const PlanOptions& o, const strategy::PlanReport& rep,
                      const std::vector<std::optional<sim::SimResult>>& simulated) {
  std::vector<std::string> header = {"#",         "plan", "split",        "memory", "step",
                                     "samples/s", "MFU",  "exposed comm", "bubble"};
  if (o.simulate > 0) header.insert(header.begin() + 5, {"simulated", "sim/model"});
  Table t(header);
  int i = 0;
  for (const auto& c : rep.top) {
    double comm = 0, bubble = 0;
    if (c.walked)
      for (const auto& rt : c.walked->ranks)
        comm = std::max(comm, rt.exposed_comm_seconds), bubble = std::max(bubble, rt.bubble_seconds);
    std::vector<std::string> row = {
        std::to_string(++i),
        c.plan.short_name(),
        plan_cell(c.plan),
        fmt::format("{:.0f}/{:.0f} GB", c.worst.total_bytes() / units::kGB, c.worst.device_bytes / units::kGB),
        units::format_seconds(c.step_seconds()),
        fmt::format("{:.1f}", c.walked ? c.walked->samples_per_s : 0.0),
        fmt::format("{:.1f}%", c.walked ? 100 * c.walked->mfu : 0.0),
        units::format_seconds(comm),
        units::format_seconds(bubble)};
    if (o.simulate > 0) {
      const auto& s = simulated[size_t(i - 1)];
      row.insert(row.begin() + 5, {s ? units::format_seconds(s->step_seconds) : "-",
                                   s ? fmt::format("{:.3f}", s->step_seconds / c.step_seconds()) : "-"});
    }
    t.add(row);
  }
  return t.str();
}

// The seed's "benchmark a small topology before scaling", in the planner: on a calibrated
// cpu-local the planner's top and the fastest plan of each family it lacks are priced again on
// profiles of their own rank shapes, run by as many processes as the plan has workers
// (experiments/lib/decide.h, as the decide experiment chooses). The calibration's GEMM grid knows
// no waits at the meetings of ranks that share cores: where ranks outnumbered the cores of a 2-core
// VM it put TP 4 first for a 12-block MLP on 4 workers (priced 140-153 ms, measured 172-223) over
// ZeRO-1 (priced 147-162, measured 124-145); a profile holds each shape's meetings and contention.
// nullopt where it is not asked for or not possible.
std::optional<experiments::DecideCandidates> price_on_this_machine(const PlanOptions& o, const Resolved& r,
                                                                   const strategy::PlannerOptions& po,
                                                                   const strategy::PlanReport& rep) {
  if (o.no_profile || rep.top.empty()) return std::nullopt;
  const bool crowded = r.cluster.shares_cores() && r.cluster.devices_per_node > r.cluster.cores_per_node;
  if (!o.profile && !crowded) return std::nullopt;
  experiments::WorkloadRates rates(strategy::load_cluster(o.in.cluster), r.model, [&o](const std::string& line) {
    if (!o.json) fmt::print(stderr, "{}\n", line);
  });
  if (!rates.profiles()) {
    if (o.profile)
      throw ConfigError("--profile", o.in.cluster,
                        "a cpu-local calibrated on this machine (`parlab calibrate`) and a model of kind mlp");
    return std::nullopt;
  }
  experiments::DecideCandidates c = experiments::gather_candidates(r.model, r.cluster, po, rep, rep.world, "");
  experiments::price_on_profiles(c, rates, r.model, rep.world);
  return c;
}

nlohmann::json on_this_machine_json(const experiments::DecideCandidates& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& d : c.cands) rows.push_back(experiments::to_json(d));
  return {{"candidates", rows}, {"choice", c.cands.front().plan}, {"notes", c.notes}};
}

// The candidates as priced on their profiles, cheapest first, beside the planner's price.
void print_on_this_machine(const PlanOptions& o, const Resolved& r, const experiments::DecideCandidates& c) {
  Table t({"#", "from", "plan", "family", "planner", "on its profile", "profile/planner"});
  for (size_t i = 0; i < c.cands.size(); ++i) {
    const auto& d = c.cands[i];
    t.add({std::to_string(i + 1), d.origin, d.name, d.family, units::format_seconds(d.planner_step_seconds),
           units::format_seconds(d.predicted_step_seconds),
           fmt::format("{:.2f}", d.predicted_step_seconds / d.planner_step_seconds)});
  }
  fmt::print(
      "On this machine: the candidates simulated again on profiles of their own rank shapes, {} processes in "
      "lockstep on {} cores (what the grid leaves out: contention between ranks, the waits at their meetings)\n{}",
      r.world, r.cluster.cores_per_node, t.str());
  for (const std::string& n : c.notes) fmt::print("{}\n", n);
  fmt::print("Choice on this machine: {} ({} a step on its profile).\n", c.cands.front().name,
             units::format_seconds(c.cands.front().predicted_step_seconds));
  fmt::print("Run it:  parlab plan --model {} --cluster {} --world {} --plan {}\n\n",
             o.in.model.empty() ? "..." : o.in.model, o.in.cluster, r.world, c.cands.front().plan);
}

void run_search(const PlanOptions& o) {
  const Resolved r = load_inputs(o.in);
  strategy::PlannerOptions po;
  po.global_batch = o.gbs;
  po.fixed = r.plan;
  po.top = o.top;
  if (!o.json)
    fmt::print(stderr, "searching plans for {} on {} x {} ...\n", r.model.name, r.world, r.cluster.device.name);
  const auto rep = strategy::search_plans(r.model, r.cluster, po);
  const auto profiled = price_on_this_machine(o, r, po, rep);
  const auto simulated = simulate_top(o, r, rep);
  if (o.json) return print_search_json(r, rep, simulated, profiled);
  fmt::print("Model {} ({} parameters) on {} x {}, global batch {}\n", r.model.name,
             units::format_count(r.model.total_params()), rep.world, r.cluster.device.name, rep.global_batch);
  fmt::print("Searched {} plans in {}: {} valid, {} fit in memory.\n\n", rep.evaluated,
             units::format_seconds(rep.search_seconds), rep.valid, rep.fitting);
  if (!rep.top.empty()) {
    fmt::print("Fastest plans that fit (analytic critical path; memory = fullest rank / device)\n{}\n",
               top_table(o, rep, simulated));
    if (profiled)
      print_on_this_machine(o, r, *profiled);
    else
      fmt::print("Run it:  parlab plan --model {} --cluster {} --world {} --plan {}\n\n",
                 o.in.model.empty() ? "..." : o.in.model, o.in.cluster, rep.world, rep.top.front().plan.to_string());
  }
  for (const auto& line : rep.explanation) fmt::print("{}\n", line);
  if (profiled && !rep.top.empty() && profiled->cands.front().plan != rep.top.front().plan.to_string())
    fmt::print("On this machine the profiles put {} first ({} a step), not {}: choose {}.\n",
               profiled->cands.front().name, units::format_seconds(profiled->cands.front().predicted_step_seconds),
               rep.top.front().plan.short_name(), profiled->cands.front().name);
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto opts = std::make_shared<PlanOptions>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Find what cannot fit, choose the smallest split, model the communication.\n"
      "Without --plan: search every valid plan, keep those whose memory ledger fits, rank them by\n"
      "estimated step time and explain the choice. With --plan: that plan's memory ledger per rank\n"
      "(parameters, gradients, optimizer state, activations, temporary buffers) and its step time.\n"
      "Examples:\n"
      "  parlab plan --model gpt-175b --cluster dgx-a100 --world 1024 --gbs 1536\n"
      "  parlab plan --model gpt-175b --cluster dgx-a100 --world 1024 --plan tp=8,pp=16,zero=1,gbs=1536\n"
      "  parlab plan --params 7.5e9 --cluster h200\n"
      "  parlab plan --ledger-gb params=28,grads=28,optimizer=56,activations=18,largest-layer=6 --device-gb 80");
  add_plan_inputs(cmd, opts->in);
  auto* ledger =
      cmd->add_option("--ledger-gb", opts->ledger_gb,
                      "A hand ledger in GB instead of a model: params=,grads=,optimizer=,activations=,largest-layer=");
  cmd->add_option("--device-gb", opts->device_gb, "Device memory in GB for --ledger-gb")->needs(ledger);
  cmd->add_flag("--json", opts->json, "Machine-readable output with every number");
  cmd->add_flag("--search", opts->search,
                "Search all plans (the default when --plan is absent); keys given in --plan stay fixed");
  cmd->add_option("--gbs", opts->gbs,
                  "Global batch (default: the plan policy's, the model's microbatch x lcm(world, 4))");
  cmd->add_option("--top", opts->top, "Candidates to show in a search")->capture_default_str();
  cmd->add_option("--program", opts->program_rank, "Print the step program of this rank (a fixed --plan)");
  cmd->add_option(
      "--simulate", opts->simulate,
      "Also simulate the best K candidates in SimGrid (one process per core at once) and show both columns");
  auto* profile = cmd->add_flag(
      "--profile", opts->profile,
      "Simulate the candidates again on profiles of their own rank shapes run on this machine (a calibrated cpu-local; "
      "a second or two each); the default where the ranks outnumber its cores");
  cmd->add_flag("--no-profile", opts->no_profile, "Price on the calibration's grid alone")->excludes(profile);
  cmd->callback([opts, cmd] {
    if (!opts->ledger_gb.empty()) {
      if (!opts->in.model.empty() || opts->in.params_given)
        throw ConfigError("--ledger-gb", opts->ledger_gb, "plans a hand ledger; drop --model/--params");
      return run_seed_ledger(*opts);
    }
    if (given(*cmd, "--program")) in_range("--program", opts->program_rank, 0, std::numeric_limits<int>::max());
    // 0 is the unset default (one sample per device); said explicitly it is no batch.
    if (opts->gbs < 0 || (given(*cmd, "--gbs") && opts->gbs == 0))
      throw ConfigError("--gbs", std::to_string(opts->gbs), "must be a positive number of samples");
    if (opts->top < 1) throw ConfigError("--top", std::to_string(opts->top), "must be >= 1");
    if (opts->simulate < 0) throw ConfigError("--simulate", std::to_string(opts->simulate), "must be >= 0");
    const bool search = opts->search || (opts->in.plan.empty() && opts->program_rank < 0);
    if (search) return run_search(*opts);
    opts->in.global_batch = opts->gbs;
    run_model_ledger(*opts);
  });
}

}  // namespace parlab::cli
