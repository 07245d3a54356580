#include "strategy/cost_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "base/errors.h"

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
double ring(CollectiveOp op, double bytes, int n, double a, double b, double min_chunk_bytes = -1) {
  return ring_collective_seconds(op, bytes, n, a, b, min_chunk_bytes);
}

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
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kHierarchical:
      return "hierarchical";
    case Algorithm::kPointToPoint:
      return "p2p";
    case Algorithm::kNone:
      return "none";
  }
  return "?";
}

int node_of(const ClusterSpec& c, int rank) { return rank / std::max(1, c.devices_per_node); }

CollectiveEstimate collective_time(CollectiveOp op, double bytes, const std::vector<int>& ranks, const ClusterSpec& c,
                                   double min_chunk_bytes) {
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
  const double a_i = c.intra.latency_seconds, b_i = c.intra.achieved_bytes_per_s();
  const double a_e = c.inter.latency_seconds, b_e = device_network_bytes_per_s(c);
  e.crosses_nodes = nodes > 1;
  if (nodes == 1 && uses_nccl_protocols(c) && op != CollectiveOp::kBroadcast) {
    const ProtocolTime t = nccl_ring_time(op, bytes, n, c, min_chunk_bytes);
    e.seconds = t.seconds;
    e.algorithm = Algorithm::kRing;
    e.protocol = to_string(t.protocol);
  } else if (nodes == 1) {
    e.seconds = ring(op, bytes, n, a_i, b_i, min_chunk_bytes);
    // A reduce-scatter or all-gather with a measured fit of its own takes it where it is slower
    // than the link's (the simulator adds the difference to the link's steps, never less). The fit
    // prices the whole message however it is cut (LinkSpec::op_fit).
    if (double a_op = 0, b_op = 0; c.intra.op_fit(op, a_op, b_op))
      e.seconds = std::max(e.seconds, ring(op, bytes, n, a_op, b_op));
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
      // Uneven chunks: both levels carry the balanced S' whose busiest link moves what the
      // uneven one's does, S' = S (S - c_min) / ((n-1)/n S).
      const double s = min_chunk_bytes < 0
                           ? bytes
                           : bytes * ring_link_bytes(op, bytes, n, min_chunk_bytes) / ring_link_bytes(op, bytes, n);
      e.seconds = ring(op, s, k, a_i, b_i) + ring(op, s / k, nodes, a_e, b_e);
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
  if (node_of(c, from) == node_of(c, to))
    return c.intra.latency_seconds + transfer(bytes, c.intra.achieved_bytes_per_s());
  return c.inter.latency_seconds + transfer(bytes, device_network_bytes_per_s(c));
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
  Walker(const std::vector<StepProgram>& programs, const ModelSpec& model, const std::vector<LayerSpec>& layers,
         const ClusterSpec& cluster, bool detail)
      : programs_(programs), cluster_(cluster), detail_(detail), gemms_(model, layers, programs.front().plan, cluster) {
    for (size_t i = 0; i < programs.size(); ++i) index_of_[programs[i].rank] = int(i);
    last_of_kind_.fill(estimates_.end());
    states_.resize(programs.size());
    for (size_t i = 0; i < programs.size(); ++i) {
      auto& s = states_[i];
      const auto& prog = programs[i];
      s.start.assign(prog.ops.size(), kNotYet);
      s.finish.assign(prog.ops.size(), kNotYet);
      s.arrived.assign(prog.ops.size(), false);
      s.call_index.assign(prog.ops.size(), -1);
      std::vector<int> calls_per_group(prog.groups.size(), 0);
      // Group names are matched across programs once, here; the walk itself uses integer ids.
      for (const auto& g : prog.groups) {
        auto it = group_ids_.emplace(g.name, int(group_ids_.size())).first;
        s.group_id.push_back(it->second);
      }
      const auto on_compute =
          std::count_if(prog.ops.begin(), prog.ops.end(), [](const Op& op) { return walk_lane(op) == 0; });
      s.queue[0].reserve(size_t(on_compute));
      s.queue[1].reserve(prog.ops.size() - size_t(on_compute));
      for (const auto& op : prog.ops) {
        s.queue[walk_lane(op)].push_back(op.id);
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
  // Messages from one rank to another: when each was sent, and how many receives took one.
  struct Channel {
    std::vector<double> sent;
    int received = 0;
    bool walked_sender = false;
  };
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
    std::vector<std::tuple<int, int, Channel*>> channels;  // (from, to): the ones it used, found at once
  };

  // When an op may start as far as its own rank is concerned: its stream is free and its
  // dependencies have finished. `dep_is_comm`: the latest dependency is a communication-stream
  // collective (the compute stream then waits for communication, which is exposed).
  struct Readiness {
    double at = 0;
    double dep_end = 0;
    bool dep_is_comm = false;
    bool after_comm_stream = false;  // a compute op held back by the rank's collectives (shared cores)
  };
  struct Interval {
    double start = 0, finish = 0;
  };

  // Tries to start the head op of one stream; returns true if it did.
  bool advance(int i, int stream, const Plan& plan) {
    State& s = states_[i];
    if (s.head[stream] >= s.queue[stream].size()) return false;
    const Op& op = programs_[i].ops[s.queue[stream][s.head[stream]]];
    Readiness ready;
    if (!dependencies_done(i, stream, op, ready)) return false;
    Interval when{ready.at, ready.at};
    if (!place(i, op, plan, when)) return false;
    if (op.pattern_calls > 0) {
      walk_calls(i, stream, op, when.start, ready);
      return true;
    }
    account(i, s, stream, op, when, ready);
    commit(i, stream, op, when);
    return true;
  }

  bool dependencies_done(int i, int stream, const Op& op, Readiness& r) const {
    const State& s = states_[i];
    const StepProgram& prog = programs_[i];
    for (int d : op.deps) {
      if (s.finish[d] == kNotYet) return false;
      if (s.finish[d] > r.dep_end) {
        r.dep_end = s.finish[d];
        const Op& dop = prog.ops[d];
        r.dep_is_comm = dop.stream == Stream::kComm && dop.is_collective();
      }
    }
    r.at = std::max(s.free_at[stream], r.dep_end);
    // On shared cores that the ranks fill, a rank's collectives and its compute take turns
    // (ClusterSpec::serializes_comm_with_compute): compute first, as the walk places it.
    // Except a collective that overlaps compute (Op::overlaps_compute).
    if (serialize_) {
      if (stream == 1 && op.is_collective() && !overlaps_compute_on(op, programs_[i], cluster_))
        r.at = std::max(r.at, s.free_at[0]);
      if (stream == 0 && !op.is_p2p() && s.last_comm_collective_end > r.at) {
        r.at = s.last_comm_collective_end;
        r.after_comm_stream = true;
      }
    }
    return true;
  }

  // Sets when `op` runs (w.start is its own readiness on entry); false if it must wait for
  // another rank (a collective's members, a receive's message).
  bool place(int i, const Op& op, const Plan& plan, Interval& w) {
    if (op.is_collective()) return place_collective(i, op, w);
    if (op.kind == OpKind::kRecv) return place_recv(i, op, w);
    if (op.kind == OpKind::kSend) {
      place_send(i, op, w);
      return true;
    }
    w.finish = w.start + compute_time(op, cluster_, plan, &gemms_);
    return true;
  }

  // A collective starts when every walked member of its group has reached it.
  bool place_collective(int i, const Op& op, Interval& w) {
    State& s = states_[i];
    const StepProgram& prog = programs_[i];
    const Group& g = prog.group_of(op);
    const int gid = s.group_id[op.group];
    // Only groups with several walked members meet (a TP group has one: the walk takes one rank
    // per stage); the planner walks thousands of such calls.
    if (walked_members(gid, g) > 1) {
      auto& arrivals = rendezvous_[{gid, s.call_index[op.id]}];
      if (!s.arrived[op.id]) {
        arrivals.emplace_back(prog.rank, w.start);
        s.arrived[op.id] = true;
      }
      if (int(arrivals.size()) < walked_members(gid, g)) return false;
      for (const auto& [r, t] : arrivals) w.start = std::max(w.start, t);
    }
    if (op.pattern_calls > 0) return true;  // a run of calls: walk_calls() times each
    const CollectiveEstimate& est = estimate(gid, g, op.kind, op);
    w.finish = w.start + est.seconds * op.count;
    s.comm_cpu += comm_cpu_bytes(op, g.size()) * op.count * cluster_.comm_cpu_seconds_per_byte;
    if (detail_)
      timings_.push_back({prog.rank, op.id, std::string(to_string(op.kind)), g.name, op.tag, op.bytes, op.count,
                          g.size(), w.start, w.finish, est.seconds, std::string(to_string(est.algorithm))});
    return true;
  }

  // A run of calls (Op::pattern_calls) whose members have met at `start`: each call timed and
  // booked as an op of its own would be, one after another, so the walk's sums are bit for bit
  // those of the per-call program (one multiplication would not be). The calls follow one compute
  // op on the compute stream, which nothing else holds meanwhile: the per-call program's later
  // calls start where the earlier ones end, their rank's single walked member meeting at once.
  void walk_calls(int i, int stream, const Op& op, double start, const Readiness& ready) {
    State& s = states_[i];
    const StepProgram& prog = programs_[i];
    const Group& g = prog.group_of(op);
    const int gid = s.group_id[op.group];
    // A run's calls are reduce-scatters and all-gathers of one size: two prices, found once (and
    // kept, per group, for the group's next run, which is mostly of the same size).
    const std::array<OpKind, 2> kinds = {OpKind::kReduceScatter, OpKind::kAllGather};
    if (size_t(gid) >= run_prices_.size()) run_prices_.resize(size_t(gid) + 1);
    RunPrices& rp = run_prices_[size_t(gid)];
    if (rp.gid != gid || rp.bytes != op.bytes || rp.min_chunk_bytes != op.min_chunk_bytes) {
      rp = {gid, op.bytes, op.min_chunk_bytes};
      for (size_t x = 0; x < 2; ++x) {
        rp.est[x] = &estimate(gid, g, kinds[x], op);
        rp.cpu[x] = ring_link_bytes(collective_of(kinds[x]), op.bytes, g.size(), op.min_chunk_bytes) *
                    cluster_.comm_cpu_seconds_per_byte;
      }
    }
    const auto& est = rp.est;
    const auto& cpu = rp.cpu;
    Interval w{start, start};
    for (int k = 0; k < op.calls(); ++k) {
      const size_t x = op.call_kind(k) == OpKind::kAllGather ? 1 : 0;
      w.finish = w.start + est[x]->seconds;
      s.comm_cpu += cpu[x];
      if (detail_) {
        timings_.push_back({prog.rank, op.id, std::string(to_string(kinds[x])), g.name, op.tag, op.bytes, 1, g.size(),
                            w.start, w.finish, est[x]->seconds, std::string(to_string(est[x]->algorithm))});
        timeline_.push_back({prog.rank, op.id, w.start, w.finish});
      }
      account(i, s, stream, op, w, ready);
      s.free_at[stream] = w.finish;
      s.end = std::max(s.end, w.finish);
      w.start = w.finish;
    }
    s.start[op.id] = start;
    s.finish[op.id] = w.finish;
    ++s.head[stream];
  }

  int walked_members(int gid, const Group& g) {
    if (size_t(gid) >= walked_members_.size()) walked_members_.resize(size_t(gid) + 1, -1);
    int& n = walked_members_[size_t(gid)];
    if (n < 0) {
      n = 0;
      for (int member : g.ranks) n += index_of_.count(member) ? 1 : 0;
    }
    return n;
  }

  // collective_time of one call, priced once per group, operation and size (a stage repeats
  // the same few calls for every layer and microbatch: mostly the call of its kind before it,
  // as a layer's sequence-parallel reduce-scatters and all-gathers alternate).
  // `kind`: the op's, or a call's of a run (Op::call_kind).
  const CollectiveEstimate& estimate(int gid, const Group& g, OpKind kind, const Op& op) {
    const auto key = std::make_tuple(gid, int(kind), op.bytes, op.min_chunk_bytes);
    auto& last = last_of_kind_[size_t(kind)];
    if (last != estimates_.end() && last->first == key) return last->second;
    auto it = estimates_.find(key);
    if (it == estimates_.end())
      it =
          estimates_.emplace(key, collective_time(collective_of(kind), op.bytes, g.ranks, cluster_, op.min_chunk_bytes))
              .first;
    last = it;
    return it->second;
  }

  // Messages between a pair match in order; a receive ends when its message has arrived.
  bool place_recv(int i, const Op& op, Interval& w) {
    const int rank = programs_[i].rank;
    Channel& ch = channel(states_[i], op.peer, rank);
    const double wire = p2p_time(op.bytes, op.peer, rank, cluster_);
    if (ch.walked_sender) {
      if (int(ch.sent.size()) <= ch.received) return false;
      w.finish = std::max(w.start, ch.sent[size_t(ch.received)] + wire);
    } else {
      w.finish = w.start + wire;  // the peer is not walked: assume it sends on time
    }
    ++ch.received;
    return true;
  }

  // The channel from -> to, through the rank's own short list first (a stage talks to its one or
  // two pipeline neighbours).
  Channel& channel(State& s, int from, int to) {
    for (const auto& [f, t, ch] : s.channels)
      if (f == from && t == to) return *ch;
    Channel& ch = channels_[{from, to}];
    ch.walked_sender = index_of_.count(from) > 0;
    s.channels.emplace_back(from, to, &ch);
    return ch;
  }

  void place_send(int i, const Op& op, Interval& w) {
    const int rank = programs_[i].rank;
    channel(states_[i], rank, op.peer).sent.push_back(w.start);
    states_[i].comm_cpu += op.bytes * cluster_.comm_cpu_seconds_per_byte;
    w.finish = w.start + p2p_time(op.bytes, rank, op.peer, cluster_);
  }

  // The compute stream's books: its idle gap before the op when it waited for communication,
  // and what the op itself is (compute by kind, or a synchronous collective: exposed).
  void account(int i, State& s, int stream, const Op& op, const Interval& w, const Readiness& r) const {
    if (stream != 0) {
      if (op.is_collective() && !overlaps_compute_on(op, programs_[i], cluster_))
        s.last_comm_collective_end = std::max(s.last_comm_collective_end, w.finish);
      return;
    }
    const double gap = w.start - s.free_at[0];
    if (gap > 0 && ((r.dep_is_comm && r.dep_end >= w.start) || r.after_comm_stream)) s.exposed += gap;
    const double took = w.finish - w.start;
    if (op.is_collective()) s.exposed += took;
    if (!op.is_compute()) return;
    s.compute += took;
    compute_share(s, op.kind) += took;
  }

  static double& compute_share(State& s, OpKind kind) {
    switch (kind) {
      case OpKind::kForward:
        return s.forward;
      case OpKind::kBackward:
        return s.backward;
      default:
        return s.optimizer;
    }
  }

  void commit(int i, int stream, const Op& op, const Interval& w) {
    State& s = states_[i];
    s.start[op.id] = w.start;
    s.finish[op.id] = w.finish;
    if (detail_) timeline_.push_back({programs_[i].rank, op.id, w.start, w.finish});
    // Sends are asynchronous: the stream moves on at once.
    s.free_at[stream] = op.kind == OpKind::kSend ? w.start : w.finish;
    s.end = std::max(s.end, w.finish);
    ++s.head[stream];
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
  bool serialize_ = cluster_.serializes_comm_with_compute();
  GemmTimes gemms_;
  std::map<std::string, int> group_ids_;
  std::map<std::pair<int, int>, std::vector<std::pair<int, double>>> rendezvous_;
  std::vector<int> walked_members_;  // per walk-wide group id; -1: not counted yet
  // (group, kind, bytes, smallest chunk)
  using Prices = std::map<std::tuple<int, int, double, double>, CollectiveEstimate>;
  Prices estimates_;
  std::array<Prices::iterator, size_t(OpKind::kRecv) + 1> last_of_kind_;  // last looked up, per OpKind
  struct RunPrices {  // walk_calls(): a group's last run's size, and its two calls' prices
    int gid = -1;
    double bytes = 0, min_chunk_bytes = 0;
    std::array<const CollectiveEstimate*, 2> est{};
    std::array<double, 2> cpu{};
  };
  std::vector<RunPrices> run_prices_;                // per walk-wide group id
  std::map<std::pair<int, int>, Channel> channels_;  // (from, to); nodes stay put for State::channels
  std::vector<CollectiveTiming> timings_;
  std::vector<OpTiming> timeline_;
};

void add_throughput(StepEstimate& e, const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan,
                    const ClusterSpec& cluster) {
  if (e.step_seconds <= 0) return;
  const double samples = double(plan.global_batch);
  const double tokens = samples * model.tokens_per_sample();
  e.samples_per_s = samples / e.step_seconds;
  e.tokens_per_s = tokens / e.step_seconds;
  const double peak =
      plan.precision == Precision::kFp32 ? cluster.device.peak_flops_fp32 : cluster.device.peak_flops_bf16;
  const double model_flops =
      (ModelSpec::forward_flops_per_token(layers) + ModelSpec::backward_flops_per_token(layers)) * tokens;
  e.mfu = model_flops / (e.step_seconds * plan.world() * peak);
}

StepEstimate walk(const std::vector<StepProgram>& programs, const ModelSpec& model,
                  const std::vector<LayerSpec>& layers, const ClusterSpec& cluster, bool detail) {
  if (programs.empty()) return {};
  Walker w(programs, model, layers, cluster, detail);
  StepEstimate e = w.run(programs.front().plan);
  add_throughput(e, model, layers, programs.front().plan, cluster);
  return e;
}

}  // namespace

StepEstimate walk_programs(const std::vector<StepProgram>& programs, const ModelSpec& model, const ClusterSpec& cluster,
                           bool detail) {
  return walk(programs, model, model.layer_list(), cluster, detail);
}

StepEstimate estimate_step(const ModelSpec& model, const Plan& plan, const ClusterSpec& cluster, bool detail) {
  return estimate_step(model, model.layer_list(), plan, cluster, detail);
}

StepEstimate estimate_step(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan,
                           const ClusterSpec& cluster, bool detail) {
  std::vector<StepProgram> programs;
  // What reads tags comes with the detail; a walk for its times alone takes sequence
  // parallelism's calls as runs (BuildOptions::call_runs: the same times, a fraction of the ops).
  const BuildOptions options{.tags = detail, .call_runs = !detail};
  for (int s = 0; s < plan.pp; ++s)
    programs.push_back(build_step(model, layers, plan, rank_of(plan, {0, 0, s}), options));
  return walk(programs, model, layers, cluster, detail);
}

}  // namespace parlab::strategy
