// The simulator against the analytic model, and the simulator's own speed. Prints; never fails.
//
//   1. Accuracy grid on dgx-a100: DDP, ZeRO-1/3, TP, PP 1F1B, interleaved, 3D: simulated step
//      beside the analytic estimate and their ratio; where they differ by more than 10% the
//      "why" column names the collectives whose simulated and analytic times differ most and the
//      algorithms behind them (or the category of time, when it is not communication).
//   2. Collectives: all-reduce across sizes and widths, simulated vs collective_time().
//   3. Speed: one simulated step of small plans, of the planner's best three for gpt-175b on 1024
//      GPUs (its pick, TP 8 x ZeRO-3 128: goal < 30 s) and of gpt-1t as TP 8 x PP 8 x DP 64 on 4096
//      (goal < 60 s): wall seconds (median of --repeats) and CPU seconds of the simulating process
//      and this one (user + sys, less sensitive to a loaded machine), messages (every message of
//      every collective algorithm and send), how many of them SimGrid carried as flows (the rest
//      were in collective steps timed in closed form, sim/executor.h), messages per wall second.
//   4. The datacenter table (issue 34): each plan as `parlab simulate ... --steps 1` runs it (one
//      warm-up and one measured step, then the analytic estimate), in a forked process of its own
//      so its peak RSS is its own: wall and CPU seconds (user + sys, the simulating child
//      included) and peak RSS of the process and of its simulating child, beside the targets;
//      and the planner's search_seconds for gpt-175b x 1024 and gpt-1t x 4096 (median of 3).
//      --record FILE writes the table with the machine it ran on (sim/speed_record.inc, which
//      docs/validation.md shows).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "sim/simulate.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/planner.h"
#include "base/stats.h"
#include "base/units.h"

namespace {

using namespace parlab;

struct Case {
  std::string model;
  int world;
  std::string plan;
  std::string fault{};  // optional
};

strategy::Plan resolved(const strategy::ModelSpec& m, const strategy::ClusterSpec& c, int world,
                        const std::string& text) {
  strategy::Plan p = strategy::resolve(strategy::parse_plan(text), m, world);
  strategy::validate(p, m, strategy::with_world(c, world));
  return p;
}

double wall_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Why the two disagree: the collective (op, group kind) whose simulated time differs most from the
// analytic one on the ranks both report, with both algorithms; or the category of time that differs.
std::string why(const sim::SimResult& s, const strategy::StepEstimate& a, bool shares_cores, const std::string& fault) {
  std::map<std::pair<int, int>, const strategy::CollectiveTiming*> analytic;
  for (const auto& c : a.collectives) analytic[{c.rank, c.op_id}] = &c;
  struct Diff {
    double seconds = 0;
    std::string sim_algo, analytic_algo;
    double sim_call = 0, analytic_call = 0;
  };
  std::map<std::string, Diff> by_kind;
  for (const auto& c : s.collectives) {
    auto it = analytic.find({c.rank, c.op_id});
    if (it == analytic.end()) continue;
    const std::string kind = c.op + " " + c.group.substr(0, c.group.find('.'));
    auto& d = by_kind[kind];
    d.seconds += (c.end_seconds - c.start_seconds) - (it->second->end_seconds - it->second->start_seconds);
    d.sim_algo = c.algorithm;
    d.analytic_algo = it->second->algorithm;
    d.sim_call = c.seconds;
    d.analytic_call = it->second->seconds;
  }
  const Diff* worst = nullptr;
  std::string worst_kind;
  for (const auto& [kind, d] : by_kind)
    if (!worst || std::abs(d.seconds) > std::abs(worst->seconds)) worst = &d, worst_kind = kind;
  double dc = 0, de = 0, db = 0;
  for (const auto& ar : a.ranks)
    for (const auto& r : s.ranks)
      if (r.rank == ar.rank) {
        dc = r.compute_seconds - ar.compute_seconds;
        de = r.exposed_comm_seconds - ar.exposed_comm_seconds;
        db = r.bubble_seconds - ar.bubble_seconds;
        break;
      }
  const std::string deltas =
      fmt::format("compute {:+.0f} ms, exposed comm {:+.0f} ms, bubble {:+.0f} ms: ", dc * 1e3, de * 1e3, db * 1e3);
  const double step = a.step_seconds;
  if (fault.rfind("slow", 0) == 0)
    return deltas + "fault (not in the analytic model): the healthy ranks wait for the straggler in the collectives";
  if (fault.rfind("degrade-link", 0) == 0)
    return deltas + "fault (not in the analytic model): messages through the degraded link (p2p, rings) crawl";
  if (shares_cores && std::abs(dc) > 0.02 * step)
    return deltas +
           "shared cores -- the analytic model splits them over all ranks all the time; here a rank computing "
           "alone (pipeline warm-up, cool-down) gets a whole core, which also shrinks the bubbles";
  if (std::abs(de) >= std::abs(db) && worst)
    return deltas + fmt::format("{}: sim {} {:.3f} ms/call vs analytic {} {:.3f} ms/call", worst_kind, worst->sim_algo,
                                worst->sim_call * 1e3, worst->analytic_algo, worst->analytic_call * 1e3);
  if (std::abs(dc) > std::abs(db)) return deltas + "stragglers";
  return deltas + "pipeline waits (p2p sharing links with other traffic, slower neighbours)";
}

void accuracy_grid(const std::vector<Case>& cases, const std::string& cluster_name) {
  const auto base = strategy::load_cluster(cluster_name);
  fmt::print("Simulated vs analytic step time on {} (1 warm-up + 2 measured steps, coalesced collectives)\n",
             cluster_name);
  fmt::print("{:<10} {:>5}  {:<60} {:>10} {:>10} {:>6}  {}\n", "model", "world", "plan", "sim s", "analytic s", "ratio",
             "why (|ratio - 1| > 10%)");
  for (const auto& c : cases) {
    const auto model = strategy::load_model(c.model);
    const auto cluster = strategy::with_world(base, c.world);
    const auto plan = resolved(model, cluster, c.world, c.plan);
    sim::SimOptions o;
    o.steps = 2;
    if (!c.fault.empty()) o.faults = {sim::parse_fault(c.fault)};
    const auto t0 = std::chrono::steady_clock::now();
    const auto s = sim::simulate_plan(model, plan, cluster, o);
    const double wall = wall_since(t0);
    [[maybe_unused]] const auto a = strategy::estimate_step(model, plan, cluster);  // as parlab simulate does
    const double ratio = s.step_seconds / a.step_seconds;
    fmt::print("{:<10} {:>5}  {:<60} {:>10.4f} {:>10.4f} {:>6.3f}  {}{}\n", c.model, c.world,
               plan.short_name() + " [" + c.plan + "]" + (c.fault.empty() ? "" : " " + c.fault), s.step_seconds,
               a.step_seconds, ratio, std::abs(ratio - 1) > 0.10 ? why(s, a, cluster.shares_cores(), c.fault) : "",
               fmt::format("  ({:.1f} s wall)", wall));
  }
  fmt::print("\n");
}

void collective_sweep(const std::string& cluster_name) {
  const auto cluster = strategy::load_cluster(cluster_name);
  fmt::print("2. All-reduce on {}: simulated (every step) vs analytic collective_time()\n", cluster_name);
  fmt::print("{:>6} {:>10}  {:<17} {:>10} {:>10}  {:>12} {:>6}  {:<13} {:>11} {:>6}\n", "ranks", "size", "sim auto",
             "sim us", "busbw GB/s", "sim analytic", "ratio", "analytic algo", "analytic us", "ratio");
  for (int n : {8, 16, 64, 256})
    for (double bytes : {1.0 * units::kMiB, 64.0 * units::kMiB, 1.0 * units::kGiB}) {
      const auto r = sim::simulate_collective(strategy::CollectiveOp::kAllReduce, bytes, n, cluster);
      const auto h = sim::simulate_collective(strategy::CollectiveOp::kAllReduce, bytes, n, cluster,
                                              {.algorithm = sim::AlgorithmChoice::kAnalytic});
      fmt::print("{:>6} {:>10}  {:<17} {:>10.1f} {:>10.1f}  {:>12.1f} {:>6.3f}  {:<13} {:>11.1f} {:>6.3f}\n", n,
                 units::format_bytes(bytes), r.algorithm + (r.channels > 1 ? fmt::format(" x{}", r.channels) : ""),
                 r.seconds * 1e6, r.busbw_bytes_per_s / units::kGB, h.seconds * 1e6, h.seconds / h.analytic.seconds,
                 strategy::to_string(r.analytic.algorithm), r.analytic.seconds * 1e6, r.seconds / r.analytic.seconds);
    }
  fmt::print(
      "   sim auto: NCCL-style rings, across nodes one channel per NIC, each a flat ring over all ranks: 2(n-1)\n"
      "   latency steps (small messages pay them: ratio > 1), but intra- and inter-node traffic pipelined (large\n"
      "   messages beat the analytic hierarchical sum: ratio < 1). sim analytic: the tuner's own algorithm\n"
      "   (two-level rings) -- matches the formula. Halving-doubling stands for the tuner's tree (same 2 log2 n\n"
      "   latency steps, (n-1)/n of its bandwidth term).\n\n");
}

// CPU seconds (user + sys) of this process and its reaped children: the simulation runs in a
// child, building the programs and summarising in this process.
double cpu_seconds() {
  double sum = 0;
  for (int who : {RUSAGE_SELF, RUSAGE_CHILDREN}) {
    rusage u{};
    getrusage(who, &u);
    sum += double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
  }
  return sum;
}

using parlab::median;

void speed_header() {
  fmt::print("{:<9} {:>5}  {:<44} {:<9} {:>8} {:>7} {:>6} {:>10} {:>9} {:>10}  {}\n", "model", "world", "plan", "mode",
             "wall s", "(range)", "CPU s", "messages", "flows", "msg/s", "goal");
}

void speed(const std::string& model_name, int world, const strategy::Plan& plan, const std::string& label, bool exact,
           double goal_seconds, int repeats) {
  const auto model = strategy::load_model(model_name);
  const auto cluster = strategy::with_world(strategy::load_cluster("dgx-a100"), world);
  sim::SimOptions o;
  o.warmup_steps = 0;
  o.steps = 1;
  o.coalesce_calls = o.merge_steps = o.closed_form = !exact;
  std::vector<double> walls, cpus;
  sim::SimResult s;
  for (int k = 0; k < repeats; ++k) {
    const double cpu0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    s = sim::simulate_plan(model, plan, cluster, o);
    walls.push_back(wall_since(t0));
    cpus.push_back(cpu_seconds() - cpu0);
  }
  const double wall = median(walls), cpu = median(cpus);
  const auto [lo, hi] = std::minmax_element(walls.begin(), walls.end());
  fmt::print(
      "{:<9} {:>5}  {:<44} {:<9} {:>8.2f} {:>7} {:>6.2f} {:>10} {:>9} {:>10.0f}  {}\n", model_name, world, label,
      exact ? "exact" : "default", wall, repeats > 1 ? fmt::format("{:.1f}-{:.1f}", *lo, *hi) : "-", cpu, s.messages,
      s.flows, double(s.messages) / wall,
      goal_seconds > 0 ? fmt::format("< {:.0f} s: {}", goal_seconds, wall < goal_seconds ? "met" : "MISSED") : "");
}

void speed(const std::string& model_name, int world, const std::string& text, bool exact, double goal_seconds,
           int repeats) {
  const auto model = strategy::load_model(model_name);
  const auto cluster = strategy::with_world(strategy::load_cluster("dgx-a100"), world);
  speed(model_name, world, resolved(model, cluster, world, text), text, exact, goal_seconds, repeats);
}

// The planner's best `k` plans for `model_name` on `world` dgx-a100 GPUs, simulated one step each.
void planner_top(const std::string& model_name, int world, int k, double goal_first, int repeats) {
  const auto model = strategy::load_model(model_name);
  const auto cluster = strategy::with_world(strategy::load_cluster("dgx-a100"), world);
  strategy::PlannerOptions po;
  po.top = k;
  const auto report = strategy::search_plans(model, cluster, po);
  for (size_t i = 0; i < report.top.size() && int(i) < k; ++i)
    speed(model_name, world, report.top[i].plan, fmt::format("#{} {}", i + 1, report.top[i].plan.short_name()), false,
          i == 0 ? goal_first : 0, repeats);
}

// ---- 4. the datacenter table --------------------------------------------------------------

struct TableRow {
  std::string model;
  int world;
  std::string plan;
  double goal_seconds;
  double goal_gb;  // peak RSS, process + simulating child; 0: none
};

const std::vector<TableRow>& table_rows() {
  static const std::vector<TableRow> rows = {
      {"gpt-1t", 4096, "tp=8,pp=8,dp=64,sp=on,recompute=selective", 30, 4},
      {"gpt-175b", 1024, "tp=8,dp=128,zero=3", 30, 0},
      {"gpt-175b", 1024, "tp=8,pp=8,dp=16,mb=1,gbs=512", 5, 0},
      {"gpt-175b", 1024, "tp=8,pp=8,dp=16,mb=1,gbs=1536,sp=on,recompute=selective,precision=mixed", 10, 0},
  };
  return rows;
}

struct Measured {
  double wall = 0, cpu = 0, rss_gb = 0, child_rss_gb = 0, step = 0;
  long long ops = 0, messages = 0, flows = 0;
};

double seconds_of(const timeval& t) { return double(t.tv_sec) + 1e-6 * double(t.tv_usec); }

// What `parlab simulate --model M --world W --plan P --steps 1` does, in a forked process whose
// heap dies with it; the figures come back through a pipe.
Measured measure_row(const TableRow& row) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  std::fflush(stdout);  // or the child inherits what is buffered and may write it again
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Measured m;
    const auto t0 = std::chrono::steady_clock::now();
    const auto model = strategy::load_model(row.model);
    const auto cluster = strategy::with_world(strategy::load_cluster("dgx-a100"), row.world);
    const auto plan = resolved(model, cluster, row.world, row.plan);
    sim::SimOptions o;
    o.warmup_steps = 1;
    o.steps = 1;
    const auto s = sim::simulate_plan(model, plan, cluster, o);
    [[maybe_unused]] const auto a = strategy::estimate_step(model, plan, cluster);  // as parlab simulate does
    m.wall = wall_since(t0);
    rusage self{}, children{};
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &children);
    m.cpu = seconds_of(self.ru_utime) + seconds_of(self.ru_stime) + seconds_of(children.ru_utime) +
            seconds_of(children.ru_stime);
    m.rss_gb = double(self.ru_maxrss) * 1024 / 1e9;
    m.child_rss_gb = double(children.ru_maxrss) * 1024 / 1e9;
    m.step = s.step_seconds;
    m.ops = s.ops, m.messages = s.messages, m.flows = s.flows;
    const std::string line = fmt::format("{} {} {} {} {} {} {} {}\n", m.wall, m.cpu, m.rss_gb, m.child_rss_gb, m.step,
                                         m.ops, m.messages, m.flows);
    [[maybe_unused]] auto n = write(fds[1], line.data(), line.size());
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  Measured m;
  std::istringstream in(text);
  in >> m.wall >> m.cpu >> m.rss_gb >> m.child_rss_gb >> m.step >> m.ops >> m.messages >> m.flows;
  return m;
}

std::string machine_line() {
  std::ifstream cpu("/proc/cpuinfo");
  std::string line, name = "unknown CPU";
  while (std::getline(cpu, line))
    if (line.rfind("model name", 0) == 0) {
      name = line.substr(line.find(':') + 2);
      break;
    }
  return fmt::format("{}, {} hardware threads", name, std::thread::hardware_concurrency());
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

std::string verdict(double value, double goal) { return value < goal ? "met" : "MISSED"; }

// The table (and the planner's search times) as Markdown rows, printed and, with --record, kept.
void datacenter_table(const std::string& record) {
  const std::string load_before = load_average();
  fmt::print(
      "4. The datacenter table: `parlab simulate ... --steps 1` (1 warm-up + 1 measured step, then the\n"
      "   analytic estimate), each in a fresh process; CPU: user + sys of it and its simulating child;\n"
      "   RSS: peak of the process + peak of its simulating child. Load average before: {}\n",
      load_before);
  std::string md =
      "| model | GPUs | plan | wall s | target | CPU s | peak RSS GB (process + simulation) | ops | simulated step s "
      "|\n"
      "| --- | ---: | --- | ---: | --- | ---: | --- | ---: | ---: |\n";
  for (const TableRow& row : table_rows()) {
    const Measured m = measure_row(row);
    const double rss = m.rss_gb + m.child_rss_gb;
    const std::string target =
        fmt::format("< {:.0f} s: {}", row.goal_seconds, verdict(m.wall, row.goal_seconds)) +
        (row.goal_gb > 0 ? fmt::format("; < {:.0f} GB: {}", row.goal_gb, verdict(rss, row.goal_gb)) : "");
    md += fmt::format("| {} | {} | {} | {:.1f} | {} | {:.1f} | {:.2f} ({:.2f} + {:.2f}) | {} | {:.4f} |\n", row.model,
                      row.world, row.plan, m.wall, target, m.cpu, rss, m.rss_gb, m.child_rss_gb, m.ops, m.step);
  }
  md += "\n| planner search | plans | search_seconds (median of 3) | target |\n| --- | ---: | ---: | --- |\n";
  for (const auto& [name, world, goal] : {std::tuple{"gpt-175b", 1024, 0.3}, std::tuple{"gpt-1t", 4096, 1.0}}) {
    const auto model = strategy::load_model(name);
    const auto cluster = strategy::with_world(strategy::load_cluster("dgx-a100"), world);
    std::vector<double> secs;
    strategy::PlanReport r;
    for (int k = 0; k < 3; ++k) {
      r = strategy::search_plans(model, cluster, {});
      secs.push_back(r.search_seconds);
    }
    const double t = median(secs);
    md += fmt::format("| {} x {} dgx-a100 | {} | {:.3f} | < {} s: {} |\n", name, world, r.evaluated, t, goal,
                      verdict(t, goal));
  }
  const std::string machine =
      fmt::format("{}; load average {} before, {} after", machine_line(), load_before, load_average());
  fmt::print("{}\nMachine: {}\n", md, machine);
  if (!record.empty()) {
    std::ofstream out(record);
    out << "// Written by bench_sim --record (bench/sim_bench.cpp); docs/validation.md shows it. Do not edit by hand.\n"
        << "R\"md(" << md << "\nMachine: " << machine << ".\n)md\"\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Simulator accuracy (vs the analytic model) and speed"};
  bool skip_big = false;
  int big_microbatches = 16;
  int repeats = 1;
  app.add_flag("--skip-big", skip_big, "Skip the 1024- and 4096-rank speed runs");
  app.add_option("--big-microbatches", big_microbatches, "Microbatches of the 1024-rank TP 8 x PP 8 x DP 16 plan")
      ->capture_default_str();
  app.add_option("--repeats", repeats, "Runs per speed row (the median is printed)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  bool speed_only = false;
  app.add_flag("--speed-only", speed_only, "Only sections 3 and 4 (simulator speed)");
  bool table_only = false;
  app.add_flag("--table", table_only, "Only section 4 (the datacenter table beside its targets)");
  std::string record;
  app.add_option("--record", record, "Write section 4's table, with the machine, to this file (sim/speed_record.inc)");
  CLI11_PARSE(app, argc, argv);

  if (table_only) {
    datacenter_table(record);
    return 0;
  }
  if (!speed_only) {
    fmt::print("1. ");
    accuracy_grid({{"gpt-22b", 16, "dp=16"},
                   {"gpt-22b", 16, "dp=16,zero=1"},
                   {"gpt-22b", 16, "dp=16,zero=3"},
                   {"gpt-22b", 16, "tp=8,dp=2"},
                   {"gpt-22b", 16, "tp=4,pp=4,microbatches=8"},
                   {"gpt-22b", 16, "tp=4,pp=4,microbatches=8,schedule=interleaved"},
                   {"gpt-22b", 64, "tp=8,pp=4,dp=2,microbatches=16,zero=1"},
                   {"gpt-175b", 64, "tp=8,pp=8,microbatches=16"},
                   {"llama2-7b", 128, "dp=128"},
                   {"llama2-7b", 128, "dp=128,zero=3"},
                   {"llama2-7b", 64, "tp=2,pp=2,dp=16,microbatches=4"},
                   {"gpt-22b", 16, "dp=16", "slow:rank=3,factor=1.5"},
                   {"gpt-22b", 16, "tp=4,pp=4,microbatches=8", "degrade-link:rank=5,factor=20"}},
                  "dgx-a100");
    fmt::print("1b. ");
    accuracy_grid({{"lab-mlp", 4, "dp=4"},
                   {"lab-mlp", 4, "dp=2,pp=2,microbatches=4"},
                   {"lab-mlp", 4, "pp=4,microbatches=4"},
                   {"lab-mlp", 4, "pp=4,microbatches=16"},
                   {"lab-mlp", 2, "dp=2"}},
                  "cpu-local");
    collective_sweep("dgx-a100");
  }

  fmt::print(
      "3. Simulator speed: one simulated step on dgx-a100 (the simulation runs on one core; wall: median of {}{})\n",
      repeats, repeats > 1 ? " runs, (range)" : " run");
  fmt::print(
      "   default: coalesced calls, merged ring steps, lone collective steps in closed form; exact: every call,\n"
      "   every step, every message a SimGrid flow. flows: the messages SimGrid carried.\n");
  speed_header();
  speed("gpt-175b", 64, "tp=8,pp=8,microbatches=16", false, 0, repeats);
  speed("gpt-175b", 64, "tp=8,pp=8,microbatches=16", true, 0, repeats);
  speed("gpt-22b", 64, "dp=64", false, 0, repeats);
  if (!skip_big) {
    speed("gpt-175b", 1024, "tp=8,pp=8,dp=16,microbatches=" + std::to_string(big_microbatches), false, 0, repeats);
    fmt::print(
        "   the planner's best three for gpt-175b on 1024 GPUs (parlab plan --model gpt-175b --cluster dgx-a100 "
        "--world 1024):\n");
    planner_top("gpt-175b", 1024, 3, 30, repeats);
    speed("gpt-1t", 4096, "tp=8,pp=8,dp=64", false, 60, repeats);
    fmt::print("\n");
    datacenter_table(record);
  }
  return 0;
}
