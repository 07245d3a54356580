#include "sim/executor.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <simgrid/s4u.hpp>
#include <span>
#include <tuple>

#include "sim/executor_state.h"
#include "sim/network.h"
#include "sim/platform.h"
#include "strategy/cost_model.h"
#include "base/errors.h"

namespace parlab::sim {
namespace sg4 = simgrid::s4u;
using strategy::Op;
using strategy::OpKind;
using strategy::StepProgram;
using strategy::Stream;

namespace {

using exec::Arrival;
using exec::CachedSchedule;
using exec::Rank;
using exec::Wait;

class Simulation {
 public:
  Simulation(const std::vector<StepProgram>& programs, const strategy::ClusterSpec& cluster,
             const std::vector<Fault>& faults, const ExecOptions& options)
      : programs_(programs),
        cluster_(cluster),
        options_(options),
        layout_(make_layout(cluster, programs.front().world)),
        platform_(cluster, layout_, cluster.device_flops_per_s(programs.front().plan.precision), faults),
        network_(layout_, platform_, cluster, options.closed_form, network_driver()) {
    index_of_.assign(layout_.world, -1);
    for (size_t i = 0; i < programs.size(); ++i) index_of_.at(programs[i].rank) = int(i);
    // Global group ids, in name order, so ids do not depend on which rank was seen first.
    std::map<std::string, const strategy::Group*> groups;
    for (const auto& p : programs)
      for (const auto& g : p.groups) groups.emplace(g.name, &g);
    for (const auto& [name, g] : groups) {
      // Under TP symmetry a TP group's other positions are not simulated: its one simulated
      // member stands for them (ExecOptions::tp_replicas). The other groups a collective uses
      // hold position 0 only (sim/symmetry.h); the world, which none uses, holds them all.
      const bool replicated = options.tp_replicas > 1 && g->kind == strategy::GroupKind::kTP;
      const bool partial_ok = options.tp_replicas > 1;
      int present = 0;
      for (int r : g->ranks) {
        if (r < 0 || r >= layout_.world)
          throw RuntimeError("group " + name + " has rank " + std::to_string(r) + ", outside the world");
        if (index_of_[r] >= 0)
          ++present;
        else if (!partial_ok)
          throw RuntimeError("group " + name + " has rank " + std::to_string(r) +
                             ", which is not among the simulated programs");
      }
      gid_of_[name] = int(group_members_.size());
      group_names_.push_back(name);
      group_members_.push_back(g->ranks);
      group_present_.push_back(present);
      group_copies_.push_back(replicated ? 1 : options.tp_replicas);
    }
    ranks_.resize(programs.size());
    run_.steps = options.steps;
    run_.records.resize(programs.size());
    run_.step_start.assign(programs.size(), std::vector<double>(options.steps, -1.0));
    run_.sent_bytes.assign(programs.size(), 0.0);
    for (size_t i = 0; i < programs.size(); ++i) {
      const StepProgram& p = programs[i];
      Rank& R = ranks_[i];
      R.prog = &p;
      for (const Op& op : p.ops) {
        if (op.pattern_calls > 0)  // BuildOptions::call_runs is for walks: here every call is an op
          throw RuntimeError("rank " + std::to_string(p.rank) + " op " + std::to_string(op.id) +
                             ": a run of calls (BuildOptions::call_runs), which the simulator does not take");
        R.queue[strategy::walk_lane(op)].push_back(op.id);
      }
      R.done_step.assign(p.ops.size(), -1);
      for (const auto& g : p.groups) R.gid.push_back(gid_of_.at(g.name));
      R.calls.assign(group_members_.size(), 0);
      R.stop = stop_of(faults, p.rank);
      R.slowdown = compute_slowdown(faults, p.rank);
      R.compute_host = platform_.compute_host(p.rank);
      R.sem[0] = sg4::Semaphore::create(0);
      R.sem[1] = sg4::Semaphore::create(0);
      run_.records[i].assign(size_t(options.steps) * p.ops.size(), OpRecord{});
      total_ops_ += int64_t(options.steps) * int64_t(p.ops.size());
    }
    serialize_ = cluster.serializes_comm_with_compute();
    runs_ = !serialize_;  // taking turns for the CPU is decided op by op
  }

  void spawn() {
    for (size_t i = 0; i < programs_.size(); ++i)
      for (int st = 0; st < 2; ++st)
        sg4::Actor::create("r" + std::to_string(programs_[i].rank) + (st == 0 ? ".compute" : ".comm"),
                           platform_.home(programs_[i].rank), [this, i, st] { stream_main(int(i), st); });
  }

  RawRun finish() {
    run_.end_seconds = sg4::Engine::get_clock();
    for (size_t i = 0; i < ranks_.size(); ++i) {
      const Rank& R = ranks_[i];
      if (R.stopped) run_.stopped.push_back(R.prog->rank);
      for (int st = 0; st < 2; ++st)
        if (!R.finished[st] && !R.stopped)
          run_.blocked.push_back(
              {R.prog->rank, st, R.current[st].step, R.current[st].op, R.current[st].since, R.current[st].sequence});
    }
    for (const auto& [key, inst] : instances_) {
      PendingCollective p;
      p.group = group_names_[std::get<0>(key)];
      p.sequence = std::get<1>(key);
      std::vector<std::pair<int, int>> arrived;
      for (const auto& a : inst) arrived.push_back({programs_[a.index].rank, a.op->id});
      std::sort(arrived.begin(), arrived.end());
      for (const auto& [rank, op] : arrived) {
        p.arrived.push_back(rank);
        p.ops.push_back(op);
      }
      p.mismatch = !same_call(inst);
      run_.pending.push_back(std::move(p));
    }
    run_.messages = network_.messages();
    run_.flows = network_.flows();
    run_.closed_form_steps = network_.closed_form_steps();
    run_.preempted_steps = network_.preempted_steps();
    run_.ops = ops_done_ * options_.tp_replicas;
    return std::move(run_);
  }

 private:
  // ---- waiting and waking -------------------------------------------------------------------
  template <typename Ready>
  void block_until(int i, int st, Wait why, Ready ready) {
    Rank& R = ranks_[i];
    while (!ready()) {
      R.wait[st] = why;
      // The compute stream waits for something: the rank's collectives may have the CPU.
      if (serialize_ && st == 0 && why != Wait::kCpu) wake(i, 1, Wait::kCpu);
      R.sem[st]->acquire();
    }
    R.wait[st] = Wait::kNone;
  }

  // serialize_: the compute stream has nothing it can run now (it waits for a dependency, a
  // message, a collective's members or the step's end), so the rank's CPU is the collectives'.
  // The cost model's walk places compute first in the same way.
  bool compute_idle(int i) const {
    const Rank& R = ranks_[i];
    if (R.finished[0] || R.stopped) return true;
    switch (R.wait[0]) {
      case Wait::kDep:
      case Wait::kBarrier:
      case Wait::kRecv:
      case Wait::kCollective:
        return true;
      default:
        return false;
    }
  }

  void wake(int i, int st, Wait why) {
    Rank& R = ranks_[i];
    if (R.wait[st] != why) return;
    R.wait[st] = Wait::kNone;
    R.sem[st]->release();
  }

  // A collective step timed in closed form parks its driving stream until the step's end or
  // a preemption (sim/network.h).
  Network::Driver network_driver() {
    return {.wait =
                [this](int i, int st, double seconds) {
                  Rank& R = ranks_[i];
                  R.wait[st] = Wait::kClosedForm;
                  const bool timed_out = R.sem[st]->acquire_timeout(seconds);
                  R.wait[st] = Wait::kNone;
                  return timed_out;
                },
            .wake = [this](int i, int st) { wake(i, st, Wait::kClosedForm); }};
  }

  // ---- the stream actor --------------------------------------------------------------------
  void stream_main(int i, int st) {
    Rank& R = ranks_[i];
    const StepProgram& p = *R.prog;
    const size_t nops = p.ops.size();
    for (int s = 0; s < options_.steps; ++s) {
      if (!enter_step(i, st, s)) return;
      for (R.pos[st] = 0; R.pos[st] < R.queue[st].size(); ++R.pos[st]) {
        const int id = R.queue[st][R.pos[st]];
        if (stops_at(R, s, id)) return halt(i);
        const Op& op = p.ops[id];
        OpRecord& rec = run_.records[i][size_t(s) * nops + id];
        R.current[st] = {s, id, sg4::Engine::get_clock(), -1};
        for (int d : op.deps) {
          R.wait_op[st] = d;
          block_until(i, st, Wait::kDep, [&] { return R.done_step[d] >= s; });
        }
        rec.ready = sg4::Engine::get_clock();
        execute(i, st, op, rec);
        // A run of collectives (run_collective) may have carried the stream past further ops.
        finish_op(i, st, s, R.queue[st][R.pos[st]]);
      }
      // The step ends when the rank's messages have been delivered.
      for (auto& [comm, record] : R.pending_sends[st]) {
        comm->wait();
        record->end = comm->get_finish_time();
      }
      R.pending_sends[st].clear();
    }
    R.finished[st] = true;
    R.current[st].op = -1;
    if (serialize_ && st == 0) wake(i, 1, Wait::kCpu);
  }

  static bool stops_at(const Rank& R, int s, int id) {
    return R.stopped || (R.stop && (s > R.stop->step || (s == R.stop->step && id >= R.stop->op)));
  }

  void finish_op(int i, int st, int s, int id) {
    Rank& R = ranks_[i];
    R.done_step[id] = s;
    if (R.wait_op[1 - st] == id) wake(i, 1 - st, Wait::kDep);
    progress();
  }

  // Both streams of a rank enter step s together (s > 0: once both finished step s - 1).
  bool enter_step(int i, int st, int s) {
    Rank& R = ranks_[i];
    R.entered_step[st] = s;
    if (s == 0) {
      run_.step_start[i][0] = 0;
      return true;
    }
    R.current[st] = {s, -1, sg4::Engine::get_clock(), -1};
    if (R.entered_step[1 - st] >= s) {
      run_.step_start[i][s] = sg4::Engine::get_clock();
      wake(i, 1 - st, Wait::kBarrier);
    } else {
      block_until(i, st, Wait::kBarrier, [&] { return R.stopped || R.entered_step[1 - st] >= s; });
    }
    if (R.stopped) {
      halt(i);
      return false;
    }
    return true;
  }

  // A stop fault: the rank issues nothing more; its other stream stops at its next op.
  void halt(int i) {
    Rank& R = ranks_[i];
    R.stopped = true;
    wake(i, 0, Wait::kBarrier);
    wake(i, 1, Wait::kBarrier);
    wake(i, 0, Wait::kCpu);
    wake(i, 1, Wait::kCpu);
  }

  void execute(int i, int st, const Op& op, OpRecord& rec) {
    if (op.is_compute())
      compute(i, op, rec);
    else if (op.is_collective())
      collective(i, st, op, rec);
    else if (op.kind == OpKind::kSend)
      send(i, st, op, rec);
    else
      recv(i, st, op, rec);
  }

  void compute(int i, const Op& op, OpRecord& rec) {
    Rank& R = ranks_[i];
    if (serialize_) block_until(i, 0, Wait::kCpu, [&] { return !R.comm_busy || R.stopped; });
    rec.start = sg4::Engine::get_clock();
    // The cost model's compute time (strategy::compute_seconds_alone) as FLOPs at the host's
    // speed, so a shared multicore host divides it as it divides any exec.
    double flops = strategy::compute_seconds_alone(op, cluster_, programs_.front().plan.precision, &options_.gemms) *
                   platform_.flops_per_core();
    flops *= R.slowdown;
    if (flops > 0) sg4::this_actor::exec_init(flops)->set_host(R.compute_host)->wait();
    rec.end = sg4::Engine::get_clock();
  }

  void collective(int i, int st, const Op& op, OpRecord& rec) {
    Rank& R = ranks_[i];
    // One that overlaps compute (Op::overlaps_compute) shares the cores with it through its flows' CPU work.
    const bool turns = serialize_ && st == 1 && !strategy::overlaps_compute_on(op, programs_[i], cluster_);
    if (turns) {
      block_until(i, st, Wait::kCpu, [&] { return compute_idle(i); });
      R.comm_busy = true;
    }
    run_collective(i, st, op, rec);
    if (turns) {
      R.comm_busy = false;
      wake(i, 0, Wait::kCpu);
    }
  }

  void run_collective(int i, int st, const Op& op, OpRecord& rec) {
    Rank& R = ranks_[i];
    const int gid = R.gid.at(op.group);
    const auto key = std::make_tuple(gid, R.calls[gid]++);
    R.current[st].sequence = std::get<1>(key);
    if (group_present_[gid] == 1) {  // the only member simulated (TP symmetry): nobody to meet
      Arrival solo{i, st, &op, &rec};
      const std::span<Arrival> members(&solo, 1);
      do drive_call(gid, members, i, st);
      while (runs_ && next_call(gid, members));
      return;
    }
    auto& arrivals = instances_[key];
    arrivals.push_back({i, st, &op, &rec});
    if (arrivals.size() < size_t(group_present_[gid]) || !same_call(arrivals)) {
      // Wait for the others (forever, if they called something else).
      block_until(i, st, Wait::kCollective, [&] { return rec.end >= 0; });
      return;
    }
    // The last member to arrive drives the algorithm's messages; the others wait.
    std::vector<Arrival> members = std::move(arrivals);
    instances_.erase(key);
    do drive_call(gid, members, i, st);
    while (runs_ && next_call(gid, members));
    for (const Arrival& a : members)
      if (a.index != i || a.stream != st) wake(a.index, a.stream, Wait::kCollective);
  }

  void drive_call(int gid, std::span<const Arrival> members, int i, int st) {
    const CachedSchedule& cs = schedule_for(gid, *members.front().op);  // same_call: any member's
    const double start = sg4::Engine::get_clock();
    if (group_present_[gid] == 1 && options_.tp_replicas > 1)  // a TP group's links are its own (sim/symmetry.h)
      network_.run_alone(cs.timed, i, st, group_copies_[gid]);
    else
      network_.run(cs.timed, i, st, group_copies_[gid]);
    const double end = sg4::Engine::get_clock();
    const auto& ranks = group_members_[gid];
    for (const Arrival& a : members) {
      a.record->start = start;
      a.record->end = end;
      const size_t pos = std::lower_bound(ranks.begin(), ranks.end(), programs_[a.index].rank) - ranks.begin();
      run_.sent_bytes[a.index] += cs.sent[pos];
    }
  }

  // A run of calls: when every member's stream goes on with the group's next call and nothing
  // else holds it back (sequence parallelism's per-layer reduce-scatter / all-gather pairs
  // follow one compute op), the driver runs that call too, at the moment the members would all
  // have reached it, and moves them on to it; they wake once at the end of the run instead of
  // meeting for every call. The driver's waits, and so the clock, are the same. False (nothing
  // changed) when some member's next op is anything else.
  bool next_call(int gid, std::span<Arrival> members) {
    // Each member's next op: on the stack for groups up to 8 (a call of a run is one of millions).
    const Op* on_stack[8];
    std::vector<const Op*> on_heap(members.size() > 8 ? members.size() : 0);
    const Op** next = members.size() > 8 ? on_heap.data() : on_stack;
    for (size_t k = 0; k < members.size(); ++k) {
      const Arrival& a = members[k];
      const Rank& R = ranks_[a.index];
      const int s = R.entered_step[a.stream];
      const auto& queue = R.queue[a.stream];
      const size_t n = R.pos[a.stream] + 1;
      if (n >= queue.size() || stops_at(R, s, queue[n])) return false;
      const Op& op = R.prog->ops[queue[n]];
      if (!op.is_collective() || R.gid[op.group] != gid) return false;
      if (k > 0 && (op.kind != next[0]->kind || op.bytes != next[0]->bytes || op.count != next[0]->count)) return false;
      for (int d : op.deps)
        if (R.done_step[d] < s && d != a.op->id) return false;
      next[k] = &op;
    }
    const double now = sg4::Engine::get_clock();
    for (size_t k = 0; k < members.size(); ++k) {
      Arrival& a = members[k];
      Rank& R = ranks_[a.index];
      const int s = R.entered_step[a.stream];
      finish_op(a.index, a.stream, s, a.op->id);
      ++R.pos[a.stream];
      a.op = next[k];
      a.record = &run_.records[a.index][size_t(s) * R.prog->ops.size() + size_t(a.op->id)];
      a.record->ready = now;
      R.current[a.stream] = {s, a.op->id, now, R.calls[gid]++};
    }
    return true;
  }

  static bool same_call(const std::vector<Arrival>& arrivals) {
    const Op& a = *arrivals.front().op;
    for (const Arrival& x : arrivals)
      if (x.op->kind != a.kind || x.op->bytes != a.bytes || x.op->count != a.count) return false;
    return true;
  }

  const CachedSchedule& schedule_for(int gid, const Op& op) {
    const auto key = std::make_tuple(gid, int(op.kind), op.bytes, op.count, op.min_chunk_bytes, op.overlaps_compute);
    // A group mostly repeats the call before the one before it (sequence parallelism's
    // reduce-scatter / all-gather pairs): two remembered per group, looked at before the map.
    if (recent_schedules_.empty()) recent_schedules_.assign(2 * group_members_.size(), nullptr);
    auto& recent = recent_schedules_[2 * size_t(gid) + (int(op.kind) & 1)];
    if (recent && recent->first == key) return recent->second;
    auto it = schedules_.find(key);
    if (it != schedules_.end()) {
      recent = &*it;
      return it->second;
    }
    CachedSchedule cs;
    cs.timed =
        network_.timed(collective_schedule(strategy::collective_of(op.kind), op.bytes, op.count, group_members_[gid],
                                           layout_, cluster_, options_.schedule, op.min_chunk_bytes));
    cs.sent = sent_bytes(cs.timed.schedule, group_members_[gid]);
    const auto kind = strategy::collective_of(op.kind);
    const int n = int(group_members_[gid].size());
    const double uneven = strategy::ring_link_bytes(kind, op.bytes, n, op.min_chunk_bytes);
    if (uneven > 0)
      for (StepTiming& t : cs.timed.steps) t.cpu_scale = strategy::comm_cpu_bytes(op, n) / uneven;
    auto made = schedules_.emplace(key, std::move(cs)).first;
    recent = &*made;
    return made->second;
  }

  // The message starts at once (it needs no matching receive: the receiver's buffer is there)
  // and the stream moves on. Its receiver waits for it through the pair's queue; the sender
  // collects its delivery time at the end of the step.
  void send(int i, int st, const Op& op, OpRecord& rec) {
    Rank& R = ranks_[i];
    const int from = R.prog->rank, to = op.peer;
    rec.start = sg4::Engine::get_clock();
    sg4::CommPtr comm = network_.send(from, to, op.bytes, options_.tp_replicas);
    run_.sent_bytes[i] += op.bytes;
    channels_[{from, to}].push_back(comm);
    R.pending_sends[st].push_back({comm, &rec});
    const int j = to >= 0 && to < int(index_of_.size()) ? index_of_[to] : -1;
    if (j >= 0) {
      wake(j, 0, Wait::kRecv);
      wake(j, 1, Wait::kRecv);
    }
  }

  // Messages of one pair arrive in the order they were sent (the k-th receive takes the k-th send).
  void recv(int i, int st, const Op& op, OpRecord& rec) {
    auto& queue = channels_[{op.peer, ranks_[i].prog->rank}];
    rec.start = rec.ready;
    block_until(i, st, Wait::kRecv, [&] { return !queue.empty(); });
    sg4::CommPtr comm = queue.front();
    queue.pop_front();
    comm->wait();
    rec.end = sg4::Engine::get_clock();
  }

  void progress() {
    ++ops_done_;
    if (!options_.progress || (ops_done_ & 0xFF) != 0) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_print_ < std::chrono::milliseconds(200)) return;
    last_print_ = now;
    options_.progress(
        double(ops_done_) / double(total_ops_),
        fmt::format("{:.6f} s simulated, {} of {} ops, {} messages ({} as SimGrid flows)", sg4::Engine::get_clock(),
                    ops_done_, total_ops_, network_.messages(), network_.flows()));
  }

  const std::vector<StepProgram>& programs_;
  const strategy::ClusterSpec& cluster_;
  ExecOptions options_;
  Layout layout_;
  Platform platform_;
  Network network_;
  std::vector<int> index_of_;
  std::map<std::string, int> gid_of_;
  std::vector<std::string> group_names_;
  std::vector<std::vector<int>> group_members_;
  std::vector<int> group_present_;  // per group: members among the simulated programs
  std::vector<int> group_copies_;   // per group: the identical groups its traffic stands for (tp_replicas)
  std::vector<Rank> ranks_;
  std::map<std::tuple<int, int64_t>, std::vector<Arrival>> instances_;
  using Schedules = std::map<std::tuple<int, int, double, int, double, bool>, CachedSchedule>;
  Schedules schedules_;
  std::vector<const Schedules::value_type*> recent_schedules_;  // schedule_for(): per group, two slots
  std::map<std::pair<int, int>, std::deque<sg4::CommPtr>> channels_;
  RawRun run_;
  bool serialize_ = false;  // strategy::ClusterSpec::serializes_comm_with_compute
  bool runs_ = false;       // drive runs of collectives as one meeting (next_call)
  int64_t ops_done_ = 0, total_ops_ = 0;
  std::chrono::steady_clock::time_point last_print_ = std::chrono::steady_clock::now();
};

}  // namespace

RawRun execute(const std::vector<StepProgram>& programs, const strategy::ClusterSpec& cluster,
               const std::vector<Fault>& faults, const ExecOptions& options) {
  if (programs.empty()) return {};
  // SimGrid's own chatter (configuration changes, its deadlock listing) stays quiet: the
  // executor reports a deadlock itself, as data.
  char arg0[] = "parlab-sim";
  char arg1[] = "--log=root.thresh:critical";
  char arg2[] = "--log=ker_engine.app:file:/dev/null";
  char arg3[] = "--log=ker_engine.add:0";
  char* argv[] = {arg0, arg1, arg2, arg3, nullptr};
  int argc = 4;
  sg4::Engine engine(&argc, argv);
  configure_engine();
  Simulation sim(programs, cluster, faults, options);
  sim.spawn();
  engine.run();
  return sim.finish();
}

}  // namespace parlab::sim
