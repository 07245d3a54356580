#pragma once
// The simulator's network model: how the messages of collectives and sends cross the links of
// the platform (sim/platform.h), and who holds which link meanwhile. The executor (sim/
// executor.h) decides what each rank runs and when; it hands this component a collective's
// schedule or a send, and the network decides how that traffic is timed.
//
// A collective step whose links carry nothing else is timed in closed form: alone on its links
// every message takes what SimGrid's model gives a lone flow, route latency + bytes / narrowest
// link (Platform::alone_seconds), so the step takes its slowest message and its driver waits
// that long instead of handing SimGrid one flow per message. The collective claims its links
// while it runs; traffic that then wants one of them (a send, a collective step run as flows)
// preempts it: what each message has left goes on as SimGrid flows, sharing the links max-min
// fairly with the newcomer from then on. A flow pays its route latency when it starts, so the
// hand-over credits each message with what it would have moved alone during that latency
// (bytes_left): exact when the newcomer's latency is no shorter (its own flows move nothing
// before it), otherwise off by at most the difference. SimGrid's cost per flow grows with the
// flows in flight (docs/DESIGN.md), so plans whose groups share no links -- TP inside the nodes,
// DP rings each through its own NIC -- simulate in a fraction of the time.
//
// Two parts: LinkTable, the bookkeeping of claims, flows and sends per link (no SimGrid in it,
// so its rules are tested directly), and Network, which runs the traffic on SimGrid through it.
#include <array>
#include <cstdint>
#include <functional>
#include <simgrid/s4u.hpp>
#include <vector>

#include "sim/platform.h"
#include "sim/schedule.h"
#include "strategy/cluster_spec.h"

namespace parlab::sim {

// One schedule step as the closed form sees it.
struct StepTiming {
  std::vector<int> links;                           // every link its messages cross (sorted, unique)
  bool exclusive = true;                            // no link carries two of its messages
  std::vector<double> bytes, latency, bytes_per_s;  // per message: as SimGrid gets them, alone
  double alone_seconds = 0;                         // its slowest message, alone
  // The CPU its messages cost per byte, as a share of the cluster's comm_cpu_seconds_per_byte: 1,
  // or for an uneven collective that overlaps compute (Op::overlaps_compute) the balanced ring's
  // bytes over the uneven ring's (strategy::comm_cpu_bytes).
  double cpu_scale = 1;
};

// A collective schedule with what the network needs to time it.
struct TimedSchedule {
  Schedule schedule;
  std::vector<StepTiming> steps;  // parallel to schedule.steps
  std::vector<int> links;         // union over the steps
  bool exclusive = true;          // every step is
};

// A collective timed in closed form, holding its links until it ends or something preempts it.
struct Claim {
  int index = 0, stream = 0;  // the driving stream (the executor's program index and stream)
  const std::vector<int>* links = nullptr;
  bool preempted = false;
  double at = 0;  // when
};

// What each message of a closed-form step that began at `start` still has to move when it is
// preempted at `at`: -1 for a message that had already arrived, else its bytes less what it
// moved alone since the step began (the flow that carries the rest pays the route latency
// again, so the message is credited with that latency's worth: the hand-over costs no time).
std::vector<double> bytes_left(const StepTiming& step, double start, double at);

// Per link: the closed-form collective holding it, the collective steps using it as flows, and
// the sends that may still be on their way over it.
class LinkTable {
 public:
  using Wake = std::function<void(const Claim&)>;  // the driver of a preempted claim must look again
  using InFlight = std::function<bool()>;          // a send: true while it is still on its way

  // `track_sends`: remember sends, so that a link they may still be crossing is not free (only
  // the closed form asks; without it nothing claims links).
  LinkTable(int link_count, bool track_sends, Wake wake);

  // Nothing uses the links: no claim, no collective flows, no send still on its way.
  bool free(const std::vector<int>& links);
  // `claim` holds its links (they are free) until release() or a preemption.
  void claim(Claim& claim);
  // The claim's collective ended. Preempted, its driver had taken its links over as flows,
  // which end now; else its links are free again.
  void release(const Claim& claim);

  // A collective step runs as flows on `links`: whoever holds one of them in closed form gives
  // way at `now`. end_flows() when the step's messages have arrived.
  void begin_flows(const std::vector<int>& links, double now);
  void end_flows(const std::vector<int>& links);
  // A send is about to start on `route`: claims on it end at `now`. track_send() once it is on
  // its way.
  void preempt_route(std::array<int, 2> route, double now);
  void track_send(std::array<int, 2> route, const InFlight& in_flight);

  const Claim* claim_on(int link) const { return claim_of_[link]; }
  int flows_on(int link) const { return flows_on_[link]; }

 private:
  // Traffic wants a link `claim` holds: the claim ends now; its links count as carrying flows
  // from here on (its driver takes them over when it wakes, and releases them after).
  void preempt(Claim& claim, double now);

  bool track_sends_ = false;
  Wake wake_;
  std::vector<Claim*> claim_of_;                 // per link: the closed-form collective holding it
  std::vector<int> flows_on_;                    // per link: collective steps using it as flows
  std::vector<std::vector<InFlight>> sends_on_;  // per link: sends that may be on their way
};

// The network on the SimGrid platform: times collective schedules (closed form while they have
// their links to themselves, flows otherwise) and starts sends. It runs inside the actor that
// drives the traffic.
class Network {
 public:
  // How a closed-form step's driver waits: wait(index, stream, seconds) blocks the stream until
  // `seconds` passed (true) or wake(index, stream) came first (false; also a stale wake-up).
  struct Driver {
    std::function<bool(int index, int stream, double seconds)> wait;
    std::function<void(int index, int stream)> wake;
  };

  // `closed_form`: time steps alone on their links in closed form where the cluster allows it
  // (not where communication costs CPU: that work competes with compute on the cores, which
  // only SimGrid's CPU model captures).
  Network(const Layout& layout, const Platform& platform, const strategy::ClusterSpec& cluster, bool closed_form,
          Driver driver);

  TimedSchedule timed(Schedule schedule) const;
  StepTiming timing(const ScheduleStep& step) const;

  // Runs the schedule step by step, driven by program `index`'s stream `stream`; returns when
  // its last step (and that step's extra time) is over. `copies`: the traffic stands for that
  // many identical ones (ExecOptions::tp_replicas) and is counted that many times.
  void run(const TimedSchedule& schedule, int index, int stream, int copies = 1);
  // The same for a collective whose links no other traffic can touch (a TP group's under TP
  // symmetry, sim/symmetry.h): its steps are timed as run() times them when nothing preempts
  // them, by the driving actor's own sleeps, without claiming the links.
  void run_alone(const TimedSchedule& schedule, int index, int stream, int copies = 1);
  // Starts a message from -> to; it needs no matching receive and nobody waits for it here.
  simgrid::s4u::CommPtr send(int from, int to, double bytes, int copies = 1);

  bool closed_form() const { return closed_form_; }
  int64_t messages() const { return messages_; }                    // of collective algorithms and sends, however timed
  int64_t flows() const { return flows_; }                          // of which SimGrid carried as flows
  int64_t closed_form_steps() const { return closed_form_steps_; }  // timed in closed form to their end
  int64_t preempted_steps() const { return preempted_steps_; }      // closed-form steps turned into flows

 private:
  void flow_step(const ScheduleStep& step, const StepTiming& t, int copies, const std::vector<double>* bytes = nullptr);
  bool closed_form_step(Claim& claim, const ScheduleStep& step, const StepTiming& t, int copies);
  simgrid::s4u::ExecPtr comm_cpu_work(int from, double bytes);

  const Layout& layout_;
  const Platform& platform_;
  const strategy::ClusterSpec& cluster_;
  bool closed_form_ = false;
  Driver driver_;
  LinkTable links_;
  std::vector<simgrid::s4u::ExecPtr> background_cpu_;  // CPU work of sends, kept referenced until the run ends
  int64_t messages_ = 0, flows_ = 0, closed_form_steps_ = 0, preempted_steps_ = 0;
};

}  // namespace parlab::sim
