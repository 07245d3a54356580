#include "sim/result.h"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "strategy/consistency.h"

namespace parlab::sim {
namespace {

using strategy::Op;
using strategy::OpKind;
using strategy::StepProgram;
using strategy::Stream;

struct Split {
  double compute = 0, exposed = 0;
};

// The analytic walker's classification of one rank's compute stream in one step (cost_model.cpp):
// an idle gap before an op is exposed communication when the op waited for a communication-
// stream collective that ended no earlier than the op started, otherwise bubble; compute-stream
// collectives are exposed communication; comm-stream collectives still running after the
// compute stream's last op hold the step too.
Split classify(const StepProgram& p, const OpRecord* rec, double step_start) {
  Split out;
  double free_at = step_start;
  double last_comm_collective_end = step_start;
  for (const Op& op : p.ops) {
    const OpRecord& r = rec[op.id];
    if (op.stream != Stream::kCompute) {
      if (op.is_collective()) last_comm_collective_end = std::max(last_comm_collective_end, r.end);
      continue;
    }
    double dep_end = 0;
    bool dep_is_comm = false;
    for (int d : op.deps) {
      if (rec[d].end > dep_end) {
        dep_end = rec[d].end;
        const Op& dop = p.ops[d];
        dep_is_comm = dop.stream == Stream::kComm && dop.is_collective();
      }
    }
    const double gap = r.start - free_at;
    if (gap > 0 && dep_is_comm && dep_end >= r.start) out.exposed += gap;
    if (op.is_compute())
      out.compute += r.end - r.start;
    else if (op.is_collective())
      out.exposed += r.end - r.start;
    free_at = op.kind == OpKind::kSend ? r.start : r.end;
  }
  out.exposed += std::max(0.0, last_comm_collective_end - free_at);
  return out;
}

bool step_complete(const StepProgram& p, const RawRun& run, size_t i, int s) {
  if (run.step_start[i][s] < 0) return false;
  const size_t n = p.ops.size();
  for (size_t k = 0; k < n; ++k)
    if (run.records[i][size_t(s) * n + k].end < 0) return false;
  return true;
}

std::string op_name(const Op& op) { return std::string(strategy::to_string(op.kind)) + " " + op.tag; }

// The call number of a collective within its group in one step.
int call_in_step(const StepProgram& p, const Op& target) {
  int call = 0;
  for (const Op& op : p.ops) {
    if (op.id == target.id) return call;
    if (op.is_collective() && op.group == target.group) ++call;
  }
  return -1;
}

std::vector<trace::Event> timeline(const std::vector<StepProgram>& programs, const RawRun& run) {
  std::vector<trace::Event> out;
  for (size_t i = 0; i < programs.size(); ++i) {
    const StepProgram& p = programs[i];
    const size_t n = p.ops.size();
    for (int s = 0; s < run.steps; ++s)
      for (const Op& op : p.ops) {
        const OpRecord& r = run.records[i][size_t(s) * n + op.id];
        if (r.ready < 0) continue;
        trace::Event e;
        e.rank = p.rank;
        e.stream = std::string(strategy::to_string(op.stream));
        e.name = op_name(op);
        const bool blocked = r.end < 0;
        if (blocked) e.name = "(blocked) " + e.name;
        e.start_seconds = r.start >= 0 ? r.start : r.ready;
        e.end_seconds = blocked ? run.end_seconds : r.end;
        e.args = {{"step", std::to_string(s)}, {"op_id", std::to_string(op.id)}};
        if (op.microbatch >= 0) e.args.push_back({"microbatch", std::to_string(op.microbatch)});
        if (op.is_compute()) e.args.push_back({"flops", fmt::format("{:.6g}", op.flops)});
        if (op.is_collective() || op.is_p2p()) e.args.push_back({"bytes", fmt::format("{:.0f}", op.bytes)});
        if (op.count > 1) e.args.push_back({"count", std::to_string(op.count)});
        if (op.is_collective()) e.args.push_back({"group", p.group_of(op).name});
        if (op.is_p2p()) e.args.push_back({"peer", std::to_string(op.peer)});
        if (op.is_collective() && r.start > r.ready)
          e.args.push_back({"waited_for_group_us", fmt::format("{:.3f}", (r.start - r.ready) * 1e6)});
        out.push_back(std::move(e));
      }
  }
  // By rank, then compute before comm, then time (program order breaks ties).
  std::stable_sort(out.begin(), out.end(), [](const trace::Event& a, const trace::Event& b) {
    return std::make_tuple(a.rank, a.stream != "compute", a.start_seconds) <
           std::make_tuple(b.rank, b.stream != "compute", b.start_seconds);
  });
  return out;
}

// What a collective library sees of a call: the operation, its size and its repetitions.
std::tuple<int, double, int> call_of(const Op& op) { return {int(op.kind), op.bytes, op.count}; }

std::tuple<int, double, int> majority_call(const PendingCollective& pc,
                                           const std::map<int, const StepProgram*>& by_rank) {
  std::map<std::tuple<int, double, int>, std::pair<int, int>> votes;  // call -> (count, -lowest rank)
  for (size_t k = 0; k < pc.arrived.size(); ++k) {
    auto& v = votes[call_of(by_rank.at(pc.arrived[k])->ops[pc.ops[k]])];
    if (v.first++ == 0) v.second = -pc.arrived[k];
  }
  auto best = votes.begin();
  for (auto it = votes.begin(); it != votes.end(); ++it)
    if (it->second > best->second) best = it;
  return best->first;
}

// A run's hang, indexed: programs by rank, pending collectives by group and call number.
struct HangIndex {
  std::map<int, const StepProgram*> by_rank;
  std::map<std::pair<std::string, int64_t>, const PendingCollective*> pending;
};

// Whom a member blocked in collective `op` of group `g` waits for: the members that never reached
// the call and, when members called different things, the ones that left the call most members
// made (as strategy/consistency.h picks its reference). Ascending.
std::vector<int> missing_members(const Op& op, const strategy::Group& g, const PendingCollective& pc,
                                 const std::map<int, const StepProgram*>& by_rank) {
  std::vector<int> out;
  for (int r : g.ranks)
    if (!std::binary_search(pc.arrived.begin(), pc.arrived.end(), r)) out.push_back(r);
  const auto reference = majority_call(pc, by_rank);
  if (call_of(op) == reference)
    for (size_t k = 0; k < pc.arrived.size(); ++k)
      if (call_of(by_rank.at(pc.arrived[k])->ops[pc.ops[k]]) != reference) out.push_back(pc.arrived[k]);
  std::sort(out.begin(), out.end());
  return out;
}

// Where one blocked stream waits, and for whom.
Waiter waiter_of(const BlockedStream& b, const std::vector<StepProgram>& programs, const RawRun& run,
                 const HangIndex& index) {
  const StepProgram& p = *index.by_rank.at(b.rank);
  Waiter w;
  w.rank = b.rank;
  w.stream = b.stream == 0 ? "compute" : "comm";
  w.step = b.step;
  w.op_id = b.op;
  w.since_seconds = b.since_seconds;
  if (b.op < 0) return w;
  const Op& op = p.ops[b.op];
  w.op = std::string(strategy::to_string(op.kind));
  w.tag = op.tag;
  if (op.is_collective()) {
    const auto& g = p.group_of(op);
    w.group = g.name;
    w.call = call_in_step(p, op);
    auto it = index.pending.find({g.name, b.sequence});
    if (it != index.pending.end()) w.waiting_for = missing_members(op, g, *it->second, index.by_rank);
  } else if (op.kind == OpKind::kRecv) {
    w.waiting_for.push_back(op.peer);
  }
  const size_t i = size_t(&p - programs.data());
  for (int d : op.deps)
    if (w.waiting_on_op < 0 && run.records[i][size_t(b.step) * p.ops.size() + d].end < 0) w.waiting_on_op = d;
  return w;
}

// One line per collective whose members called different things, naming who called what.
std::vector<std::string> mismatch_lines(const RawRun& run, const std::map<int, const StepProgram*>& by_rank) {
  std::vector<std::string> out;
  for (const auto& pc : run.pending) {
    if (!pc.mismatch) continue;
    // Group the arrivals by the call they made.
    std::map<std::string, std::vector<int>> by_call;
    for (size_t k = 0; k < pc.arrived.size(); ++k) {
      const StepProgram& p = *by_rank.at(pc.arrived[k]);
      by_call[strategy::describe(p, p.ops[pc.ops[k]])].push_back(pc.arrived[k]);
    }
    std::string line = fmt::format("group {} call #{} (over all steps) does not match:", pc.group, pc.sequence);
    for (const auto& [call, ranks] : by_call)
      line += fmt::format(" rank {} called {};", strategy::join_ranks(ranks), call);
    line.pop_back();
    out.push_back(line);
  }
  return out;
}

// A waiter as one readable line.
std::string waiter_line(const Waiter& w, const std::map<int, const StepProgram*>& by_rank) {
  std::string line = fmt::format("rank {} ({}) waits since {:.6f} s in ", w.rank, w.stream, w.since_seconds);
  if (w.op_id < 0)
    line += fmt::format("the start of step {} for its other stream", w.step);
  else if (!w.group.empty())
    line += fmt::format("{} {} [group {}, call #{} of step {}]", w.op, w.tag, w.group, w.call, w.step);
  else
    line += fmt::format("{}{} (op {} of step {})", w.op, w.tag == w.op ? "" : " " + w.tag, w.op_id, w.step);
  if (w.waiting_on_op >= 0) {
    const StepProgram& p = *by_rank.at(w.rank);
    const Op& dep = p.ops[w.waiting_on_op];
    line += fmt::format(", for {} {} (op {}, {} stream)", strategy::to_string(dep.kind), dep.tag, dep.id,
                        strategy::to_string(dep.stream));
  }
  if (!w.waiting_for.empty()) line += "; missing: rank " + strategy::join_ranks(w.waiting_for);
  return line;
}

std::string stopped_line(int rank, const std::vector<Fault>& faults) {
  std::string why;
  for (const auto& f : faults)
    if (f.kind == FaultKind::kStop && f.rank == rank) why = " (fault " + to_string(f) + ")";
  return fmt::format("rank {} stopped issuing ops{}", rank, why);
}

HangReport hang_report(const std::vector<StepProgram>& programs, const RawRun& run, const std::vector<Fault>& faults) {
  HangReport h;
  h.deadlock = run.deadlock();
  h.at_seconds = run.end_seconds;
  h.stopped_ranks = run.stopped;
  std::sort(h.stopped_ranks.begin(), h.stopped_ranks.end());
  HangIndex index;
  for (const auto& p : programs) index.by_rank[p.rank] = &p;
  for (const auto& pc : run.pending) index.pending[{pc.group, pc.sequence}] = &pc;
  std::set<int> missing;
  for (const BlockedStream& b : run.blocked) {
    Waiter w = waiter_of(b, programs, run, index);
    missing.insert(w.waiting_for.begin(), w.waiting_for.end());
    h.waiting.push_back(std::move(w));
  }
  h.mismatches = mismatch_lines(run, index.by_rank);
  std::sort(h.waiting.begin(), h.waiting.end(),
            [](const Waiter& a, const Waiter& b) { return std::tie(a.rank, a.stream) < std::tie(b.rank, b.stream); });
  h.missing_ranks.assign(missing.begin(), missing.end());
  for (const Waiter& w : h.waiting) h.lines.push_back(waiter_line(w, index.by_rank));
  for (const auto& m : h.mismatches) h.lines.push_back(m);
  for (int r : h.stopped_ranks) h.lines.push_back(stopped_line(r, faults));
  return h;
}

std::vector<int> default_detail_ranks(const std::vector<StepProgram>& programs) {
  std::vector<int> out;
  for (const auto& p : programs) {
    const auto c = strategy::coords_of(p.plan, p.rank);
    if (c.dp == 0 && c.tp == 0) out.push_back(p.rank);
  }
  return out;
}

// When each step ended (the last rank's last op), for the steps every rank completed, in order.
std::vector<double> step_ends(const std::vector<StepProgram>& programs, const RawRun& run) {
  std::vector<double> ends;
  for (int s = 0; s < run.steps; ++s) {
    double end = 0;
    bool complete = true;
    for (size_t i = 0; i < programs.size() && complete; ++i) {
      complete = step_complete(programs[i], run, i, s);
      const size_t n = programs[i].ops.size();
      for (size_t k = 0; complete && k < n; ++k) end = std::max(end, run.records[i][size_t(s) * n + k].end);
    }
    if (!complete) break;
    ends.push_back(end);
  }
  return ends;
}

// The step time and every rank's compute / exposed communication / bubble, averaged over the
// measured steps [first, last); ranks sorted by rank.
void measure_ranks(SimResult& out, const std::vector<StepProgram>& programs, const RawRun& run, int first, int last) {
  out.ranks.resize(programs.size());
  out.sent_bytes.resize(programs.size());
  for (size_t i = 0; i < programs.size(); ++i) {
    auto& r = out.ranks[i];
    r.rank = programs[i].rank;
    r.stage = programs[i].stage;
    out.sent_bytes[i] = run.steps > 0 ? run.sent_bytes[i] / run.steps : 0;
  }
  if (out.measured_steps > 0) {
    for (int s = first; s < last; ++s) out.step_seconds += out.step_seconds_each[s];
    out.step_seconds /= out.measured_steps;
    for (size_t i = 0; i < programs.size(); ++i) {
      auto& r = out.ranks[i];
      const size_t n = programs[i].ops.size();
      for (int s = first; s < last; ++s) {
        const Split sp = classify(programs[i], &run.records[i][size_t(s) * n], run.step_start[i][s]);
        r.compute_seconds += sp.compute / out.measured_steps;
        r.exposed_comm_seconds += sp.exposed / out.measured_steps;
        r.bubble_seconds += std::max(0.0, out.step_seconds_each[s] - sp.compute - sp.exposed) / out.measured_steps;
      }
      r.step_seconds = out.step_seconds;
    }
  }
  std::sort(out.ranks.begin(), out.ranks.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
}

// Collectives of the detail ranks in step `s`, which began at `t0` (times relative to it), with
// the algorithm each ran; sorted by rank, then start.
std::vector<strategy::CollectiveTiming> detail_collectives(const std::vector<StepProgram>& programs, const RawRun& run,
                                                           const strategy::ClusterSpec& cluster,
                                                           const SummaryOptions& o, int s, double t0) {
  std::vector<strategy::CollectiveTiming> out;
  const std::vector<int> detail = o.detail_ranks.empty() ? default_detail_ranks(programs) : o.detail_ranks;
  const Layout layout = make_layout(cluster, programs.front().world);
  std::map<std::tuple<int, double, double, int, std::vector<int>>, std::string> algorithms;
  for (size_t i = 0; i < programs.size(); ++i) {
    const StepProgram& p = programs[i];
    if (std::find(detail.begin(), detail.end(), p.rank) == detail.end()) continue;
    for (const Op& op : p.ops) {
      if (!op.is_collective()) continue;
      const OpRecord& r = run.records[i][size_t(s) * p.ops.size() + op.id];
      const auto& g = p.group_of(op);
      auto key = std::make_tuple(int(op.kind), op.bytes, op.min_chunk_bytes, op.count, g.ranks);
      auto it = algorithms.find(key);
      if (it == algorithms.end())
        it = algorithms
                 .emplace(key, collective_schedule(strategy::collective_of(op.kind), op.bytes, op.count, g.ranks,
                                                   layout, cluster, o.schedule, op.min_chunk_bytes)
                                   .algorithm)
                 .first;
      out.push_back({p.rank, op.id, std::string(strategy::to_string(op.kind)), g.name, op.tag, op.bytes, op.count,
                     g.size(), r.start - t0, r.end - t0, (r.end - r.start) / std::max(1, op.count), it->second});
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return std::tie(a.rank, a.start_seconds, a.op_id) < std::tie(b.rank, b.start_seconds, b.op_id);
  });
  return out;
}

// The bubble fractions, throughput and MFU as the analytic model computes them (cost_model.cpp).
void add_bubbles_and_rates(SimResult& out, const strategy::Plan& plan, const strategy::ModelSpec& model,
                           const strategy::ClusterSpec& cluster) {
  if (plan.pp > 1) {
    out.bubble_fraction_of_ideal = strategy::bubble_fraction_of_ideal(plan.pp, plan.v, plan.microbatches);
    out.bubble_fraction_of_total = strategy::bubble_fraction_of_total(plan.pp, plan.v, plan.microbatches);
  }
  if (!(out.step_seconds > 0)) return;
  double bubble = 0;
  for (const auto& r : out.ranks) bubble = std::max(bubble, r.bubble_seconds);
  out.walked_bubble_fraction = bubble / out.step_seconds;
  const double samples = double(plan.global_batch);
  const double tokens = samples * double(model.tokens_per_sample());
  out.samples_per_s = samples / out.step_seconds;
  out.tokens_per_s = tokens / out.step_seconds;
  const double peak =
      plan.precision == strategy::Precision::kFp32 ? cluster.device.peak_flops_fp32 : cluster.device.peak_flops_bf16;
  const double model_flops = (model.forward_flops_per_token() + model.backward_flops_per_token()) * tokens;
  out.mfu = model_flops / (out.step_seconds * plan.world() * peak);
}

}  // namespace

SimResult summarize(const std::vector<StepProgram>& programs, const RawRun& run, const strategy::ModelSpec& model,
                    const strategy::ClusterSpec& cluster, const SummaryOptions& o) {
  SimResult out;
  out.warmup_steps = o.warmup_steps;
  out.messages = run.messages;
  out.flows = run.flows;
  out.closed_form_steps = run.closed_form_steps;
  out.preempted_steps = run.preempted_steps;
  out.ops = run.ops;
  out.simulated_seconds = run.end_seconds;
  out.hang = hang_report(programs, run, o.faults);
  if (o.timeline) out.timeline = timeline(programs, run);
  if (programs.empty()) return out;

  // Step s ends when the last rank finishes it; steps are measured between those instants.
  const std::vector<double> ends = step_ends(programs, run);
  for (size_t s = 0; s < ends.size(); ++s) out.step_seconds_each.push_back(ends[s] - (s == 0 ? 0.0 : ends[s - 1]));
  const int first = o.warmup_steps, last = int(ends.size());  // measured: [first, last)
  out.measured_steps = std::max(0, last - first);
  measure_ranks(out, programs, run, first, last);
  // Collectives of the detail ranks in the last measured step.
  if (out.measured_steps > 0) {
    const int s = last - 1;
    out.collectives = detail_collectives(programs, run, cluster, o, s, s > 0 ? ends[s - 1] : 0.0);
  }
  add_bubbles_and_rates(out, programs.front().plan, model, cluster);
  return out;
}

namespace {

nlohmann::json rank_json(const strategy::RankTimes& r) {
  return {{"rank", r.rank},
          {"stage", r.stage},
          {"step_seconds", r.step_seconds},
          {"compute_seconds", r.compute_seconds},
          {"exposed_comm_seconds", r.exposed_comm_seconds},
          {"bubble_seconds", r.bubble_seconds}};
}

nlohmann::json collective_json(const strategy::CollectiveTiming& c) {
  return {{"rank", c.rank},
          {"op_id", c.op_id},
          {"op", c.op},
          {"group", c.group},
          {"tag", c.tag},
          {"bytes", c.bytes},
          {"count", c.count},
          {"ranks", c.ranks},
          {"start_seconds", c.start_seconds},
          {"end_seconds", c.end_seconds},
          {"seconds", c.seconds},
          {"algorithm", c.algorithm}};
}

}  // namespace

nlohmann::json to_json(const SimResult& r) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    auto j = rank_json(r.ranks[i]);
    j["sent_bytes"] = i < r.sent_bytes.size() ? r.sent_bytes[i] : 0.0;
    ranks.push_back(std::move(j));
  }
  nlohmann::json collectives = nlohmann::json::array();
  for (const auto& c : r.collectives) collectives.push_back(collective_json(c));
  nlohmann::json waiting = nlohmann::json::array();
  for (const auto& w : r.hang.waiting)
    waiting.push_back({{"rank", w.rank},
                       {"stream", w.stream},
                       {"step", w.step},
                       {"op_id", w.op_id},
                       {"op", w.op},
                       {"tag", w.tag},
                       {"group", w.group},
                       {"call", w.call},
                       {"waiting_for", w.waiting_for},
                       {"waiting_on_op", w.waiting_on_op},
                       {"since_seconds", w.since_seconds}});
  return {{"step_seconds", r.step_seconds},
          {"ranks", ranks},
          {"collectives", collectives},
          {"bubble_fraction_of_ideal", r.bubble_fraction_of_ideal},
          {"bubble_fraction_of_total", r.bubble_fraction_of_total},
          {"walked_bubble_fraction", r.walked_bubble_fraction},
          {"samples_per_s", r.samples_per_s},
          {"tokens_per_s", r.tokens_per_s},
          {"mfu", r.mfu},
          {"simulator",
           {{"warmup_steps", r.warmup_steps},
            {"measured_steps", r.measured_steps},
            {"step_seconds_each", r.step_seconds_each},
            {"messages", r.messages},
            {"flows", r.flows},
            {"closed_form_steps", r.closed_form_steps},
            {"preempted_steps", r.preempted_steps},
            {"ops", r.ops},
            {"simulated_seconds", r.simulated_seconds}}},
          {"hang",
           {{"deadlock", r.hang.deadlock},
            {"at_seconds", r.hang.at_seconds},
            {"stopped_ranks", r.hang.stopped_ranks},
            {"missing_ranks", r.hang.missing_ranks},
            {"mismatches", r.hang.mismatches},
            {"waiting", waiting},
            {"lines", r.hang.lines}}}};
}

nlohmann::json estimate_to_json(const strategy::StepEstimate& e) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : e.ranks) ranks.push_back(rank_json(r));
  nlohmann::json collectives = nlohmann::json::array();
  for (const auto& c : e.collectives) collectives.push_back(collective_json(c));
  return {{"step_seconds", e.step_seconds},
          {"ranks", ranks},
          {"collectives", collectives},
          {"bubble_fraction_of_ideal", e.bubble_fraction_of_ideal},
          {"bubble_fraction_of_total", e.bubble_fraction_of_total},
          {"walked_bubble_fraction", e.walked_bubble_fraction},
          {"samples_per_s", e.samples_per_s},
          {"tokens_per_s", e.tokens_per_s},
          {"mfu", e.mfu}};
}

}  // namespace parlab::sim
