#pragma once
// Collectives as the messages of their algorithms. The simulator runs a schedule step by step:
// every message of a step is in flight at once (so they contend for the links they share), the
// next step starts when all of them have arrived. On uniform links this gives the alpha-beta
// times of strategy/cost_model.h; on real topologies, contention and slow links show up.
//
//   ring all-reduce        reduce-scatter then all-gather around the ring: 2(n-1) steps, each
//                          rank sends S/n to its right neighbour  ->  2(n-1)(a + S/(n B))
//   ring reduce-scatter,   (n-1) steps of S/n                     ->  (n-1)(a + S/(n B))
//   ring all-gather        with uneven chunks (ZeRO's; c_min the smallest), (n-1) steps of
//                          (S - c_min)/(n-1): the busiest link's bytes (strategy::ring_link_bytes)
//                          ->  (n-1) a + (S - c_min)/B; balanced, c_min = S/n, the line above
//   broadcast              pipelined chain from the lowest rank in P chunks: (n-2+P) steps of
//                          S/P, P chosen to minimise (n-2+P)(a + S/(P B))
//   hierarchical           (kAnalytic, groups spanning N nodes with k members each) rings inside
//                          the nodes, then rings across nodes on S/k: cost_model.h's formula
//   halving-doubling       (when the analytic model's tuner picks a tree for an all-reduce, as
//                          NCCL does for small messages; n a power of two): recursive-halving
//                          reduce-scatter then recursive-doubling all-gather, 2 log2(n) steps
//                          exchanging S/2, S/4, ... -> 2 log2(n) a + 2 (n-1)/n S/B, the
//                          latency of the tree formula.
//
// Groups that span nodes use the same ring order over ranks, crossing node links as NCCL's rings
// do, and like NCCL several rings (channels) when the group has k > 1 members per node: channel c
// visits each node's members rotated by c, so it leaves a node through a different member's NIC;
// every channel carries S / channels.
//
// Rings inside one NVLink node run under NCCL's protocols (strategy::nccl_ring_time): each step
// takes the protocol's step latency and bus bandwidth, the call its base latency, as steps'
// extra time on top of the links' own (so LL's quarter bandwidth makes 1 MiB slower per byte
// than 1 GiB, while contention still acts on the links).
#include <string>
#include <vector>

#include "sim/platform.h"
#include "strategy/cluster_spec.h"
#include "strategy/collectives.h"

namespace parlab::sim {

enum class AlgorithmChoice {
  kAuto,  // NCCL-like: rings (channels across nodes); halving-doubling where the analytic
          // tuner picks a tree
  kRing,
  kTree,      // halving-doubling for all-reduce when n is a power of two, else ring
  kAnalytic,  // exactly the analytic tuner's algorithm: like kAuto, but groups spanning nodes
              // take the two-level (hierarchical) rings where the tuner does
};

struct ScheduleOptions {
  AlgorithmChoice algorithm = AlgorithmChoice::kAuto;
  // Run `count` back-to-back calls (a layer range's TP collectives) as one call of count x bytes
  // whose every step is followed by (count - 1) x the step's largest route latency.
  bool coalesce_calls = false;
  // Run g consecutive identical steps (a ring's 2(n-1) steps) as one step of g x the bytes
  // followed by (g - 1) x the step's largest route latency.
  // Both are exact on idle links (time = the sum of the steps) at a fraction of the simulated
  // messages. What they lose is the step-by-step synchronisation under contention: step by
  // step, every step waits for its slowest edge, so a link that is busy only now and then slows
  // each step it touches; merged, the other edges run ahead. Defaults: every call, every step.
  bool merge_steps = false;
};

struct Message {
  int from = 0, to = 0;  // world ranks
  double bytes = 0;
};

struct ScheduleStep {
  std::vector<Message> messages;
  // Added after the step's messages (coalesced calls and merged steps, see ScheduleOptions).
  double extra_seconds = 0;
};

struct Schedule {
  std::string algorithm;  // "ring", "hierarchical", "halving-doubling", "chain", "none"
  std::string protocol;   // NCCL's protocol of a single-node NVLink ring ("LL", "LL128", "Simple", "measured")
  int channels = 1;
  std::vector<ScheduleStep> steps;
  int repeat = 1;  // run the steps this many times
};

// The schedule of `count` back-to-back calls of `bytes` (nccl-tests size convention) over
// `members` (world ranks, ascending), coalesced and merged as `options` say. `min_chunk_bytes`
// (>= 0): an uneven reduce-scatter's or all-gather's smallest chunk (strategy::Op); -1 balanced.
Schedule collective_schedule(strategy::CollectiveOp op, double bytes, int count, const std::vector<int>& members,
                             const Layout& layout, const strategy::ClusterSpec& cluster, const ScheduleOptions& options,
                             double min_chunk_bytes = -1);

// Bytes each rank puts on links in one pass of the schedule (index: position in `members`).
std::vector<double> sent_bytes(const Schedule& schedule, const std::vector<int>& members);

std::string_view to_string(AlgorithmChoice choice);

}  // namespace parlab::sim
