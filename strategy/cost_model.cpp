#include "strategy/cost_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "strategy/errors.h"

namespace parlab::strategy {
namespace {

constexpr double kNotYet = -1;

double transfer(double bytes, double bytes_per_s) { return std::isinf(bytes_per_s) ? 0.0 : bytes / bytes_per_s; }

// A device's share of its node's network: every device of a node talks at once in a symmetric
// plan, so the node's NICs are divided among them.
double device_network_bytes_per_s(const ClusterSpec& c) {
  return c.node_network_bytes_per_s() / std::max(1, c.devices_per_node);
}

// Ring time for `op` over n ranks on one level: (steps) a + (fraction) S/B.
double ring(CollectiveOp op, double bytes, int n, double a, double b) { return ring_collective_seconds(op, bytes, n, a, b); }

// Gloo, the runtime's backend on loopback, runs ring all-reduce whatever the size: predict that,
// not a tree it never runs.
bool runs_tree_all_reduce(const ClusterSpec& c) { return c.intra.kind != "loopback"; }

// Double binary tree all-reduce (NCCL): log-depth latency, but each rank moves about 2 S.
double tree_allreduce(double bytes, int n, double a, double b) {
  return 2.0 * std::ceil(std::log2(double(n))) * a + transfer(2.0 * bytes, b);
}

}  // namespace

std::string_view to_string(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kPointToPoint: return "p2p";
    case Algorithm::kNone: return "none";
  }
  return "?";
}

int node_of(const ClusterSpec& c, int rank) { return rank / std::max(1, c.devices_per_node); }

CollectiveEstimate collective_time(CollectiveOp op, double bytes, const std::vector<int>& ranks,
                                   const ClusterSpec& c) {
  CollectiveEstimate e;
  const int n = int(ranks.size());
  if (n <= 1) return e;
  // Nodes spanned and the most members on one node. Groups list ranks in ascending order, so
  // one pass counts runs of equal node ids (no allocation: this runs for every collective the
  // planner and the walker price).
  int nodes = 0, k = 0, run = 0, last = -1;
  bool sorted = true;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const int node = node_of(c, ranks[i]);
    if (i > 0 && ranks[i] < ranks[i - 1]) sorted = false;
    if (node != last) ++nodes, run = 0, last = node;
    k = std::max(k, ++run);
  }
  if (!sorted) {
    std::map<int, int> per_node;
    for (int r : ranks) ++per_node[node_of(c, r)];
    nodes = int(per_node.size());
    k = 0;
    for (const auto& [node, count] : per_node) k = std::max(k, count);
  }
  const double a_i = c.intra.latency_seconds, b_i = c.intra.bytes_per_s;
  const double a_e = c.inter.latency_seconds, b_e = device_network_bytes_per_s(c);
  e.crosses_nodes = nodes > 1;
  if (nodes == 1) {
    e.seconds = ring(op, bytes, n, a_i, b_i);
    e.algorithm = Algorithm::kRing;
    if (op == CollectiveOp::kAllReduce && runs_tree_all_reduce(c)) {
      const double t = tree_allreduce(bytes, n, a_i, b_i);
      if (t < e.seconds) e.seconds = t, e.algorithm = Algorithm::kTree;
    }
  } else {
    // Intra-node level over k ranks, inter-node level over `nodes` ranks carrying S/k each.
    if (op == CollectiveOp::kBroadcast) {
      e.seconds = ring(op, bytes, nodes, a_e, b_e) + ring(op, bytes, k, a_i, b_i);
    } else {
      e.seconds = ring(op, bytes, k, a_i, b_i) + ring(op, bytes / k, nodes, a_e, b_e);
    }
    e.algorithm = Algorithm::kHierarchical;
    if (op == CollectiveOp::kAllReduce && runs_tree_all_reduce(c)) {
      const double t = tree_allreduce(bytes, n, a_e, std::min(b_e, b_i));
      if (t < e.seconds) e.seconds = t, e.algorithm = Algorithm::kTree;
    }
  }
  if (e.seconds > 0) {
    e.algbw_bytes_per_s = algbw_bytes_per_s(bytes, e.seconds);
    e.busbw_bytes_per_s = busbw_bytes_per_s(op, n, bytes, e.seconds);
  }
  return e;
}

double p2p_time(double bytes, int from, int to, const ClusterSpec& c) {
  if (node_of(c, from) == node_of(c, to)) return c.intra.latency_seconds + transfer(bytes, c.intra.bytes_per_s);
  return c.inter.latency_seconds + transfer(bytes, device_network_bytes_per_s(c));
}

double rank_flops_per_s(const ClusterSpec& c, const Plan& plan) {
  double rate = c.device_flops_per_s(plan.precision);
  if (c.shares_cores() && c.devices_per_node > c.cores_per_node)
    rate *= double(c.cores_per_node) / c.devices_per_node;
  return rate;
}

double compute_time(const Op& op, const ClusterSpec& c, const Plan& plan) {
  double mem_bw = c.device.memory_bytes_per_s;
  if (c.shares_cores() && c.devices_per_node > c.cores_per_node)
    mem_bw *= double(c.cores_per_node) / c.devices_per_node;
  return std::max(op.flops / rank_flops_per_s(c, plan), op.memory_bytes / mem_bw);
}

double bubble_fraction_of_ideal(int pp, int v, int64_t m) {
  return double(pp - 1) / (double(std::max(v, 1)) * double(m));
}
double bubble_fraction_of_total(int pp, int v, int64_t m) {
  return double(pp - 1) / (double(std::max(v, 1)) * double(m) + pp - 1);
}

namespace {

// The walk: every stream of every walked rank advances while its head op can start. An op
// starts when its stream is free, its dependencies have finished, every walked member of its
// collective has reached it, or (a receive) its message has been sent.
class Walker {
 public:
  Walker(const std::vector<StepProgram>& programs, const ClusterSpec& cluster, bool detail)
      : programs_(programs), cluster_(cluster), detail_(detail) {
    for (size_t i = 0; i < programs.size(); ++i) index_of_[programs[i].rank] = int(i);
    states_.resize(programs.size());
    for (size_t i = 0; i < programs.size(); ++i) {
      auto& s = states_[i];
      const auto& prog = programs[i];
      s.start.assign(prog.ops.size(), kNotYet);
      s.finish.assign(prog.ops.size(), kNotYet);
      s.arrived.assign(prog.ops.size(), false);
      s.call_index.assign(prog.ops.size(), -1);
      std::map<int, int> calls_per_group;
      // Group names are matched across programs once, here; the walk itself uses integer ids.
      for (const auto& g : prog.groups) {
        auto it = group_ids_.emplace(g.name, int(group_ids_.size())).first;
        s.group_id.push_back(it->second);
      }
      for (const auto& op : prog.ops) {
        s.queue[op.stream == Stream::kCompute ? 0 : 1].push_back(op.id);
        if (op.is_collective()) s.call_index[op.id] = calls_per_group[op.group]++;
      }
    }
  }

  StepEstimate run(const Plan& plan) {
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t i = 0; i < states_.size(); ++i)
        for (int stream = 0; stream < 2; ++stream)
          while (advance(int(i), stream, plan)) progress = true;
    }
    check_finished();
    return summarize(plan);
  }

 private:
  struct State {
    std::vector<int> queue[2];
    size_t head[2] = {0, 0};
    double free_at[2] = {0, 0};
    std::vector<double> start, finish;
    std::vector<bool> arrived;
    std::vector<int> call_index;
    std::vector<int> group_id;  // program group index -> walk-wide id
    double compute = 0, exposed = 0, forward = 0, backward = 0, optimizer = 0;
    double comm_cpu = 0;  // CPU seconds its communication costs (shared-core hosts)
    double last_comm_collective_end = 0;
    double end = 0;
  };

  // Tries to start the head op of one stream; returns true if it did.
  bool advance(int i, int stream, const Plan& plan) {
    State& s = states_[i];
    if (s.head[stream] >= s.queue[stream].size()) return false;
    const StepProgram& prog = programs_[i];
    const Op& op = prog.ops[s.queue[stream][s.head[stream]]];
    double ready = s.free_at[stream];
    double dep_end = 0;
    bool dep_is_comm = false;
    for (int d : op.deps) {
      if (s.finish[d] == kNotYet) return false;
      if (s.finish[d] > dep_end) {
        dep_end = s.finish[d];
        const Op& dop = prog.ops[d];
        dep_is_comm = dop.stream == Stream::kComm && dop.is_collective();
      }
    }
    ready = std::max(ready, dep_end);

    double start = ready, finish = ready;
    if (op.is_collective()) {
      const Group& g = prog.group_of(op);
      const int gid = s.group_id[op.group];
      auto& arrivals = rendezvous_[{gid, s.call_index[op.id]}];
      if (!s.arrived[op.id]) {
        arrivals.emplace_back(prog.rank, ready);
        s.arrived[op.id] = true;
      }
      int walked_members = 0;
      for (int member : g.ranks) walked_members += index_of_.count(member) ? 1 : 0;
      if (int(arrivals.size()) < walked_members) return false;
      for (const auto& [r, t] : arrivals) start = std::max(start, t);
      const auto est = collective_time(collective_of(op.kind), op.bytes, g.ranks, cluster_);
      finish = start + est.seconds * op.count;
      s.comm_cpu += bus_bandwidth_factor(collective_of(op.kind), g.size()) * op.bytes * op.count *
                    cluster_.comm_cpu_seconds_per_byte;
      if (detail_)
        timings_.push_back({prog.rank, op.id, std::string(to_string(op.kind)), g.name, op.tag, op.bytes, op.count,
                            g.size(), start, finish, est.seconds, std::string(to_string(est.algorithm))});
    } else if (op.kind == OpKind::kRecv) {
      auto& sent = sends_[{op.peer, prog.rank}];
      const int k = recv_count_[{op.peer, prog.rank}];
      const double wire = p2p_time(op.bytes, op.peer, prog.rank, cluster_);
      if (index_of_.count(op.peer)) {
        if (int(sent.size()) <= k) return false;
        finish = std::max(start, sent[k] + wire);
      } else {
        finish = start + wire;  // the peer is not walked: assume it sends on time
      }
      ++recv_count_[{op.peer, prog.rank}];
    } else if (op.kind == OpKind::kSend) {
      sends_[{prog.rank, op.peer}].push_back(start);
      s.comm_cpu += op.bytes * cluster_.comm_cpu_seconds_per_byte;
      finish = start + p2p_time(op.bytes, prog.rank, op.peer, cluster_);
    } else {
      finish = start + compute_time(op, cluster_, plan);
    }

    // Account for the compute stream: its idle gap before this op, and what it then runs.
    if (stream == 0) {
      const double gap = start - s.free_at[0];
      if (gap > 0 && dep_is_comm && dep_end >= start) s.exposed += gap;
      if (op.is_compute()) {
        s.compute += finish - start;
        (op.kind == OpKind::kForward ? s.forward : op.kind == OpKind::kBackward ? s.backward : s.optimizer) += finish - start;
      }
      else if (op.is_collective()) s.exposed += finish - start;
    } else if (op.is_collective()) {
      s.last_comm_collective_end = std::max(s.last_comm_collective_end, finish);
    }
    s.start[op.id] = start;
    s.finish[op.id] = finish;
    if (detail_) timeline_.push_back({prog.rank, op.id, start, finish});
    // Sends are asynchronous: the stream moves on at once.
    s.free_at[stream] = op.kind == OpKind::kSend ? start : finish;
    s.end = std::max(s.end, finish);
    ++s.head[stream];
    return true;
  }

  void check_finished() const {
    std::string stuck;
    for (size_t i = 0; i < states_.size(); ++i)
      for (int stream = 0; stream < 2; ++stream) {
        const State& s = states_[i];
        if (s.head[stream] < s.queue[stream].size()) {
          const StepProgram& prog = programs_[i];
          const Op& op = prog.ops[s.queue[stream][s.head[stream]]];
          stuck += (stuck.empty() ? "" : "; ") + std::string("rank ") + std::to_string(prog.rank) + " waits in " +
                   describe(prog, op);
        }
      }
    if (!stuck.empty()) throw RuntimeError("step programs deadlock: " + stuck);
  }

  StepEstimate summarize(const Plan& plan) {
    StepEstimate out;
    for (const auto& s : states_) out.step_seconds = std::max(out.step_seconds, s.end);
    for (size_t i = 0; i < states_.size(); ++i) {
      const State& s = states_[i];
      RankTimes r;
      r.rank = programs_[i].rank;
      r.stage = programs_[i].stage;
      r.step_seconds = out.step_seconds;
      r.compute_seconds = s.compute;
      r.forward_seconds = s.forward;
      r.backward_seconds = s.backward;
      r.optimizer_seconds = s.optimizer;
      // Communication still running after the compute stream's last op holds the step too.
      const double compute_end = s.free_at[0];
      r.exposed_comm_seconds = s.exposed + std::max(0.0, s.last_comm_collective_end - compute_end);
      r.bubble_seconds = std::max(0.0, out.step_seconds - r.compute_seconds - r.exposed_comm_seconds);
      out.ranks.push_back(r);
    }
    apply_cpu_demand(out, plan);
    out.collectives = std::move(timings_);
    out.timeline = std::move(timeline_);
    out.bubble_fraction_of_ideal = plan.pp > 1 ? bubble_fraction_of_ideal(plan.pp, plan.v, plan.microbatches) : 0;
    out.bubble_fraction_of_total = plan.pp > 1 ? bubble_fraction_of_total(plan.pp, plan.v, plan.microbatches) : 0;
    double bubble = 0;
    for (const auto& r : out.ranks) bubble = std::max(bubble, r.bubble_seconds);
    out.walked_bubble_fraction = out.step_seconds > 0 ? bubble / out.step_seconds : 0;
    return out;
  }

  // Ranks that share a host's cores cannot finish a step faster than the CPU work they ask for
  // allows: (compute at a full core's rate + the CPU their communication costs) summed over the
  // node's ranks, divided by the cores they can use. On a GPU cluster (no shared cores) this never
  // binds. When it does, the difference is communication's doing (it is the CPU that loopback
  // TCP copies take from compute), so it is reported as exposed communication.
  void apply_cpu_demand(StepEstimate& out, const Plan& plan) const {
    if (!cluster_.shares_cores() || out.ranks.empty()) return;
    const int ranks_on_node = std::max(1, cluster_.devices_per_node);
    const int cores = cluster_.cores_per_node;
    const double share = ranks_on_node > cores ? double(cores) / ranks_on_node : 1.0;
    const double ranks_per_stage = double(plan.world()) / plan.pp;
    double demand = 0;
    for (size_t i = 0; i < states_.size(); ++i)
      demand += (states_[i].compute * share + states_[i].comm_cpu) * ranks_per_stage;
    demand /= std::max(1, cluster_.nodes);
    const double bound = demand / std::min(cores, ranks_on_node);
    if (bound <= out.step_seconds) return;
    const double extra = bound - out.step_seconds;
    out.step_seconds = bound;
    for (auto& r : out.ranks) {
      r.step_seconds = bound;
      r.exposed_comm_seconds += extra;
    }
  }

  const std::vector<StepProgram>& programs_;
  const ClusterSpec& cluster_;
  std::map<int, int> index_of_;
  std::vector<State> states_;
  bool detail_;
  std::map<std::string, int> group_ids_;
  std::map<std::pair<int, int>, std::vector<std::pair<int, double>>> rendezvous_;
  std::map<std::pair<int, int>, std::vector<double>> sends_;
  std::map<std::pair<int, int>, int> recv_count_;
  std::vector<CollectiveTiming> timings_;
  std::vector<OpTiming> timeline_;
};

void add_throughput(StepEstimate& e, const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster) {
  if (e.step_seconds <= 0) return;
  const double samples = double(plan.global_batch);
  const double tokens = samples * model.tokens_per_sample();
  e.samples_per_s = samples / e.step_seconds;
  e.tokens_per_s = tokens / e.step_seconds;
  const double peak = plan.precision == Precision::kFp32 ? cluster.device.peak_flops_fp32 : cluster.device.peak_flops_bf16;
  const double model_flops = (model.forward_flops_per_token() + model.backward_flops_per_token()) * tokens;
  e.mfu = model_flops / (e.step_seconds * plan.world() * peak);
}

}  // namespace

StepEstimate walk_programs(const std::vector<StepProgram>& programs, const ModelSpec& model, const ClusterSpec& cluster,
                           bool detail) {
  if (programs.empty()) return {};
  Walker w(programs, cluster, detail);
  StepEstimate e = w.run(programs.front().plan);
  add_throughput(e, model, programs.front().plan, cluster);
  return e;
}

StepEstimate estimate_step(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster, bool detail) {
  std::vector<StepProgram> programs;
  for (int s = 0; s < plan.pp; ++s) programs.push_back(build_step(model, plan, rank_of(plan, {0, 0, s})));
  return walk_programs(programs, model, cluster, detail);
}

}  // namespace parlab::strategy
