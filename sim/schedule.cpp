#include "sim/schedule.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "strategy/cost_model.h"

namespace parlab::sim {
namespace {

using strategy::CollectiveOp;

bool is_power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// The rings of a group: one in rank order, or, when the group has the same k > 1 members on
// each of several nodes, min(k, NICs) channels whose node visits are rotated by the channel.
std::vector<std::vector<int>> rings(const std::vector<int>& members, const Layout& layout) {
  std::map<int, std::vector<int>> per_node;
  for (int r : members) per_node[layout.node_of(r)].push_back(r);
  if (per_node.size() <= 1) return {members};
  const size_t k = per_node.begin()->second.size();
  for (const auto& [node, ranks] : per_node)
    if (ranks.size() != k) return {members};
  const size_t channels = std::min(k, size_t(layout.nic_links_per_node));
  std::vector<std::vector<int>> out;
  for (size_t c = 0; c < channels; ++c) {
    std::vector<int> order;
    for (const auto& [node, ranks] : per_node)
      for (size_t j = 0; j < k; ++j) order.push_back(ranks[(c + j) % k]);
    out.push_back(std::move(order));
  }
  return out;
}

bool is_uneven(CollectiveOp op, double min_chunk_bytes) {
  return min_chunk_bytes >= 0 && (op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather);
}

// Bytes one channel of a ring moves over each link in one step: S/n balanced; an uneven
// reduce-scatter or all-gather spreads its busiest link's S - c_min (strategy::ring_link_bytes)
// over its n-1 steps, so every link is priced as the busiest (the link into the smallest chunk's
// owner; the others carry less).
double ring_step_bytes(CollectiveOp op, double bytes, int n, int channels, double min_chunk_bytes) {
  if (!is_uneven(op, min_chunk_bytes)) return bytes / (double(n) * channels);
  return strategy::ring_link_bytes(op, bytes, n, min_chunk_bytes) / (double(strategy::ring_steps(op, n)) * channels);
}

void ring(Schedule& s, CollectiveOp op, double bytes, const std::vector<int>& members, const Layout& layout,
          double min_chunk_bytes) {
  const auto orders = rings(members, layout);
  const int n = int(members.size());
  const int channels = int(orders.size());
  const double step_bytes = ring_step_bytes(op, bytes, n, channels, min_chunk_bytes);
  ScheduleStep step;
  for (const auto& o : orders)
    for (int i = 0; i < n; ++i) step.messages.push_back({o[i], o[(i + 1) % n], step_bytes});
  const int steps = strategy::ring_steps(op, n);  // the one ring definition (strategy/collectives.h)
  s.algorithm = "ring";
  s.channels = channels;
  s.steps.assign(steps, step);
}

void chain(Schedule& s, double bytes, const std::vector<int>& members, const Layout& layout) {
  const std::vector<int> order = rings(members, layout).front();
  const int n = int(order.size());
  double a = 0, b = std::numeric_limits<double>::infinity();
  for (int i = 0; i + 1 < n; ++i) {
    a = std::max(a, layout.latency_seconds(order[i], order[i + 1]));
    b = std::min(b, layout.bytes_per_s(order[i], order[i + 1]));
  }
  int best_p = 1;
  double best = std::numeric_limits<double>::infinity();
  for (int p = 1; p <= 64; ++p) {
    const double t = (n - 2 + p) * (a + bytes / (p * b));
    if (t < best * (1 - 1e-12)) best = t, best_p = p;
  }
  s.algorithm = "chain";
  for (int t = 0; t < n - 2 + best_p; ++t) {
    ScheduleStep step;
    for (int i = 0; i + 1 < n; ++i)
      if (t - i >= 0 && t - i < best_p) step.messages.push_back({order[i], order[i + 1], bytes / best_p});
    s.steps.push_back(std::move(step));
  }
}

// The analytic model's two-level algorithm for a group of k members on each of N nodes: ring
// steps inside every node (all nodes at once), then rings across nodes between the members of
// the same position (all positions at once) on S/k:
//   all-reduce      intra reduce-scatter, inter all-reduce, intra all-gather
//   reduce-scatter  intra reduce-scatter, inter reduce-scatter
//   all-gather      inter all-gather, intra all-gather
// On idle links this is exactly cost_model.h's hierarchical formula. False when the group is
// not k members on each of N > 1 nodes (or a broadcast).
bool hierarchical(Schedule& s, CollectiveOp op, double bytes, const std::vector<int>& members, const Layout& layout) {
  std::map<int, std::vector<int>> per_node;
  for (int r : members) per_node[layout.node_of(r)].push_back(r);
  if (per_node.size() <= 1 || op == CollectiveOp::kBroadcast) return false;
  const size_t k = per_node.begin()->second.size();
  for (const auto& [node, ranks] : per_node)
    if (ranks.size() != k) return false;
  const int N = int(per_node.size());
  std::vector<std::vector<int>> intra, inter(k);
  for (const auto& [node, ranks] : per_node) {
    intra.push_back(ranks);
    for (size_t j = 0; j < k; ++j) inter[j].push_back(ranks[j]);
  }
  auto add = [&](const std::vector<std::vector<int>>& rings, int steps, double message_bytes) {
    ScheduleStep step;
    for (const auto& ring : rings) {
      const int m = int(ring.size());
      if (m > 1)
        for (int i = 0; i < m; ++i) step.messages.push_back({ring[i], ring[(i + 1) % m], message_bytes});
    }
    if (!step.messages.empty())
      for (int t = 0; t < steps; ++t) s.steps.push_back(step);
  };
  const int kk = int(k);
  const double intra_bytes = bytes / kk, inter_bytes = bytes / (double(kk) * N);
  switch (op) {
    case CollectiveOp::kAllReduce:
      add(intra, kk - 1, intra_bytes);
      add(inter, 2 * (N - 1), inter_bytes);
      add(intra, kk - 1, intra_bytes);
      break;
    case CollectiveOp::kReduceScatter:
      add(intra, kk - 1, intra_bytes);
      add(inter, N - 1, inter_bytes);
      break;
    case CollectiveOp::kAllGather:
      add(inter, N - 1, inter_bytes);
      add(intra, kk - 1, intra_bytes);
      break;
    case CollectiveOp::kBroadcast:
      return false;
  }
  s.algorithm = "hierarchical";
  return true;
}

void halving_doubling(Schedule& s, double bytes, const std::vector<int>& members) {
  const int n = int(members.size());
  int d = 0;
  while ((1 << d) < n) ++d;
  auto exchange = [&](int j) {
    ScheduleStep step;
    const int dist = n >> j;
    for (int i = 0; i < n; ++i) step.messages.push_back({members[i], members[i ^ dist], bytes / double(1 << j)});
    return step;
  };
  s.algorithm = "halving-doubling";
  for (int j = 1; j <= d; ++j) s.steps.push_back(exchange(j));  // reduce-scatter: S/2, S/4, ...
  for (int j = d; j >= 1; --j) s.steps.push_back(exchange(j));  // all-gather: ..., S/4, S/2
}

double largest_latency(const ScheduleStep& step, const Layout& layout) {
  double a = 0;
  for (const auto& m : step.messages) a = std::max(a, layout.latency_seconds(m.from, m.to));
  return a;
}

bool same_messages(const ScheduleStep& x, const ScheduleStep& y) {
  if (x.extra_seconds != y.extra_seconds || x.messages.size() != y.messages.size()) return false;
  for (size_t i = 0; i < x.messages.size(); ++i)
    if (x.messages[i].from != y.messages[i].from || x.messages[i].to != y.messages[i].to ||
        x.messages[i].bytes != y.messages[i].bytes)
      return false;
  return true;
}

// Runs of g identical steps become one step of g x the bytes, plus g x their extra time and
// (g - 1) x their latency: g (a + x/B + extra) on idle links, as before.
void merge_identical_steps(Schedule& s, const Layout& layout) {
  std::vector<ScheduleStep> out;
  for (size_t i = 0; i < s.steps.size();) {
    size_t j = i + 1;
    while (j < s.steps.size() && same_messages(s.steps[i], s.steps[j])) ++j;
    const double g = double(j - i);
    ScheduleStep merged = s.steps[i];
    for (auto& m : merged.messages) m.bytes *= g;
    merged.extra_seconds = g * s.steps[i].extra_seconds + (g - 1) * largest_latency(s.steps[i], layout);
    out.push_back(std::move(merged));
    i = j;
  }
  s.steps = std::move(out);
}

// Each ring step of `s` priced at `latency` + `step_bytes` / `bytes_per_s` for each of `calls`
// calls, where that is slower than the links' own latency and bandwidth moving `link_step_bytes`
// (the step's messages; `step_bytes` when negative): the difference is the step's extra time
// (never negative: the links keep timing the messages, contention included).
void add_step_price(Schedule& s, double latency, double bytes_per_s, double step_bytes, int calls,
                    const strategy::ClusterSpec& cluster, const Layout& layout, double link_step_bytes = -1) {
  const double link = cluster.intra.achieved_bytes_per_s();
  if (link_step_bytes < 0) link_step_bytes = step_bytes;
  for (auto& step : s.steps) {
    const double a = largest_latency(step, layout);
    step.extra_seconds += calls * std::max(0.0, latency - a + step_bytes / bytes_per_s - link_step_bytes / link);
  }
}

// NCCL's protocol on a ring inside one NVLink node (strategy::nccl_ring_time): each step costs
// the protocol's step latency instead of the link's, and its bytes move at the protocol's bus
// bandwidth instead of the link's; the call pays the protocol's base latency once, before its
// first step. Added as the steps' extra time, so `calls` coalesced calls pay it `calls` times.
// The links keep their own latency and bandwidth (contention and faults act on them as before):
// the extra is what the protocol adds on an idle link, never negative.
void add_nccl_protocol(Schedule& s, CollectiveOp op, double bytes, int calls, const std::vector<int>& members,
                       const strategy::ClusterSpec& cluster, const Layout& layout, double min_chunk_bytes) {
  const int n = int(members.size());
  const strategy::ProtocolTime t = strategy::nccl_ring_time(op, bytes, n, cluster, min_chunk_bytes);
  add_step_price(s, t.step_seconds, t.bus_bytes_per_s, ring_step_bytes(op, bytes, n, 1, min_chunk_bytes), calls,
                 cluster, layout);
  if (!s.steps.empty()) s.steps.front().extra_seconds += calls * t.base_seconds;
  s.protocol = std::string(strategy::to_string(t.protocol));
}

// A reduce-scatter or all-gather whose link carries a fit of its own (LinkSpec::op_fit, calibrated
// on a host's shared memory): each step takes that fit's latency and bandwidth where they are
// slower than the link's, as the extra time of the step (collective_time takes the same max).
void add_op_fit(Schedule& s, CollectiveOp op, double bytes, int calls, int n, const strategy::ClusterSpec& cluster,
                const Layout& layout, double min_chunk_bytes) {
  double a_op = 0, b_op = 0;
  // The fit prices the whole message however it is cut (strategy::LinkSpec::op_fit); the link's
  // steps carry the uneven chunks' bytes, so the extra is the fit's time beyond theirs, as
  // collective_time's max(link, fit).
  if (cluster.intra.op_fit(op, a_op, b_op))
    add_step_price(s, a_op, b_op, ring_step_bytes(op, bytes, n, 1, -1), calls, cluster, layout,
                   ring_step_bytes(op, bytes, n, 1, min_chunk_bytes));
}

bool on_one_node(const std::vector<int>& members, const Layout& layout) {
  for (int r : members)
    if (!layout.same_node(r, members.front())) return false;
  return true;
}

}  // namespace

std::string_view to_string(AlgorithmChoice c) {
  switch (c) {
    case AlgorithmChoice::kAuto:
      return "auto";
    case AlgorithmChoice::kRing:
      return "ring";
    case AlgorithmChoice::kTree:
      return "tree";
    case AlgorithmChoice::kAnalytic:
      return "analytic";
  }
  return "?";
}

Schedule collective_schedule(CollectiveOp op, double bytes, int count, const std::vector<int>& members,
                             const Layout& layout, const strategy::ClusterSpec& cluster, const ScheduleOptions& options,
                             double min_chunk_bytes) {
  const AlgorithmChoice choice = options.algorithm;
  Schedule s;
  const int n = int(members.size());
  if (n <= 1 || count <= 0) {
    s.algorithm = "none";
    return s;
  }
  const bool merge = options.coalesce_calls && count > 1;
  const double call_bytes = merge ? bytes * count : bytes;
  const double call_min_chunk = is_uneven(op, min_chunk_bytes) && merge ? min_chunk_bytes * count : min_chunk_bytes;
  const bool follow = choice == AlgorithmChoice::kAuto || choice == AlgorithmChoice::kAnalytic;
  const auto tuned = follow ? strategy::collective_time(op, bytes, members, cluster, min_chunk_bytes).algorithm
                            : strategy::Algorithm::kNone;
  const bool tree = op == CollectiveOp::kAllReduce && is_power_of_two(n) &&
                    (choice == AlgorithmChoice::kTree || tuned == strategy::Algorithm::kTree);
  // The two-level rings of an uneven call carry the balanced size whose busiest link moves as
  // much (collective_time's hierarchical pricing).
  const double level_bytes = !is_uneven(op, call_min_chunk)
                                 ? call_bytes
                                 : call_bytes * strategy::ring_link_bytes(op, call_bytes, n, call_min_chunk) /
                                       strategy::ring_link_bytes(op, call_bytes, n);
  if (tree)
    halving_doubling(s, call_bytes, members);
  else if (choice == AlgorithmChoice::kAnalytic && tuned == strategy::Algorithm::kHierarchical &&
           hierarchical(s, op, level_bytes, members, layout)) {
  } else if (op == CollectiveOp::kBroadcast)
    chain(s, call_bytes, members, layout);
  else
    ring(s, op, call_bytes, members, layout, call_min_chunk);

  if (merge) {
    for (auto& step : s.steps) step.extra_seconds = (count - 1) * largest_latency(step, layout);
  } else {
    s.repeat = count;
  }
  if (s.algorithm == "ring" && op != CollectiveOp::kBroadcast && strategy::uses_nccl_protocols(cluster) &&
      on_one_node(members, layout))
    add_nccl_protocol(s, op, bytes, merge ? count : 1, members, cluster, layout, min_chunk_bytes);
  else if (s.algorithm == "ring" && on_one_node(members, layout))
    add_op_fit(s, op, bytes, merge ? count : 1, n, cluster, layout, min_chunk_bytes);
  if (options.merge_steps) merge_identical_steps(s, layout);
  return s;
}

std::vector<double> sent_bytes(const Schedule& s, const std::vector<int>& members) {
  std::map<int, size_t> index;
  for (size_t i = 0; i < members.size(); ++i) index[members[i]] = i;
  std::vector<double> out(members.size(), 0.0);
  for (const auto& step : s.steps)
    for (const auto& m : step.messages) out[index.at(m.from)] += m.bytes * s.repeat;
  return out;
}

}  // namespace parlab::sim
