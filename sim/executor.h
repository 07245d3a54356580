#pragma once
// The executor: step programs as SimGrid actors. Each rank has one actor per stream (compute,
// comm) interpreting its StepProgram with the semantics of strategy/step_program.h:
//
//   - a stream runs its ops in program order; an op starts once its `deps` (any stream) are done;
//   - compute ops execute FLOPs on the rank's host: max(flops, memory_bytes x speed / memory
//     bandwidth), so bandwidth-bound ops (the optimizer) take their roofline time;
//   - a collective starts when the last member of its group reaches it (members meet by group
//     and call number) and runs as the messages of its algorithm (sim/schedule.h); `count` > 1
//     is that many back-to-back calls; when every member goes on at once with the group's next
//     call (sequence parallelism's per-layer pairs), the driver runs that one too and the
//     members meet once for the run (the same waits, so the same times);
//   - a send is issued and the stream moves on (a helper actor carries the message); a receive
//     blocks its stream until the message has arrived; per pair of ranks messages arrive in order;
//   - steps follow each other per rank: a rank starts step s+1 once both its streams finished
//     step s and its sends were delivered (no global barrier: pipeline stages drift as they do).
//
// How the messages cross the links is the network's (sim/network.h): a collective step alone on
// its links is timed in closed form (ExecOptions::closed_form), other traffic on them preempts it
// and the rest goes on as SimGrid flows, max-min fair with the newcomer.
//
// When no actor can progress (a stopped rank, inconsistent programs), SimGrid ends the run; the
// executor reports every blocked stream and every collective some members reached but others
// never did.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/faults.h"
#include "sim/schedule.h"
#include "strategy/cluster_spec.h"
#include "strategy/cost_model.h"
#include "strategy/step_program.h"

namespace parlab::sim {

struct ExecOptions {
  int steps = 2;  // simulated steps (warm-up included)
  // The model's GEMM shapes on this device (wave quantization): compute ops take the cost
  // model's time for them (strategy::compute_seconds_alone with the same GemmTimes).
  strategy::GemmTimes gemms;
  ScheduleOptions schedule;
  // Time collective steps alone on their links in closed form (sim/network.h); false: every message
  // is a SimGrid flow. Off where communication costs CPU (cpu-local): that work competes with
  // compute on the cores, which only SimGrid's CPU model captures.
  bool closed_form = true;
  // Called from the simulation every ~0.2 wall seconds: the fraction of ops done and a line
  // saying where the simulation is. Runs inside the simulating process (simulate.h relays it).
  std::function<void(double fraction_done, std::string_view what)> progress;
  // > 1: the programs are TP position 0 of a plan whose TP positions are symmetric (sim/symmetry.h):
  // each stands for this many ranks. Their TP groups' other members are not simulated (a TP
  // collective starts when its one simulated member reaches it and is timed over the whole
  // group), and the counts (messages, flows, steps, ops) are the whole world's.
  int tp_replicas = 1;
};

// When one op ran, in simulated seconds. For a collective, `ready` is when this rank reached
// it and `start` when the last member did; for a receive, `end` is when the data arrived (or
// `ready` if it was already there); for a send, `end` is its delivery. -1: never.
struct OpRecord {
  double ready = -1, start = -1, end = -1;
};

struct BlockedStream {
  int rank = 0;
  int stream = 0;  // 0 compute, 1 comm
  int step = 0;
  int op = 0;  // op id in the rank's program
  double since_seconds = 0;
  int64_t sequence = -1;  // collectives: the call number within the group it waits in
};

// A collective that some members reached and that never started: not every member came, or
// they came with different calls (op, bytes or count differ: a rank skipped or added a call,
// which a real library cannot detect either, so it hangs here).
struct PendingCollective {
  std::string group;
  int64_t sequence = 0;      // call number within the group, counted over all steps
  std::vector<int> arrived;  // world ranks, ascending
  std::vector<int> ops;      // the op id each arrived rank called, parallel to `arrived`
  bool mismatch = false;
};

struct RawRun {
  int steps = 0;
  std::vector<std::vector<OpRecord>> records;   // [program][step * ops + op]
  std::vector<std::vector<double>> step_start;  // [program][step]; -1: never started
  std::vector<double> sent_bytes;               // [program] bytes its endpoints sent, all steps
  std::vector<int> stopped;                     // world ranks a stop fault ended
  std::vector<BlockedStream> blocked;           // empty unless the run deadlocked
  std::vector<PendingCollective> pending;
  double end_seconds = 0;
  int64_t messages = 0;           // messages of collective algorithms and sends, however timed
  int64_t flows = 0;              // of which SimGrid carried as flows
  int64_t closed_form_steps = 0;  // collective steps timed in closed form to their end
  int64_t preempted_steps = 0;    // closed-form steps other traffic turned into flows
  int64_t ops = 0;
  bool deadlock() const { return !blocked.empty(); }
};

// Runs the programs (one per rank; every member of every group among them) on a platform built
// from `cluster`. Creates the process's SimGrid engine, of which a process may have only one
// in its life: call it in a fresh process (simulate.h forks one per simulation).
RawRun execute(const std::vector<strategy::StepProgram>& programs, const strategy::ClusterSpec& cluster,
               const std::vector<Fault>& faults, const ExecOptions& options);

// A RawRun as bytes and back, to cross the process boundary.
std::string serialize(const RawRun& run);
RawRun deserialize(const std::string& bytes);

}  // namespace parlab::sim
