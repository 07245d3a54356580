#pragma once
// Small clusters and models with round numbers, written as the TOML a user would write.
#include <string>

#include "sim/simulate.h"
#include "strategy/io.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::sim::testing {

// A plan from its text, resolved for `world` devices and validated on `c` sized to that world.
inline strategy::Plan resolved(const std::string& text, const strategy::ModelSpec& m, const strategy::ClusterSpec& c,
                               int world) {
  strategy::Plan p = strategy::resolve(strategy::parse_plan(text), m, world);
  strategy::validate(p, m, strategy::with_world(c, world));
  return p;
}

// `plan` simulated from its first step (no warm-up) with every op on the timeline.
inline SimResult timed_from_start(const strategy::ModelSpec& m, const strategy::Plan& p,
                                  const strategy::ClusterSpec& c) {
  SimOptions o;
  o.warmup_steps = 0;
  o.timeline = true;
  return simulate_plan(m, p, c, o);
}

// `devices` devices on one switch (and `nodes` nodes with one 10 GB/s NIC per device): every
// device link B = 10 GB/s each way with a = 10 us; devices compute 1 TFLOP/s.
inline strategy::ClusterSpec uniform_cluster(int devices_per_node = 8, int nodes = 1) {
  return strategy::parse_cluster_toml("name = \"uniform\"\nnodes = " + std::to_string(nodes) +
                                          "\ndevices_per_node = " + std::to_string(devices_per_node) +
                                          "\nnics_per_node = " + std::to_string(devices_per_node) + R"(
[device]
memory_gb = 80
peak_tflops_fp32 = 1
peak_tflops_bf16 = 1
memory_bandwidth_gb_per_s = 1000
gemm_efficiency = 1.0
[intra]
kind = "test"
bandwidth_gb_per_s = 10
latency_us = 10
[inter]
kind = "test"
bandwidth_gb_per_s = 10
latency_us = 10
)",
                                      "uniform.toml");
}
inline constexpr double kUniformBytesPerS = 10e9;
inline constexpr double kUniformLatency = 10e-6;
inline constexpr double kUniformFlopsPerS = 1e12;

// An MLP of `layers` blocks h -> f -> h and a `classes`-way head, fp32, microbatch `mb`.
inline strategy::ModelSpec mlp(int layers, int hidden, int ffn, int classes, int mb) {
  return strategy::parse_model_toml("name = \"test-mlp\"\nkind = \"mlp\"\nlayers = " + std::to_string(layers) +
                                        "\nhidden = " + std::to_string(hidden) + "\nffn = " + std::to_string(ffn) +
                                        "\nclasses = " + std::to_string(classes) +
                                        "\nmicrobatch = " + std::to_string(mb) + "\nprecision = \"fp32\"\n",
                                    "test-mlp.toml");
}

}  // namespace parlab::sim::testing
