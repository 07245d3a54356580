#include "sim/simulate.h"

#include <cmath>
#include <thread>

#include "sim/executor.h"
#include "sim/isolate.h"
#include "sim/platform.h"
#include "sim/symmetry.h"
#include "base/errors.h"

namespace parlab::sim {

std::vector<strategy::StepProgram> build_programs(const strategy::ModelSpec& model, const strategy::Plan& plan) {
  std::vector<strategy::StepProgram> out;
  out.reserve(size_t(plan.world()));
  for (int r = 0; r < plan.world(); ++r) out.push_back(strategy::build_step(model, plan, r));
  return out;
}

namespace {

// What a simulation of `programs` needs besides them: the cluster sized to their world and the
// executor's options.
struct Prepared {
  strategy::ClusterSpec cluster;
  ExecOptions exec;
};

Prepared prepare(const strategy::Plan& plan, int world, const strategy::ModelSpec& model,
                 const strategy::ClusterSpec& cluster_in, const SimOptions& o) {
  if (o.steps < 1) throw ConfigError("--steps", std::to_string(o.steps), "must be at least 1");
  if (o.warmup_steps < 0) throw ConfigError("--warmup", std::to_string(o.warmup_steps), "must be >= 0");
  Prepared p{strategy::with_world(cluster_in, world), {}};
  make_layout(p.cluster, world);  // throws on a world the cluster cannot hold
  validate(o.faults, world);
  p.exec.steps = o.warmup_steps + o.steps;
  p.exec.schedule = {o.algorithm, o.coalesce_calls, o.merge_steps};
  p.exec.closed_form = o.closed_form;
  p.exec.gemms = strategy::GemmTimes(model, plan, p.cluster);
  return p;
}
Prepared prepare(const std::vector<strategy::StepProgram>& programs, const strategy::ModelSpec& model,
                 const strategy::ClusterSpec& cluster_in, const SimOptions& o) {
  return prepare(programs.front().plan, programs.front().world, model, cluster_in, o);
}

// The child's work: the executor's raw run as bytes, progress through `report`.
std::function<std::string(const ProgressFn&)> work(const std::vector<strategy::StepProgram>& programs,
                                                   const Prepared& p, const SimOptions& o) {
  return [&programs, &p, &o](const ProgressFn& report) {
    ExecOptions eo = p.exec;
    if (o.on_progress) eo.progress = report;
    return serialize(execute_symmetric(programs, p.cluster, o.faults, eo, o.tp_symmetry));
  };
}

SummaryOptions summary_options(const Prepared& p, const SimOptions& o) {
  SummaryOptions so;
  so.warmup_steps = o.warmup_steps;
  so.detail_ranks = o.detail_ranks;
  so.timeline = o.timeline;
  so.schedule = p.exec.schedule;
  so.faults = o.faults;
  return so;
}

SimResult summarize_run(const std::vector<strategy::StepProgram>& programs, const std::string& bytes,
                        const strategy::ModelSpec& model, const Prepared& p, const SimOptions& o) {
  return summarize(programs, deserialize(bytes), model, p.cluster, summary_options(p, o));
}

}  // namespace

SimResult simulate_programs(const std::vector<strategy::StepProgram>& programs, const strategy::ModelSpec& model,
                            const strategy::ClusterSpec& cluster, const SimOptions& o) {
  if (programs.empty()) return {};
  const Prepared p = prepare(programs, model, cluster, o);
  return summarize_run(programs, run_isolated(work(programs, p, o), {o.on_progress, o.cancel}), model, p, o);
}

SimResult simulate_plan(const strategy::ModelSpec& model, const strategy::Plan& plan,
                        const strategy::ClusterSpec& cluster, const SimOptions& o) {
  if (o.cancel && o.cancel->load()) throw SimulationCancelled();
  // Bad options, worlds and plans throw here, with their own types; rank 0's program (built once
  // more in the child) gives the plan as programs hold it, which the GEMM times are priced on.
  const strategy::StepProgram first = strategy::build_step(model, plan, 0);
  const Prepared p = prepare(first.plan, first.world, model, cluster, o);
  // The simulating child builds the programs, runs them and summarizes its own run: the parent
  // never holds the programs or the raw run (4096 ranks' are GBs), only the result.
  const std::string bytes = run_isolated(
      [&](const ProgressFn& report) {
        ExecOptions eo = p.exec;
        if (o.on_progress) eo.progress = report;
        if (o.tp_symmetry)
          if (auto r = simulate_symmetric(model, plan, p.cluster, o.faults, eo, summary_options(p, o)))
            return serialize(*r);
        if (o.on_progress) report(0.0, "building " + std::to_string(plan.world()) + " step programs");
        const auto programs = build_programs(model, plan);
        const RawRun run = execute_symmetric(programs, p.cluster, o.faults, eo, o.tp_symmetry);
        return serialize(summarize(programs, run, model, p.cluster, summary_options(p, o)));
      },
      {o.on_progress, o.cancel});
  return deserialize_result(bytes);
}

std::vector<SimResult> simulate_plans(const strategy::ModelSpec& model, const std::vector<strategy::Plan>& plans,
                                      const strategy::ClusterSpec& cluster, const SimOptions& o, int parallel) {
  if (parallel <= 0) parallel = int(std::max(1u, std::thread::hardware_concurrency()));
  // Plan k's programs are built just before its process starts, while the earlier ones run.
  std::vector<std::vector<strategy::StepProgram>> programs(plans.size());
  std::vector<Prepared> prepared(plans.size());
  auto build = [&](size_t k) {
    if (o.cancel && o.cancel->load()) throw SimulationCancelled();
    if (o.on_progress)
      o.on_progress(0.0, "building " + std::to_string(plans[k].world()) + " step programs of plan " +
                             std::to_string(k + 1) + " of " + std::to_string(plans.size()));
    programs[k] = build_programs(model, plans[k]);
    prepared[k] = prepare(programs[k], model, cluster, o);
  };
  std::vector<std::function<std::string(const ProgressFn&)>> works;
  for (size_t k = 0; k < plans.size(); ++k) works.push_back(work(programs[k], prepared[k], o));
  // Progress: the mean over the plans, and the line of the one reporting.
  std::vector<double> fraction(plans.size(), 0.0);
  JobProgressFn progress;
  if (o.on_progress)
    progress = [&](size_t job, double f, std::string_view what) {
      fraction[job] = f;
      double mean = 0;
      for (double x : fraction) mean += x / double(fraction.size());
      o.on_progress(mean, "plan " + std::to_string(job + 1) + ": " + std::string(what));
    };
  const auto bytes = run_isolated_all(works, parallel, progress, o.cancel, build);
  std::vector<SimResult> out;
  for (size_t k = 0; k < plans.size(); ++k) {
    out.push_back(summarize_run(programs[k], bytes[k], model, prepared[k], o));
    programs[k].clear();
  }
  return out;
}

CollectiveResult simulate_collective(strategy::CollectiveOp op, double bytes, int ranks,
                                     const strategy::ClusterSpec& cluster_in, const ScheduleOptions& schedule,
                                     const std::vector<Fault>& faults, bool closed_form) {
  if (ranks < 1) throw ConfigError("--ranks", std::to_string(ranks), "must be a positive number of ranks");
  if (!(bytes >= 0) || !std::isfinite(bytes)) throw ConfigError("--bytes", std::to_string(bytes), "must be >= 0");
  const strategy::ClusterSpec cluster = strategy::with_world(cluster_in, ranks);
  const Layout layout = make_layout(cluster, ranks);
  validate(faults, ranks);

  // Every rank: one collective over the world group on its comm stream.
  strategy::Plan plan;
  plan.dp = ranks;
  plan.microbatches = 1;
  plan.microbatch = 1;
  plan.global_batch = plan.microbatch * plan.microbatches * plan.dp;  // a lone collective: no batch of its own
  strategy::Group world{strategy::GroupKind::kWorld, "world", {}};
  for (int r = 0; r < ranks; ++r) world.ranks.push_back(r);
  strategy::Op op_template;
  op_template.kind = op == strategy::CollectiveOp::kAllReduce       ? strategy::OpKind::kAllReduce
                     : op == strategy::CollectiveOp::kReduceScatter ? strategy::OpKind::kReduceScatter
                     : op == strategy::CollectiveOp::kAllGather     ? strategy::OpKind::kAllGather
                                                                    : strategy::OpKind::kBroadcast;
  op_template.stream = strategy::Stream::kComm;
  op_template.tag = "collective";
  op_template.group = 0;
  op_template.bytes = bytes;
  std::vector<strategy::StepProgram> programs(ranks);
  for (int r = 0; r < ranks; ++r) {
    programs[r].rank = r;
    programs[r].world = ranks;
    programs[r].plan = plan;
    programs[r].groups = {world};
    programs[r].ops = {op_template};
  }
  ExecOptions eo;
  eo.steps = 1;
  eo.schedule = schedule;
  eo.closed_form = closed_form;
  const RawRun run = deserialize(run_isolated([&] { return serialize(execute(programs, cluster, faults, eo)); }));

  CollectiveResult out;
  out.op = op;
  out.bytes = bytes;
  out.ranks = ranks;
  const Schedule s = collective_schedule(op, bytes, 1, world.ranks, layout, cluster, schedule);
  out.algorithm = s.algorithm;
  out.protocol = s.protocol;
  out.channels = s.channels;
  out.seconds = run.records.at(0).at(0).end - run.records.at(0).at(0).start;
  out.messages = run.messages;
  out.flows = run.flows;
  if (out.seconds > 0) {
    out.algbw_bytes_per_s = strategy::algbw_bytes_per_s(bytes, out.seconds);
    out.busbw_bytes_per_s = strategy::busbw_bytes_per_s(op, ranks, bytes, out.seconds);
  }
  out.analytic = strategy::collective_time(op, bytes, world.ranks, cluster);
  return out;
}

nlohmann::json to_json(const CollectiveResult& r) {
  return {{"op", std::string(strategy::to_string(r.op))},
          {"bytes", r.bytes},
          {"ranks", r.ranks},
          {"algorithm", r.algorithm},
          {"protocol", r.protocol},
          {"channels", r.channels},
          {"seconds", r.seconds},
          {"algbw_bytes_per_s", r.algbw_bytes_per_s},
          {"busbw_bytes_per_s", r.busbw_bytes_per_s},
          {"messages", r.messages},
          {"analytic",
           {{"seconds", r.analytic.seconds},
            {"algorithm", std::string(strategy::to_string(r.analytic.algorithm))},
            {"algbw_bytes_per_s", r.analytic.algbw_bytes_per_s},
            {"busbw_bytes_per_s", r.analytic.busbw_bytes_per_s}}}};
}

}  // namespace parlab::sim
