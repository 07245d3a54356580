// parlab simulate: run a plan's step programs on a SimGrid platform built from the cluster, and
// put the simulated step beside the analytic estimate; `simulate collective` does the same for
// one collective (the simulated twin of an nccl-tests line).
#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/common.h"
#include "cli/sim_progress.h"
#include "sim/simulate.h"
#include "trace/trace.h"
#include "strategy/consistency.h"
#include "strategy/cost_model.h"
#include "base/errors.h"
#include "experiments/lib/predict_cluster.h"
#include "strategy/io.h"
#include "base/units.h"

namespace parlab::cli {
namespace {

struct SimulateOptions {
  PlanInputs in;
  int steps = 1;
  int warmup = 1;
  std::vector<std::string> faults;
  std::string fault_file;
  std::string trace;
  std::string algorithm = "auto";
  bool exact = false;
  bool per_rank = false;
  bool json = false;
  bool profile = false;  // on a profile of the plan's rank shape run on this machine (predict_cluster.h)
};

struct CollectiveOptions {
  std::string op = "allreduce";
  std::string bytes = "64M";
  int ranks = 8;
  std::string cluster = "dgx-a100";
  std::string algorithm = "auto";
  bool json = false;
};

sim::AlgorithmChoice parse_algorithm(const std::string& text) {
  if (text == "auto") return sim::AlgorithmChoice::kAuto;
  if (text == "ring") return sim::AlgorithmChoice::kRing;
  if (text == "tree") return sim::AlgorithmChoice::kTree;
  if (text == "analytic") return sim::AlgorithmChoice::kAnalytic;
  throw ConfigError("--algorithm", text, "must be auto, ring, tree or analytic");
}

std::string secs(double s) { return fmt::format("{:.6f}", s); }
// Times below a microsecond (the tables' resolution) are rounding residue of sums, not a
// quantity: a ratio of two of them would be noise (0 s vs 0 s printed as "3.000").
std::string ratio(double sim, double analytic) {
  constexpr double kResolution = 1e-6;
  if (analytic < kResolution) return sim < kResolution ? "-" : "inf";
  return fmt::format("{:.3f}", sim / analytic);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("--fault-file", path, "cannot be read");
  std::ostringstream o;
  o << in.rdbuf();
  return o.str();
}

// One row per rank, or per pipeline stage (means over its ranks) for big worlds.
void print_table(const sim::SimResult& s, const strategy::StepEstimate* a, bool per_rank) {
  std::map<int, strategy::RankTimes> analytic;  // by stage: the analytic model walks one rank per stage
  if (a)
    for (const auto& r : a->ranks) analytic[r.stage] = r;
  auto row = [&](const std::string& name, const std::string& stage, const strategy::RankTimes& r) {
    const auto it = analytic.find(r.stage);
    const strategy::RankTimes* x = it == analytic.end() ? nullptr : &it->second;
    auto cell = [&](double v) { return x ? secs(v) : std::string("-"); };
    return std::vector<std::string>{name,
                                    stage,
                                    secs(r.compute_seconds),
                                    cell(x ? x->compute_seconds : 0),
                                    x ? ratio(r.compute_seconds, x->compute_seconds) : "-",
                                    secs(r.exposed_comm_seconds),
                                    cell(x ? x->exposed_comm_seconds : 0),
                                    x ? ratio(r.exposed_comm_seconds, x->exposed_comm_seconds) : "-",
                                    secs(r.bubble_seconds),
                                    cell(x ? x->bubble_seconds : 0),
                                    x ? ratio(r.bubble_seconds, x->bubble_seconds) : "-"};
  };
  Table t({per_rank ? "rank" : "stage", per_rank ? "stage" : "ranks", "compute s", "analytic", "ratio",
           "exposed comm s", "analytic", "ratio", "bubble s", "analytic", "ratio"});
  if (per_rank) {
    for (const auto& r : s.ranks) t.add(row(std::to_string(r.rank), std::to_string(r.stage), r));
  } else {
    std::map<int, std::pair<strategy::RankTimes, int>> by_stage;
    for (const auto& r : s.ranks) {
      auto& [sum, n] = by_stage[r.stage];
      sum.stage = r.stage;
      sum.compute_seconds += r.compute_seconds;
      sum.exposed_comm_seconds += r.exposed_comm_seconds;
      sum.bubble_seconds += r.bubble_seconds;
      ++n;
    }
    for (auto& [stage, p] : by_stage) {
      auto& [sum, n] = p;
      sum.compute_seconds /= n;
      sum.exposed_comm_seconds /= n;
      sum.bubble_seconds /= n;
      t.add(row(std::to_string(stage), std::to_string(n), sum));
    }
  }
  fmt::print("{}\n", t.str());
}

void print_human(const Resolved& r, const sim::SimOptions& so, const sim::SimResult& s, const strategy::StepEstimate* a,
                 bool per_rank) {
  fmt::print("Model    {}\n", r.model.name);
  fmt::print("Cluster  {}: {} node(s) x {} {}\n", r.cluster.name, r.cluster.nodes, r.cluster.devices_per_node,
             r.cluster.device.name);
  fmt::print("Plan     {}  [{}]\n", r.plan.short_name(), r.plan.to_string());
  for (const auto& f : so.faults) fmt::print("Fault    {}\n", sim::to_string(f));
  fmt::print("SimGrid: {} warm-up + {} measured step(s), {} messages, {} ops, {:.6f} s simulated\n\n", so.warmup_steps,
             s.measured_steps, s.messages, s.ops, s.simulated_seconds);
  if (s.measured_steps > 0) {
    fmt::print("Step time: simulated {}  analytic {}  ratio {}\n", units::format_seconds(s.step_seconds),
               a ? units::format_seconds(a->step_seconds) : "n/a", a ? ratio(s.step_seconds, a->step_seconds) : "-");
    fmt::print("Per {} (seconds per step, mean of the measured steps; analytic: the rank it walks for the stage)\n",
               per_rank ? "rank" : "pipeline stage, mean over its ranks");
    print_table(s, a, per_rank);
    fmt::print("Bubble fraction of total: closed form {:.4f}, simulated {:.4f}{}\n", s.bubble_fraction_of_total,
               s.walked_bubble_fraction, a ? fmt::format(", analytic walk {:.4f}", a->walked_bubble_fraction) : "");
    fmt::print("Throughput: {:.1f} samples/s, {:.0f} tokens/s, MFU {:.1f}%{}\n", s.samples_per_s, s.tokens_per_s,
               100 * s.mfu, a ? fmt::format("  (analytic MFU {:.1f}%)", 100 * a->mfu) : "");
  }
  if (s.hang.deadlock || !s.hang.stopped_ranks.empty()) {
    fmt::print("\n{} at {:.6f} s simulated: no rank can progress.\n", s.hang.deadlock ? "HANG" : "STOPPED",
               s.hang.at_seconds);
    for (const auto& line : s.hang.lines) fmt::print("  {}\n", line);
    if (!s.hang.missing_ranks.empty())
      fmt::print("  missing rank(s): {}\n", strategy::join_ranks(s.hang.missing_ranks));
  }
}

// The cluster the experiments predict this plan on, on this machine: the calibrated cpu-local with
// the rates of a profile of the plan's own rank shape, run by as many processes as it has workers.
experiments::PredictionCluster on_profile(const SimulateOptions& o, const Resolved& r) {
  experiments::WorkloadRates rates(strategy::load_cluster(o.in.cluster), r.model, [&o](const std::string& line) {
    if (!o.json) fmt::print(stderr, "{}\n", line);
  });
  if (!rates.profiles())
    throw ConfigError("--profile", o.in.cluster,
                      "a cpu-local calibrated on this machine (`parlab calibrate`) and a model of kind mlp");
  return rates.for_plan(r.plan, r.world);
}

void run_simulate(const SimulateOptions& o) {
  Resolved r = resolve_inputs(o.in);
  std::string compute_model;  // the profile's note, where the rates are a profile's
  if (o.profile) {
    const experiments::PredictionCluster pc = on_profile(o, r);
    r.cluster = pc.cluster, compute_model = pc.note;
    if (!o.json) fmt::print("{}\n", compute_model);
  }
  sim::SimOptions so;
  so.steps = o.steps;
  so.warmup_steps = o.warmup;
  for (const auto& f : o.faults) so.faults.push_back(sim::parse_fault(f));
  if (!o.fault_file.empty())
    for (const auto& f : sim::parse_faults_toml(read_text(o.fault_file), o.fault_file)) so.faults.push_back(f);
  so.coalesce_calls = so.merge_steps = so.closed_form = !o.exact;
  so.algorithm = parse_algorithm(o.algorithm);
  so.timeline = !o.trace.empty();
  SimProgressLine progress("parlab simulate");
  so.on_progress = progress.callback();
  const sim::SimResult s = sim::simulate_plan(r.model, r.plan, r.cluster, so);
  progress.done();

  std::optional<strategy::StepEstimate> analytic;
  try {
    analytic = strategy::estimate_step(r.model, r.plan, r.cluster);
  } catch (const RuntimeError& e) {
    fmt::print(stderr, "parlab simulate: no analytic estimate: {}\n", e.what());
  }
  if (!o.trace.empty()) {
    trace::write_chrome_trace_file(o.trace, s.timeline, "parlab simulate " + r.model.name + " " + r.plan.to_string());
    if (!o.json)
      fmt::print("Trace: {} ({} events; open in https://ui.perfetto.dev or chrome://tracing)\n", o.trace,
                 s.timeline.size());
  }
  if (o.json) {
    nlohmann::json j = sim::to_json(s);
    j["model"] = strategy::to_json(r.model);
    j["cluster"] = strategy::to_json(r.cluster);
    if (!compute_model.empty()) j["compute_model"] = compute_model;
    j["plan"] = strategy::to_json(r.plan);
    j["world"] = r.world;
    j["faults"] = nlohmann::json::array();
    for (const auto& f : so.faults) j["faults"].push_back(sim::to_string(f));
    j["analytic"] = analytic ? sim::estimate_to_json(*analytic) : nlohmann::json(nullptr);
    return print_json(j);
  }
  print_human(r, so, s, analytic ? &*analytic : nullptr, o.per_rank || r.world <= 32);
}

void run_collective(const CollectiveOptions& o) {
  const auto op = strategy::parse_collective_op(o.op);
  if (!op) throw ConfigError("--op", o.op, "must be allreduce, reducescatter, allgather or broadcast");
  const double bytes = parse_bytes("--bytes", o.bytes);
  const strategy::ClusterSpec cluster = strategy::load_cluster(o.cluster);
  const auto r = sim::simulate_collective(*op, bytes, o.ranks, cluster, {.algorithm = parse_algorithm(o.algorithm)});
  if (o.json) {
    nlohmann::json j = sim::to_json(r);
    j["cluster"] = cluster.name;
    return print_json(j);
  }
  Table t({"op", "size(B)", "ranks", "algorithm", "protocol", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "analytic(us)",
           "analytic algo", "ratio"});
  t.add({std::string(strategy::to_string(r.op)), fmt::format("{:.0f}", r.bytes), std::to_string(r.ranks),
         r.algorithm + (r.channels > 1 ? fmt::format(" x{}", r.channels) : ""), r.protocol.empty() ? "-" : r.protocol,
         fmt::format("{:.2f}", r.seconds * 1e6), fmt::format("{:.2f}", r.algbw_bytes_per_s / units::kGB),
         fmt::format("{:.2f}", r.busbw_bytes_per_s / units::kGB), fmt::format("{:.2f}", r.analytic.seconds * 1e6),
         std::string(strategy::to_string(r.analytic.algorithm)), ratio(r.seconds, r.analytic.seconds)});
  fmt::print(
      "Cluster {} (GB/s = 1e9 bytes per second; busbw as nccl-tests; protocol: NCCL's on one NVLink node,\n"
      "\"measured\" where the preset times it from its nccl-tests curve)\n{}",
      cluster.name, t.str());
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto opts = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate",
      "Simulate a plan's step programs on a SimGrid model of the cluster (link contention, overlap,\n"
      "pipeline bubbles, stragglers, hangs) and put the result beside the analytic estimate.\n"
      "Examples:\n"
      "  parlab simulate --model gpt-22b --cluster dgx-a100 --world 16 --plan tp=8,dp=2\n"
      "  parlab simulate --model lab-mlp --cluster cpu-local --plan dp=4 --fault stop:rank=1,step=1\n"
      "  parlab simulate collective --op allreduce --bytes 64M --ranks 8 --cluster dgx-a100");
  cmd->require_subcommand(0, 1);
  add_plan_inputs(cmd, opts->in);
  cmd->add_option("--steps", opts->steps, "Measured steps (results are their mean)")->capture_default_str();
  cmd->add_option("--warmup", opts->warmup, "Warm-up steps simulated first and left out")->capture_default_str();
  cmd->add_option(
      "--fault", opts->faults,
      "Inject a fault (repeatable): slow:rank=R,factor=F | degrade-link:rank=R,factor=F[,link=intra|nic|all] "
      "| stop:rank=R,step=K[,op=N]");
  cmd->add_option("--fault-file", opts->fault_file,
                  "TOML file with [[fault]] tables (kind, rank, factor, step, op, link)");
  cmd->add_option("--trace", opts->trace, "Write a Chrome trace-event JSON of every op (Perfetto, chrome://tracing)");
  cmd->add_option("--algorithm", opts->algorithm,
                  "Collective algorithm: auto (NCCL-like rings; halving-doubling where the analytic\n"
                  "tuner picks a tree), ring, tree, analytic (the tuner's choice exactly, hierarchical included)")
      ->capture_default_str();
  cmd->add_flag("--exact", opts->exact,
                "Simulate every call of multi-call collectives and every step of their algorithms, every\n"
                "message as a SimGrid flow (slower; finer under contention) instead of coalescing them and\n"
                "timing collectives that have their links to themselves in closed form");
  cmd->add_flag("--per-rank", opts->per_rank, "One table row per rank even for big worlds");
  cmd->add_flag("--profile", opts->profile,
                "On a calibrated cpu-local: simulate on the rates of a profile of the plan's own rank shape run here "
                "(as many processes as workers, a second or two), as the experiments predict");
  cmd->add_flag("--json", opts->json,
                "Machine-readable output (the analytic model's keys, analytic under \"analytic\")");

  auto copts = std::make_shared<CollectiveOptions>();
  CLI::App* coll =
      cmd->add_subcommand("collective", "Simulate one collective (an nccl-tests line) beside the analytic time");
  coll->add_option("--op", copts->op, "allreduce | reducescatter | allgather | broadcast")->capture_default_str();
  coll->add_option("--bytes", copts->bytes, "Size S (nccl-tests convention): 1K, 64M, 1G (x1024), or kB/MB/GB (x1000)")
      ->capture_default_str();
  coll->add_option("--ranks,-n", copts->ranks, "Number of ranks")->capture_default_str();
  coll->add_option("--cluster,-c", copts->cluster, "Cluster preset or TOML file")->capture_default_str();
  coll->add_option("--algorithm", copts->algorithm, "auto | ring | tree | analytic")->capture_default_str();
  coll->add_flag("--json", copts->json, "Machine-readable output");
  coll->callback([copts] { run_collective(*copts); });

  cmd->callback([opts, coll] {
    if (coll->parsed()) return;
    run_simulate(*opts);
  });
}

}  // namespace parlab::cli
