#pragma once
// The executor's per-rank and per-collective state (sim/executor.cpp's Simulation keeps it):
// private to the executor, in a header of its own only to keep executor.cpp short.
#include <cstdint>
#include <optional>
#include <simgrid/s4u.hpp>
#include <utility>
#include <vector>

#include "sim/executor.h"
#include "sim/network.h"
#include "strategy/step_program.h"

namespace parlab::sim::exec {

// What a blocked stream actor waits for; whoever changes that state wakes it.
// kClosedForm: the end of a collective step timed in closed form, or its preemption (sim/network.h).
// kCpu: on shared cores the ranks fill, the rank's other stream holds the CPU (serialize_).
enum class Wait { kNone, kDep, kBarrier, kRecv, kCollective, kClosedForm, kCpu };

struct Rank {
  const strategy::StepProgram* prog = nullptr;
  std::vector<int> queue[2];   // op ids per stream, program order
  size_t pos[2] = {0, 0};      // per stream: the index in queue of the op it is at
  std::vector<int> done_step;  // per op: the last step in which it finished (-1: none)
  std::vector<int> gid;        // program group index -> global group id
  std::vector<int64_t> calls;  // per global group: collectives issued so far
  std::optional<Fault> stop;
  double slowdown = 1;
  simgrid::s4u::Host* compute_host = nullptr;

  simgrid::s4u::SemaphorePtr sem[2];
  Wait wait[2] = {Wait::kNone, Wait::kNone};
  int wait_op[2] = {-1, -1};
  // Sends issued and not yet waited for, per stream, with the record their delivery completes.
  std::vector<std::pair<simgrid::s4u::CommPtr, OpRecord*>> pending_sends[2];
  int entered_step[2] = {0, 0};  // the step each stream is in
  bool finished[2] = {false, false};
  bool stopped = false;
  bool comm_busy = false;  // the communication stream is in a collective (serialize_)
  struct {
    int step = 0, op = -1;
    double since = 0;
    int64_t sequence = -1;
  } current[2];
};

struct Arrival {
  int index = 0;  // program index
  int stream = 0;
  const strategy::Op* op = nullptr;
  OpRecord* record = nullptr;
};

// A collective's schedule, timed by the network, with what each member sends in one pass.
struct CachedSchedule {
  TimedSchedule timed;
  std::vector<double> sent;  // per member position
};

}  // namespace parlab::sim::exec
