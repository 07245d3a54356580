// Pipelines: the 1F1B closed form on the `ideal` cluster, and a golden timeline derived by hand.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "sim/simulate.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "tests/sim/sim_test_util.h"

namespace parlab::sim {
namespace {

using testing::resolved;
using testing::timed_from_start;

const trace::Event* find_last(const std::vector<trace::Event>& events, int rank, const std::string& prefix) {
  const trace::Event* best = nullptr;
  for (const auto& e : events)
    if (e.rank == rank && e.name.rfind(prefix, 0) == 0 && (!best || e.end_seconds > best->end_seconds)) best = &e;
  return best;
}

// p stages of k equal blocks each, m microbatches, links of infinite bandwidth and no latency:
// stage 0 ends its last backward at (m + p - 1)(t_f + t_b) and idles (p - 1)(t_f + t_b) of that,
// a fraction (p - 1)/(m + p - 1). The pipeline starts once stage 0 has cleared its gradients:
// k blocks of 2hf + f + h fp32 values written at the device's memory bandwidth.
//
// Stages are equal but for the MLP's head (h x 1 on the last stage, 2h FLOPs per sample against
// 4hf per block): it can lengthen the critical path by at most m x its forward + backward time,
// 3 x 2h x mb x m FLOPs, which bounds the tolerance.
TEST(Pipeline, OneFOneBOnIdealLinksMatchesTheClosedForm) {
  const auto ideal = strategy::load_cluster("ideal");
  const double rate = ideal.device.peak_flops_bf16 * ideal.device.gemm_efficiency;  // mixed precision
  const int h = 512, f = 2048, k = 2, mb = 64;
  for (auto [p, m] : {std::pair{4, 8}, std::pair{2, 3}, std::pair{8, 8}}) {
    const auto model = testing::mlp(p * k, h, f, 1, mb);
    const auto plan = resolved("pp=" + std::to_string(p) + ",microbatches=" + std::to_string(m) + ",precision=mixed",
                               model, ideal, p);
    const auto r = timed_from_start(model, plan, ideal);

    const double t_f = double(mb) * k * 4.0 * h * f / rate;
    const double t_b = 2 * t_f;
    const double head = 3.0 * 2 * h * mb * m / rate;
    const double pipeline = (m + p - 1) * (t_f + t_b);
    const double clear = 4.0 * k * (2.0 * h * f + f + h) / ideal.device.memory_bytes_per_s;
    const auto* last_backward = find_last(r.timeline, 0, "backward");
    ASSERT_NE(last_backward, nullptr);
    EXPECT_NEAR(last_backward->end_seconds, clear + pipeline, head + 1e-9 * pipeline) << "p=" << p << " m=" << m;
    const double bubble = r.ranks.at(0).bubble_seconds;
    EXPECT_NEAR(bubble, (p - 1) * (t_f + t_b), head + 1e-9 * pipeline);
    EXPECT_NEAR(bubble / (last_backward->end_seconds - clear), double(p - 1) / (m + p - 1), 1e-3);
    EXPECT_DOUBLE_EQ(r.bubble_fraction_of_total, double(p - 1) / (m + p - 1));
  }
}

// The golden timeline: 2 stages, 2 microbatches, 1F1B, on a cluster of round numbers.
//   compute 1 TFLOP/s (fp32), memory 1000 GB/s; link 1 GB/s, 100 us.
//   blocks h = 1000, f = 2500: 4hf = 1e7 FLOPs per sample; mb = 100 -> 1e9 FLOPs = 1 ms forward,
//   2 ms backward. Stage 1 also runs the head, 2 h C = 1e4 FLOPs per sample (C = 5): 1.001 ms
//   forward, 2.002 ms backward.
//   activation: 100 x 1000 x 4 B = 4e5 B -> 0.1 ms + 0.4 ms = 0.5 ms per message.
//   SGD optimizer: 20 B per parameter, memory-bound. Stage 0 holds block 0: 2hf + f + h =
//   5,003,500 parameters -> 100.07 us; stage 1 block 1 + head (C h + C = 5005): 5,008,505 ->
//   100.1701 us. Each stage first clears its fp32 gradients: 4 B per parameter -> 20.014 us and
//   20.03402 us.
// Stage 0 runs F0 F1 B0 B1 (warm-up 1), stage 1 F0 B0 F1 B1 (stage 0's ops are tagged by its one
// layer, blocks.0; stage 1's by its chunk, c0). By hand (ms):
//   s0 Z [0,0.020014]  F0 [0.020014,1.020014]  send a0 issued 1.020014, delivered 1.520014
//   s0 F1 [1.020014,2.020014]  send a1 issued 2.020014, delivered 2.520014
//   s1 Z [0,0.02003402]  recv a0 [0.02003402,1.520014] (where its compute stream reaches it,
//   strategy::walk_lane)  F0 [1.520014,2.521014]  B0 [2.521014,4.523014]
//   s1 send g0 issued 4.523014 -> 5.023014
//   s1 recv a1: its compute stream reaches it after issuing g0 (4.523014); the data came at 2.520014
//   s1 F1 [4.523014,5.524014]  B1 [5.524014,7.526014]  send g1 -> 8.026014
//   s1 optimizer [7.526014,7.6261841]
//   s0 recv g0 [2.020014,5.023014]  B0 [5.023014,7.023014]  recv g1 [7.023014,8.026014]
//   s0 B1 [8.026014,10.026014]  optimizer [10.026014,10.126084]: the step ends at 10.126084 ms.
TEST(Pipeline, GoldenTimelineTwoStagesTwoMicrobatches) {
  const auto cluster = strategy::parse_cluster_toml(R"(
name = "round"
nodes = 1
devices_per_node = 2
nics_per_node = 1
[device]
memory_gb = 80
peak_tflops_fp32 = 1
peak_tflops_bf16 = 1
memory_bandwidth_gb_per_s = 1000
gemm_efficiency = 1.0
[intra]
kind = "round"
bandwidth_gb_per_s = 1
latency_us = 100
[inter]
kind = "round"
bandwidth_gb_per_s = 1
latency_us = 100
)",
                                                    "round.toml");
  const auto model = testing::mlp(2, 1000, 2500, 5, 100);
  const auto plan = resolved("pp=2,microbatches=2,optimizer=sgd", model, cluster, 2);
  const auto r = timed_from_start(model, plan, cluster);

  std::string got;
  for (const auto& e : r.timeline)
    got +=
        fmt::format("r{} {} {} {:.7f} {:.7f}\n", e.rank, e.stream, e.name, e.start_seconds * 1e3, e.end_seconds * 1e3);
  const std::string expected =
      "r0 compute zero-grad grad.zero 0.0000000 0.0200140\n"
      "r0 compute forward fwd.mb0.blocks.0 0.0200140 1.0200140\n"
      "r0 compute forward fwd.mb1.blocks.0 1.0200140 2.0200140\n"
      "r0 compute backward bwd.mb0.blocks.0 5.0230140 7.0230140\n"
      "r0 compute backward bwd.mb1.blocks.0 8.0260140 10.0260140\n"
      "r0 compute optimizer optimizer 10.0260140 10.1260840\n"
      "r0 comm send act.mb0.vs1 1.0200140 1.5200140\n"
      "r0 comm send act.mb1.vs1 2.0200140 2.5200140\n"
      "r0 comm recv grad.mb0.vs1 2.0200140 5.0230140\n"
      "r0 comm recv grad.mb1.vs1 7.0230140 8.0260140\n"
      "r1 compute zero-grad grad.zero 0.0000000 0.0200340\n"
      "r1 compute forward fwd.mb0.c0 1.5200140 2.5210140\n"
      "r1 compute backward bwd.mb0.c0 2.5210140 4.5230140\n"
      "r1 compute forward fwd.mb1.c0 4.5230140 5.5240140\n"
      "r1 compute backward bwd.mb1.c0 5.5240140 7.5260140\n"
      "r1 compute optimizer optimizer 7.5260140 7.6261841\n"
      "r1 comm recv act.mb0.vs1 0.0200340 1.5200140\n"
      "r1 comm send grad.mb0.vs1 4.5230140 5.0230140\n"
      "r1 comm recv act.mb1.vs1 4.5230140 4.5230140\n"
      "r1 comm send grad.mb1.vs1 7.5260140 8.0260140\n";
  EXPECT_EQ(got, expected);

  EXPECT_NEAR(r.step_seconds, 10.126084e-3, 1e-12);
  // Stage 0: busy 0.020014 + 1 + 1 + 2 + 2 + 0.10007 ms, idle the rest; stage 1: 0.02003402 +
  // 2 x 1.001 + 2 x 2.002 + 0.1001701.
  EXPECT_NEAR(r.ranks[0].compute_seconds, 6.120084e-3, 1e-12);
  EXPECT_NEAR(r.ranks[0].bubble_seconds, 10.126084e-3 - 6.120084e-3, 1e-12);
  EXPECT_NEAR(r.ranks[1].compute_seconds, 6.12620412e-3, 1e-12);
  EXPECT_NEAR(r.ranks[1].bubble_seconds, 10.126084e-3 - 6.12620412e-3, 1e-12);
  EXPECT_DOUBLE_EQ(r.ranks[0].exposed_comm_seconds, 0.0);
}

// A pipeline's messages do not queue behind the data-parallel collectives (strategy::walk_lane):
// under PP 2 x DP 2 stage 1 sends its last gradient as soon as its last backward ends, while its
// bucket all-reduces (1 GB, ~50 ms on these links, against ~2 ms of compute a microbatch) are
// still running, and stage 0 starts that microbatch's backward at once; the cost model's walk
// agrees. Behind the buckets, stage 0 would wait for all of them first.
TEST(Pipeline, MessagesDoNotWaitBehindDataParallelCollectives) {
  const auto cluster = testing::uniform_cluster(4);
  const auto model = testing::mlp(4, 2048, 8192, 16, 8);
  const auto plan = resolved("pp=2,dp=2,microbatches=2", model, cluster, 4);
  const auto r = timed_from_start(model, plan, cluster);
  int checked = 0;
  for (int rank = 0; rank < 4; ++rank) {
    const trace::Event* send = find_last(r.timeline, rank, "send grad.mb1");
    if (!send) continue;  // a stage-0 rank
    const trace::Event* bucket = find_last(r.timeline, rank, "all-reduce");
    ASSERT_NE(bucket, nullptr) << "rank " << rank;
    EXPECT_LT(send->start_seconds, bucket->end_seconds) << "rank " << rank << "'s last gradient waited for its buckets";
    ++checked;
  }
  EXPECT_EQ(checked, 2);
  const auto est = strategy::estimate_step(model, plan, strategy::with_world(cluster, 4));
  EXPECT_NEAR(r.step_seconds, est.step_seconds, 0.01 * est.step_seconds);
}

}  // namespace
}  // namespace parlab::sim
