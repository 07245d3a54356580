#include "sim/symmetry.h"

#include <string>
#include <utility>

#include "sim/platform.h"
#include "sim/result.h"
#include "base/errors.h"

namespace parlab::sim {
using strategy::GroupKind;
using strategy::Op;
using strategy::StepProgram;

namespace {

bool same_layers(const strategy::LayerRange& a, const strategy::LayerRange& b) {
  return a.begin == b.begin && a.end == b.end;
}

// Op `b` of the rank `offset` positions after op `a`'s: the same work, its peer shifted.
bool same_op(const Op& a, const Op& b, int offset) {
  const bool peer = a.peer < 0 ? b.peer == a.peer : b.peer == a.peer + offset;
  return a.id == b.id && a.kind == b.kind && a.stream == b.stream && a.phase == b.phase && a.flops == b.flops &&
         a.memory_bytes == b.memory_bytes && a.zeroed_bytes == b.zeroed_bytes &&
         a.first_write_bytes == b.first_write_bytes && a.accumulated_bytes == b.accumulated_bytes &&
         same_layers(a.layers, b.layers) && a.microbatch == b.microbatch && a.chunk == b.chunk && a.group == b.group &&
         a.bytes == b.bytes && a.count == b.count && a.pattern_calls == b.pattern_calls &&
         a.pattern_gathers == b.pattern_gathers && peer && a.flat_begin == b.flat_begin && a.flat_end == b.flat_end &&
         a.min_chunk_bytes == b.min_chunk_bytes && a.overlaps_compute == b.overlaps_compute && a.deps == b.deps &&
         a.tag == b.tag;
}

// Group `b` of the rank `offset` positions after the one holding `a`: the same TP group, any other
// group shifted by the offset.
bool same_group(const strategy::Group& a, const strategy::Group& b, int offset) {
  if (a.kind != b.kind || a.ranks.size() != b.ranks.size()) return false;
  const int shift = a.kind == GroupKind::kTP ? 0 : offset;
  for (size_t k = 0; k < a.ranks.size(); ++k)
    if (b.ranks[k] != a.ranks[k] + shift) return false;
  return true;
}

// The groups a program's collectives use (every program also lists the world, which none may).
std::vector<const strategy::Group*> used_groups(const StepProgram& p) {
  std::vector<char> used(p.groups.size(), 0);
  for (const Op& op : p.ops)
    if (op.is_collective()) used.at(size_t(op.group)) = 1;
  std::vector<const strategy::Group*> out;
  for (size_t g = 0; g < p.groups.size(); ++g)
    if (used[g]) out.push_back(&p.groups[g]);
  return out;
}

bool same_program(const StepProgram& rep, const StepProgram& p, int offset) {
  if (p.rank != rep.rank + offset || p.stage != rep.stage || p.ops.size() != rep.ops.size() ||
      p.groups.size() != rep.groups.size())
    return false;
  for (const strategy::Group* g : used_groups(rep))
    if (!same_group(*g, p.groups[size_t(g - rep.groups.data())], offset)) return false;
  for (size_t k = 0; k < rep.ops.size(); ++k)
    if (!same_op(rep.ops[k], p.ops[k], offset)) return false;
  return true;
}

// Where the traffic of `p` goes: TP groups inside one node, everything else between nodes.
std::string placement_problem(const StepProgram& p, const Layout& layout) {
  const auto used = used_groups(p);
  for (const strategy::Group* group : used) {
    const strategy::Group& g = *group;
    for (size_t a = 0; a < g.ranks.size(); ++a)
      for (size_t b = a + 1; b < g.ranks.size(); ++b) {
        const bool same = layout.same_node(g.ranks[a], g.ranks[b]);
        if (g.kind == GroupKind::kTP && !same) return "TP group " + g.name + " spans nodes";
        if (g.kind != GroupKind::kTP && same) return "group " + g.name + " has two ranks in one node";
      }
  }
  for (const strategy::Group* g : used)
    for (int r : g->ranks)
      if (g->kind != GroupKind::kTP && strategy::coords_of(p.plan, r).tp != 0)
        return "group " + g->name + " joins ranks of different TP positions";
  for (const Op& op : p.ops) {
    if (op.peer < 0) continue;
    if (layout.same_node(p.rank, op.peer)) return "rank " + std::to_string(p.rank) + " sends inside its node";
    if (strategy::coords_of(p.plan, op.peer).tp != 0)
      return "rank " + std::to_string(p.rank) + " sends to another TP position";
  }
  return "";
}

std::string cluster_problem(const strategy::ClusterSpec& cluster, const Layout& layout,
                            const std::vector<Fault>& faults, const ExecOptions& options) {
  if (!options.closed_form) return "collectives are simulated as flows (closed form off)";
  if (cluster.shares_cores()) return "ranks share cores (cpu-local)";
  if (!faults.empty()) return "faults name ranks";
  if (layout.nic_links_per_node != layout.devices_per_node) return "devices share NICs";
  return "";
}

}  // namespace

Symmetry tp_symmetry(const std::vector<StepProgram>& programs, const strategy::ClusterSpec& cluster,
                     const std::vector<Fault>& faults, const ExecOptions& options) {
  if (programs.empty()) return {};
  const int tp = programs.front().plan.tp;
  if (tp <= 1) return {};
  const int world = programs.front().world;
  if (int(programs.size()) != world) return {1, "not every rank's program is given"};
  for (int r = 0; r < world; ++r)
    if (programs[size_t(r)].rank != r) return {1, "the programs are not in rank order"};
  const Layout layout = make_layout(cluster, world);
  if (std::string why = cluster_problem(cluster, layout, faults, options); !why.empty()) return {1, why};
  for (const StepProgram& p : programs) {
    const int position = strategy::coords_of(p.plan, p.rank).tp;
    if (position == 0) {
      if (std::string why = placement_problem(p, layout); !why.empty()) return {1, why};
      continue;
    }
    if (!same_program(programs[size_t(p.rank - position)], p, position))
      return {1, "rank " + std::to_string(p.rank) + "'s program is not its TP position 0's"};
  }
  return {tp, ""};
}

RawRun replicate(RawRun reps, const std::vector<StepProgram>& programs) {
  RawRun out;
  out.steps = reps.steps;
  out.stopped = std::move(reps.stopped);
  out.blocked = std::move(reps.blocked);
  out.pending = std::move(reps.pending);
  out.end_seconds = reps.end_seconds;
  out.messages = reps.messages, out.flows = reps.flows;
  out.closed_form_steps = reps.closed_form_steps, out.preempted_steps = reps.preempted_steps;
  out.ops = reps.ops;
  out.records.resize(programs.size());
  out.step_start.resize(programs.size());
  out.sent_bytes.resize(programs.size());
  size_t k = 0;  // the representative's index in `reps`
  for (size_t i = 0; i < programs.size(); ++i) {
    const int position = strategy::coords_of(programs[i].plan, programs[i].rank).tp;
    if (position == 0 && i > 0) ++k;
    if (k >= reps.records.size()) throw RuntimeError("replicate: fewer representatives than TP groups");
    out.records[i] = reps.records[k];
    out.step_start[i] = reps.step_start[k];
    out.sent_bytes[i] = reps.sent_bytes[k];
  }
  return out;
}

RawRun execute_symmetric(const std::vector<StepProgram>& programs, const strategy::ClusterSpec& cluster,
                         const std::vector<Fault>& faults, ExecOptions options, bool allow) {
  const Symmetry sym = allow ? tp_symmetry(programs, cluster, faults, options) : Symmetry{};
  if (sym.replicas <= 1) return execute(programs, cluster, faults, options);
  std::vector<StepProgram> reps;
  reps.reserve(programs.size() / size_t(sym.replicas));
  for (const StepProgram& p : programs)
    if (strategy::coords_of(p.plan, p.rank).tp == 0) reps.push_back(p);
  options.tp_replicas = sym.replicas;
  if (options.progress)
    options.progress(0.0, "simulating " + std::to_string(reps.size()) + " of " + std::to_string(programs.size()) +
                              " ranks: the other TP positions are their replicas");
  return replicate(execute(reps, cluster, faults, options), programs);
}

}  // namespace parlab::sim

namespace parlab::sim {
namespace {

// Position 0's programs, in rank order, or none when a condition fails on them: each placed as
// the conditions say, and every position of each stage's first TP group (data-parallel index 0)
// the same program as its position 0's. The other data-parallel replicas' positions are made by
// the same generators from the same stage and position (the tests compare whole runs).
std::optional<std::vector<StepProgram>> representatives(const strategy::ModelSpec& model, const strategy::Plan& plan,
                                                        const Layout& layout) {
  std::vector<StepProgram> reps;
  reps.reserve(size_t(plan.world() / plan.tp));
  for (int r = 0; r < plan.world(); r += plan.tp) {
    reps.push_back(strategy::build_step(model, plan, r));
    if (!placement_problem(reps.back(), layout).empty()) return std::nullopt;
  }
  for (int stage = 0; stage < plan.pp; ++stage) {
    const int first = strategy::rank_of(plan, {0, 0, stage});
    for (int position = 1; position < plan.tp; ++position)
      if (!same_program(reps[size_t(first / plan.tp)], strategy::build_step(model, plan, first + position), position))
        return std::nullopt;
  }
  return reps;
}

// The summary of every rank from the representatives' (a position's times are its position 0's).
SimResult every_rank(SimResult out, int tp) {
  std::vector<strategy::RankTimes> ranks;
  std::vector<double> sent;
  ranks.reserve(out.ranks.size() * size_t(tp));
  sent.reserve(ranks.capacity());
  for (size_t k = 0; k < out.ranks.size(); ++k)
    for (int position = 0; position < tp; ++position) {
      ranks.push_back(out.ranks[k]);
      ranks.back().rank += position;
      sent.push_back(out.sent_bytes[k]);
    }
  out.ranks = std::move(ranks);
  out.sent_bytes = std::move(sent);
  return out;
}

}  // namespace

std::optional<SimResult> simulate_symmetric(const strategy::ModelSpec& model, const strategy::Plan& plan,
                                            const strategy::ClusterSpec& cluster, const std::vector<Fault>& faults,
                                            ExecOptions options, const SummaryOptions& summary) {
  if (plan.tp <= 1 || summary.timeline) return std::nullopt;
  for (int r : summary.detail_ranks)
    if (strategy::coords_of(plan, r).tp != 0) return std::nullopt;
  const Layout layout = make_layout(cluster, plan.world());
  if (!cluster_problem(cluster, layout, faults, options).empty()) return std::nullopt;
  if (options.progress) options.progress(0.0, "building " + std::to_string(plan.world() / plan.tp) + " step programs");
  auto reps = representatives(model, plan, layout);
  if (!reps) return std::nullopt;
  options.tp_replicas = plan.tp;
  if (options.progress)
    options.progress(0.0, "simulating " + std::to_string(reps->size()) + " of " + std::to_string(plan.world()) +
                              " ranks: the other TP positions are their replicas");
  const RawRun run = execute(*reps, cluster, faults, options);
  if (run.deadlock()) return std::nullopt;
  return every_rank(summarize(*reps, run, model, cluster, summary), plan.tp);
}

}  // namespace parlab::sim
