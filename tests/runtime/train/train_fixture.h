#pragma once
// Threads-as-ranks training (as the comm tests run ranks): each rank is a thread with its own
// Gloo communicator over one in-process store and its own Trainer. The tiny model trains in
// milliseconds, so tests can compare 1, 2 and 4 workers step by step.
#include <gtest/gtest.h>

#include <barrier>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/comm/rendezvous.h"
#include "runtime/train/export.h"
#include "runtime/train/trainer.h"
#include "strategy/io.h"
#include "tests/runtime/comm/comm_fixture.h"

namespace parlab::train::testing {

inline constexpr std::chrono::milliseconds kTestTimeout{20'000};

// h 32, f 64, 2 blocks (or `blocks`), 4 classes: 8.5 K parameters at 2 blocks.
inline strategy::ModelSpec tiny_model(int blocks = 2) {
  return strategy::parse_model_toml("name = \"tiny\"\nkind = \"mlp\"\nlayers = " + std::to_string(blocks) +
                                        "\nhidden = 32\nffn = 64\nclasses = 4\nmicrobatch = 4\nprecision = \"fp32\"\n",
                                    "tiny.toml");
}

// A config for `world` workers from plan text (the global batch fixed by the plan), on the tiny
// model of `blocks` blocks.
inline TrainConfig tiny_config(const std::string& plan, int world, int64_t data_size,
                               OptimizerConfig optimizer = SgdConfig{.lr = 0.1, .momentum = 0.9}, int blocks = 2) {
  TrainConfig c;
  c.model = tiny_model(blocks);
  c.plan = resolve_train_plan(c.model, plan, world, strategy::load_cluster("cpu-local"));
  c.optimizer = optimizer;
  c.data_size = data_size;
  c.seed = 7;
  c.comm_timeout = kTestTimeout;
  return c;
}

struct RankRun {
  std::vector<float> params;       // after the last step: the whole model (gathered under ZeRO-3)
  std::vector<float> grads_step0;  // what the optimizer applied in step 0 (reduced, scaled):
                                   // the rank's shard of the flat gradient under ZeRO
  model::FlatRange shard;          // flat range of grads_step0 (everything without ZeRO)
  std::vector<StepRecord> records;
  model::MemoryUsage memory;  // the accounting allocator's peaks over the run
};

// The part of a whole-model vector a shard covers.
inline std::vector<float> slice(const std::vector<float>& all, model::FlatRange r) {
  return {all.begin() + r.begin, all.begin() + r.end};
}

// Optional: wraps a rank's real communicator (e.g. to delay its ops) before the trainer sees it.
using CommWrapper = std::function<std::unique_ptr<comm::Communicator>(std::unique_ptr<comm::Communicator>)>;

// Trains `steps` steps on `world` threads; returns each rank's result. Failures in a rank are
// reported as test failures naming the rank.
inline std::vector<RankRun> train_threads(int world, const TrainConfig& config, int steps, const CommWrapper& wrap = {},
                                          const TrainerOptions& options = {}) {
  auto store = comm::make_in_process_store();
  std::vector<RankRun> out(world);
  comm::testing::run_rank_threads(world, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = kTestTimeout;
    std::unique_ptr<comm::Communicator> c = comm::make_gloo_communicator(store, r, world, go);
    if (wrap) c = wrap(std::move(c));
    Trainer trainer(config, *c, options);
    for (int s = 0; s < steps; ++s) {
      out[r].records.push_back(trainer.step());
      if (s == 0) {
        const auto g = trainer.state().shards->grads();
        out[r].grads_step0.assign(g.begin(), g.end());
        out[r].shard = trainer.state().shards->shard();
      }
    }
    out[r].memory = trainer.memory().usage();
    out[r].params = gather_full_params(trainer);
    sync.arrive_and_wait();  // nobody tears down a communicator a peer still reads
  });
  return out;
}

// max |a - b| / max |ref|: the normwise relative difference (0 when both are all zeros).
inline double relative_diff(const std::vector<float>& a, const std::vector<float>& ref) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(ref[i])));
    scale = std::max(scale, std::abs(double(ref[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

// The global mean loss of each step: sum over ranks of loss_sum / global batch.
inline std::vector<double> loss_curve(const std::vector<RankRun>& runs) {
  std::vector<double> curve(runs.at(0).records.size(), 0.0);
  for (const RankRun& r : runs)
    for (size_t s = 0; s < r.records.size(); ++s) curve[s] += r.records[s].loss_sum / double(r.records[s].global_batch);
  return curve;
}

}  // namespace parlab::train::testing
