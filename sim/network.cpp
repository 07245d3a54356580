#include "sim/network.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace parlab::sim {
namespace sg4 = simgrid::s4u;

std::vector<double> bytes_left(const StepTiming& t, double start, double at) {
  std::vector<double> left(t.bytes.size());  // -1: arrived before the preemption
  for (size_t m = 0; m < left.size(); ++m) {
    if (start + t.latency[m] + t.bytes[m] / t.bytes_per_s[m] <= at) {
      left[m] = -1;
      continue;
    }
    // The flow starting now pays the route latency again; it carries what the message would
    // still have to move after that latency had it stayed alone (the newcomer's flows are in
    // their own latency meanwhile), so the hand-over costs no time.
    const double moved = std::clamp((at - start) * t.bytes_per_s[m], 0.0, t.bytes[m]);
    left[m] = std::round(t.bytes[m] - moved);
  }
  return left;
}

// ---- LinkTable -----------------------------------------------------------------------------

LinkTable::LinkTable(int link_count, bool track_sends, Wake wake) : track_sends_(track_sends), wake_(std::move(wake)) {
  claim_of_.assign(size_t(link_count), nullptr);
  flows_on_.assign(size_t(link_count), 0);
  sends_on_.resize(size_t(link_count));
}

bool LinkTable::free(const std::vector<int>& links) {
  for (int l : links) {
    if (claim_of_[l] || flows_on_[l] > 0) return false;
    auto& sends = sends_on_[l];
    std::erase_if(sends, [](const InFlight& in_flight) { return !in_flight(); });
    if (!sends.empty()) return false;
  }
  return true;
}

void LinkTable::claim(Claim& claim) {
  for (int l : *claim.links) claim_of_[l] = &claim;
}

void LinkTable::release(const Claim& claim) {
  if (claim.preempted) {
    for (int l : *claim.links) --flows_on_[l];
  } else {
    for (int l : *claim.links) claim_of_[l] = nullptr;
  }
}

void LinkTable::begin_flows(const std::vector<int>& links, double now) {
  for (int l : links) {
    ++flows_on_[l];
    if (claim_of_[l]) preempt(*claim_of_[l], now);
  }
}

void LinkTable::end_flows(const std::vector<int>& links) {
  for (int l : links) --flows_on_[l];
}

void LinkTable::preempt_route(std::array<int, 2> route, double now) {
  for (int l : route)
    if (claim_of_[l]) preempt(*claim_of_[l], now);
}

void LinkTable::track_send(std::array<int, 2> route, const InFlight& in_flight) {
  if (!track_sends_) return;
  for (int l : route) {
    auto& sends = sends_on_[l];
    if (sends.size() > 16) std::erase_if(sends, [](const InFlight& f) { return !f(); });
    sends.push_back(in_flight);
  }
}

void LinkTable::preempt(Claim& claim, double now) {
  claim.preempted = true;
  claim.at = now;
  for (int l : *claim.links) {
    claim_of_[l] = nullptr;
    ++flows_on_[l];
  }
  wake_(claim);
}

// ---- Network -------------------------------------------------------------------------------

Network::Network(const Layout& layout, const Platform& platform, const strategy::ClusterSpec& cluster, bool closed_form,
                 Driver driver)
    : layout_(layout),
      platform_(platform),
      cluster_(cluster),
      closed_form_(closed_form && !(cluster.comm_cpu_seconds_per_byte > 0)),
      driver_(std::move(driver)),
      links_(layout.link_count(), closed_form_, [this](const Claim& c) { driver_.wake(c.index, c.stream); }) {}

TimedSchedule Network::timed(Schedule schedule) const {
  TimedSchedule ts;
  ts.schedule = std::move(schedule);
  for (const ScheduleStep& step : ts.schedule.steps) {
    ts.steps.push_back(timing(step));
    ts.exclusive = ts.exclusive && ts.steps.back().exclusive;
    ts.links.insert(ts.links.end(), ts.steps.back().links.begin(), ts.steps.back().links.end());
  }
  std::sort(ts.links.begin(), ts.links.end());
  ts.links.erase(std::unique(ts.links.begin(), ts.links.end()), ts.links.end());
  return ts;
}

StepTiming Network::timing(const ScheduleStep& step) const {
  StepTiming t;
  for (const auto& m : step.messages) {
    const auto route = layout_.route(m.from, m.to);
    t.links.insert(t.links.end(), route.begin(), route.end());
    const double bytes = double(std::llround(m.bytes));
    t.bytes.push_back(bytes);
    t.latency.push_back(platform_.link_latency_seconds(route[0]) + platform_.link_latency_seconds(route[1]));
    t.bytes_per_s.push_back(std::min(platform_.link_bytes_per_s(route[0]), platform_.link_bytes_per_s(route[1])));
    t.alone_seconds = std::max(t.alone_seconds, platform_.alone_seconds(m.from, m.to, bytes));
  }
  std::sort(t.links.begin(), t.links.end());
  t.exclusive = std::adjacent_find(t.links.begin(), t.links.end()) == t.links.end();
  t.links.erase(std::unique(t.links.begin(), t.links.end()), t.links.end());
  return t;
}

// Step by step; in closed form while the collective has its links to itself.
void Network::run(const TimedSchedule& ts, int index, int stream, int copies) {
  const Schedule& s = ts.schedule;
  Claim claim{index, stream, &ts.links};
  bool closed = closed_form_ && ts.exclusive && links_.free(ts.links);
  if (closed) links_.claim(claim);
  for (int rep = 0; rep < s.repeat; ++rep)
    for (size_t k = 0; k < s.steps.size(); ++k) {
      const ScheduleStep& step = s.steps[k];
      if (closed)
        closed = closed_form_step(claim, step, ts.steps[k], copies);
      else
        flow_step(step, ts.steps[k], copies);
      messages_ += copies * int64_t(step.messages.size());
      if (step.extra_seconds > 0) sg4::this_actor::sleep_for(step.extra_seconds);
    }
  // Preempted between steps or in the last one's latency sleep, the claim still holds its flows.
  if (closed) links_.release(claim);
}

void Network::run_alone(const TimedSchedule& ts, int index, int stream, int copies) {
  if (!closed_form_ || !ts.exclusive) return run(ts, index, stream, copies);
  const Schedule& s = ts.schedule;
  for (int rep = 0; rep < s.repeat; ++rep)
    for (size_t k = 0; k < s.steps.size(); ++k) {
      // closed_form_step's arithmetic, so the clock reads the same.
      const double end = sg4::Engine::get_clock() + ts.steps[k].alone_seconds;
      const double left = end - sg4::Engine::get_clock();
      if (left > 0) sg4::this_actor::sleep_for(left);
      closed_form_steps_ += copies;
      messages_ += copies * int64_t(s.steps[k].messages.size());
      if (s.steps[k].extra_seconds > 0) sg4::this_actor::sleep_for(s.steps[k].extra_seconds);
    }
}

// The step's messages as SimGrid flows; whoever held their links in closed form gives way.
void Network::flow_step(const ScheduleStep& step, const StepTiming& t, int copies, const std::vector<double>* bytes) {
  links_.begin_flows(t.links, sg4::Engine::get_clock());
  std::vector<sg4::CommPtr> comms;
  std::vector<sg4::ExecPtr> cpu;
  for (size_t m = 0; m < step.messages.size(); ++m) {
    const Message& msg = step.messages[m];
    const double b = bytes ? (*bytes)[m] : t.bytes[m];
    if (b < 0) continue;  // a preempted message that had already arrived
    comms.push_back(sg4::Comm::sendto_async(platform_.source(msg.from, msg.to), platform_.destination(msg.from, msg.to),
                                            uint64_t(b)));
    if (auto e = comm_cpu_work(msg.from, b * t.cpu_scale)) cpu.push_back(e);
  }
  sg4::Comm::wait_all(comms);
  for (auto& e : cpu) e->wait();
  flows_ += copies * int64_t(comms.size());
  links_.end_flows(t.links);
}

// Waits the step's closed-form time; true if it ran to its end alone. Preempted, what each
// message has left (it has moved at its lone rate since the step began) goes on as flows.
bool Network::closed_form_step(Claim& claim, const ScheduleStep& step, const StepTiming& t, int copies) {
  const double start = sg4::Engine::get_clock();
  const double end = start + t.alone_seconds;
  while (!claim.preempted) {
    const double left = end - sg4::Engine::get_clock();
    if (!(left > 0)) break;
    if (driver_.wait(claim.index, claim.stream, left)) break;  // else preempted, or a stale wake-up: look again
  }
  if (!claim.preempted) {
    closed_form_steps_ += copies;
    return true;
  }
  preempted_steps_ += copies;
  const std::vector<double> left = bytes_left(t, start, claim.at);
  flow_step(step, t, copies, &left);
  links_.release(claim);
  return false;
}

sg4::CommPtr Network::send(int from, int to, double bytes, int copies) {
  const auto route = layout_.route(from, to);
  links_.preempt_route(route, sg4::Engine::get_clock());
  sg4::CommPtr comm = sg4::Comm::sendto_async(platform_.source(from, to), platform_.destination(from, to),
                                              uint64_t(std::llround(bytes)));
  links_.track_send(route, [comm] { return comm->get_remaining() > 0; });
  if (auto e = comm_cpu_work(from, bytes)) background_cpu_.push_back(e);  // competes for the cores; nobody waits on it
  messages_ += copies;
  flows_ += copies;
  return comm;
}

// Where communication costs CPU (loopback TCP on shared cores: cluster comm_cpu_seconds_per_byte),
// the sender's host also executes that work, on the same cores its ranks compute on, so the
// two slow each other down as they do on the real machine.
sg4::ExecPtr Network::comm_cpu_work(int from, double bytes) {
  const double flops = bytes * cluster_.comm_cpu_seconds_per_byte * platform_.flops_per_core();
  if (!(flops > 0)) return nullptr;
  return sg4::this_actor::exec_init(flops)->set_host(platform_.compute_host(from))->start();
}

}  // namespace parlab::sim
