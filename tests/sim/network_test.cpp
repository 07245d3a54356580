// The network model on its own (sim/network.h): the link table's claims, flows, sends and
// preemptions, the hand-over of a preempted closed-form step, and the network timing a schedule
// on SimGrid alone, preempted and after a send.
//
// On SimGrid, the uniform test cluster (B = 10 GB/s, a = 10 us on the sender's link only): a
// message of S alone takes a + S/B. Two messages that start together through one link each
// take a + (S1 + S2)/B when of equal size (max-min: B/2 each).
#include <gtest/gtest.h>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <memory>
#include <simgrid/s4u.hpp>
#include <sstream>

#include "sim/isolate.h"
#include "sim/network.h"
#include "sim/platform.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::kUniformBytesPerS;
using testing::kUniformLatency;

// ---- the link table ------------------------------------------------------------------------

struct Woken {
  std::vector<const Claim*> claims;
  LinkTable::Wake fn() {
    return [this](const Claim& c) { claims.push_back(&c); };
  }
};

TEST(LinkTable, AClaimHoldsItsLinksUntilReleased) {
  Woken woken;
  LinkTable table(6, true, woken.fn());
  const std::vector<int> links{1, 2};
  EXPECT_TRUE(table.free(links));
  Claim claim{3, 1, &links};
  table.claim(claim);
  EXPECT_EQ(table.claim_on(1), &claim);
  EXPECT_EQ(table.claim_on(2), &claim);
  EXPECT_EQ(table.claim_on(0), nullptr);
  EXPECT_FALSE(table.free({2}));
  EXPECT_TRUE(table.free({0, 3, 4, 5}));
  table.release(claim);
  EXPECT_TRUE(table.free({0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(claim.preempted);
  EXPECT_TRUE(woken.claims.empty());
}

TEST(LinkTable, FlowsOnAClaimedLinkPreemptTheClaimAndWakeItsDriverOnce) {
  Woken woken;
  LinkTable table(6, true, woken.fn());
  const std::vector<int> links{1, 2};
  Claim claim{3, 1, &links};
  table.claim(claim);
  table.begin_flows({2, 4}, 0.5);
  EXPECT_TRUE(claim.preempted);
  EXPECT_DOUBLE_EQ(claim.at, 0.5);
  ASSERT_EQ(woken.claims.size(), 1u);
  EXPECT_EQ(woken.claims[0], &claim);
  // The claim is gone; its links count as carrying flows until its driver has taken them over.
  EXPECT_EQ(table.claim_on(1), nullptr);
  EXPECT_EQ(table.flows_on(1), 1);
  EXPECT_EQ(table.flows_on(2), 2);  // the newcomer's and the claim's
  EXPECT_EQ(table.flows_on(4), 1);
  // More traffic on its links finds no claim: no second wake-up, no second preemption time.
  table.begin_flows({1}, 0.7);
  EXPECT_EQ(woken.claims.size(), 1u);
  EXPECT_DOUBLE_EQ(claim.at, 0.5);
  table.end_flows({1});
  table.end_flows({2, 4});
  EXPECT_FALSE(table.free({1}));  // still the preempted claim's flows
  table.release(claim);
  EXPECT_TRUE(table.free({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(table.flows_on(1), 0);
  EXPECT_EQ(table.flows_on(2), 0);
}

TEST(LinkTable, TrafficOnOtherLinksLeavesAClaimAlone) {
  Woken woken;
  LinkTable table(6, true, woken.fn());
  const std::vector<int> links{1, 2};
  Claim claim{0, 0, &links};
  table.claim(claim);
  table.begin_flows({0, 3}, 0.1);
  table.preempt_route({4, 5}, 0.2);
  EXPECT_FALSE(claim.preempted);
  EXPECT_TRUE(woken.claims.empty());
  EXPECT_EQ(table.claim_on(1), &claim);
  EXPECT_FALSE(table.free({0}));  // flows
  table.end_flows({0, 3});
  EXPECT_TRUE(table.free({0, 3}));
}

TEST(LinkTable, ASendPreemptsAClaimOnItsRouteAndKeepsTheLinksBusyUntilItArrives) {
  Woken woken;
  LinkTable table(6, true, woken.fn());
  const std::vector<int> links{0, 3};
  Claim claim{2, 0, &links};
  table.claim(claim);
  table.preempt_route({0, 5}, 1.25);  // the sender's up link is the claim's
  EXPECT_TRUE(claim.preempted);
  EXPECT_DOUBLE_EQ(claim.at, 1.25);
  EXPECT_EQ(woken.claims.size(), 1u);
  table.release(claim);
  bool on_its_way = true;
  table.track_send({0, 5}, [&] { return on_its_way; });
  EXPECT_FALSE(table.free({0}));
  EXPECT_FALSE(table.free({5}));
  EXPECT_TRUE(table.free({3}));
  EXPECT_EQ(table.flows_on(0), 0);  // a send is not a collective's flow
  on_its_way = false;
  EXPECT_TRUE(table.free({0, 5}));
}

// Without the closed form nothing claims links, and sends are not remembered.
TEST(LinkTable, SendsAreNotTrackedWithoutTheClosedForm) {
  Woken woken;
  LinkTable table(4, false, woken.fn());
  table.track_send({0, 1}, [] { return true; });
  EXPECT_TRUE(table.free({0, 1}));
}

// ---- the hand-over -------------------------------------------------------------------------

// Three messages at a = 10 us, B = 10 GB/s, preempted 50 us into the step: one of 1 MB (110 us
// alone: it moved 50 us x B = 500 kB, the latency it will pay again is credited), one of 1 kB
// (arrived at 10.1 us), one of 420 kB (arrives at 52 us: it is credited with all its bytes, and
// its flow still pays the latency, with 0 bytes).
TEST(Network, BytesLeftCreditAPreemptedMessageWithWhatItMovedAlone) {
  StepTiming t;
  t.bytes = {1e6, 1e3, 4.2e5};
  t.latency.assign(3, 10e-6);
  t.bytes_per_s.assign(3, 10e9);
  const std::vector<double> left = bytes_left(t, 2.0, 2.0 + 50e-6);
  ASSERT_EQ(left.size(), 3u);
  EXPECT_DOUBLE_EQ(left[0], 5e5);
  EXPECT_DOUBLE_EQ(left[1], -1);
  EXPECT_DOUBLE_EQ(left[2], 0);
  // Preempted before the step began (between steps): everything is left.
  EXPECT_EQ(bytes_left(t, 2.0, 1.5), (std::vector<double>{1e6, 1e3, 4.2e5}));
}

// ---- on SimGrid ----------------------------------------------------------------------------

constexpr double kS = 1e8;  // 10 ms at B

// The child's SimGrid engine (one per process), quiet, with the network model of the platform.
std::unique_ptr<simgrid::s4u::Engine> quiet_engine() {
  static char arg0[] = "network-test";
  static char arg1[] = "--log=root.thresh:critical";
  static char* argv[] = {arg0, arg1, nullptr};
  static int argc = 2;
  auto engine = std::make_unique<simgrid::s4u::Engine>(&argc, argv);
  configure_engine();
  return engine;
}

// What one run of the network gives: the collective's end and the counters.
struct Outcome {
  double end = -1;
  int64_t messages = 0, flows = 0, closed_form_steps = 0, preempted_steps = 0;
};

// In a fresh process (one SimGrid engine per process): 4 devices of the uniform cluster; a
// one-step schedule 0 -> 1 of kS driven from t = `collective_at`, and, if `send_at` >= 0, a
// send 0 -> 2 (sharing rank 0's up link) of `send_bytes` at `send_at`.
Outcome run_network(double collective_at, double send_at, double send_bytes) {
  const std::string bytes = run_isolated([=]() -> std::string {
    auto engine = quiet_engine();
    const strategy::ClusterSpec cluster = strategy::with_world(testing::uniform_cluster(4), 4);
    const Layout layout = make_layout(cluster, 4);
    const Platform platform(cluster, layout, testing::kUniformFlopsPerS, {});
    auto sem = simgrid::s4u::Semaphore::create(0);
    bool waiting = false;
    Network::Driver driver{.wait =
                               [&](int, int, double seconds) {
                                 waiting = true;
                                 const bool timed_out = sem->acquire_timeout(seconds);
                                 waiting = false;
                                 return timed_out;
                               },
                           .wake =
                               [&](int, int) {
                                 if (!waiting) return;
                                 waiting = false;
                                 sem->release();
                               }};
    Network network(layout, platform, cluster, true, driver);
    Schedule schedule;
    schedule.steps.push_back({{{0, 1, kS}}, 0});
    const TimedSchedule timed = network.timed(schedule);
    double end = -1;
    simgrid::s4u::Actor::create("collective", platform.home(0), [&] {
      simgrid::s4u::this_actor::sleep_for(collective_at);
      network.run(timed, 0, 0);
      end = simgrid::s4u::Engine::get_clock();
    });
    if (send_at >= 0)
      simgrid::s4u::Actor::create("sender", platform.home(0), [&] {
        simgrid::s4u::this_actor::sleep_for(send_at);
        network.send(0, 2, send_bytes)->wait();
      });
    engine->run();
    return fmt::format("{:.12f} {} {} {} {}", end, network.messages(), network.flows(), network.closed_form_steps(),
                       network.preempted_steps());
  });
  Outcome o;
  std::istringstream in(bytes);
  in >> o.end >> o.messages >> o.flows >> o.closed_form_steps >> o.preempted_steps;
  return o;
}

TEST(Network, TimingOfAStepNamesItsLinksAndItsSlowestMessageAlone) {
  const std::string out = run_isolated([]() -> std::string {
    auto engine = quiet_engine();
    const strategy::ClusterSpec cluster = strategy::with_world(testing::uniform_cluster(4), 4);
    const Layout layout = make_layout(cluster, 4);
    const Platform platform(cluster, layout, testing::kUniformFlopsPerS, {});
    const Network network(layout, platform, cluster, true, {});
    Schedule pairs, fan;
    pairs.steps.push_back({{{0, 1, 1e6}, {2, 3, 2e6}}, 0});
    fan.steps.push_back({{{0, 1, 1e6}}, 0});
    fan.steps.push_back({{{0, 1, 1e6}, {0, 2, 1e6}}, 0});
    const TimedSchedule a = network.timed(pairs), b = network.timed(fan);
    return fmt::format("{} {} {:.12f} {} | {} {} {} {}", fmt::join(a.links, ","), a.exclusive, a.steps[0].alone_seconds,
                       a.steps[0].exclusive, fmt::join(b.links, ","), b.exclusive, b.steps[0].exclusive,
                       b.steps[1].exclusive);
  });
  // Links: r's up 2r, down 2r + 1. 0 -> 1 crosses {0, 3}, 2 -> 3 {4, 7}, 0 -> 2 {0, 5}.
  EXPECT_EQ(out, fmt::format("0,3,4,7 true {:.12f} true | 0,3,5 false true false",
                             kUniformLatency + 2e6 / kUniformBytesPerS));
}

TEST(Network, AStepAloneOnItsLinksIsTimedInClosedForm) {
  const Outcome o = run_network(0, -1, 0);
  EXPECT_NEAR(o.end, kUniformLatency + kS / kUniformBytesPerS, 1e-12);
  EXPECT_EQ(o.messages, 1);
  EXPECT_EQ(o.flows, 0);
  EXPECT_EQ(o.closed_form_steps, 1);
  EXPECT_EQ(o.preempted_steps, 0);
}

// A send through rank 0's up link at 5 ms: the step had moved 5 ms x B = S/2 alone; the rest
// and the send (S/2 too) start together, pay a, and share the link: both end at
// 5 ms + a + S/B = 15.01 ms, the time max-min sharing gives had both been flows throughout.
TEST(Network, ASendPreemptsAClosedFormStepAndTheRestSharesTheLink) {
  const double at = 5e-3;
  const Outcome o = run_network(0, at, kS / 2);
  EXPECT_NEAR(o.end, at + kUniformLatency + kS / kUniformBytesPerS, 1e-9);
  EXPECT_EQ(o.messages, 2);
  EXPECT_EQ(o.flows, 2);  // the step's rest and the send
  EXPECT_EQ(o.closed_form_steps, 0);
  EXPECT_EQ(o.preempted_steps, 1);
}

// A send still on its way over rank 0's up link when the collective starts: the step runs as a
// flow from the start, sharing the link, so it ends later than alone.
TEST(Network, ASendOnItsWayKeepsAStepOutOfTheClosedForm) {
  const Outcome o = run_network(1e-3, 0, kS / 2);
  EXPECT_EQ(o.closed_form_steps, 0);
  EXPECT_EQ(o.preempted_steps, 0);
  EXPECT_EQ(o.flows, 2);
  EXPECT_GT(o.end, 1e-3 + kUniformLatency + kS / kUniformBytesPerS + 1e-4);
}

}  // namespace
}  // namespace parlab::sim
