// The step program through model::Model on a model whose compute buffers are not its host
// buffers (StagedModel, the CUDA model's layout on the host), with ranks as threads over real
// Gloo: training matches the host LabMlp bit for bit (so the executor pulls the reduced gradients
// before the optimizer and pushes the updated weights after it), the program's collectives run on
// the `collectives` communicator, not the host world, and checkpoints are device-independent: a
// "device" run resumes on the CPU and a CPU run on the "device", bit-identical to an
// uninterrupted CPU run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <barrier>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/export.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer_checkpoint.h"
#include "staged_model.h"
#include "tap_communicator.h"
#include "train_fixture.h"

namespace parlab::train {
namespace {

namespace fs = std::filesystem;
using testing::StagedModel;
using testing::tiny_config;

constexpr const char* kPlan = "gbs=16,mb=4";  // 2 workers: DDP, 2 microbatches each
constexpr int64_t kData = 40;

struct Leg {
  bool staged = false;            // compute on a StagedModel, collectives on a second Gloo world
  bool device_optimizer = false;  // with staged: the update on the staged buffers (StagedOptimizer)
  const char* plan = kPlan;
  bool sgd = false;  // SGD with momentum instead of AdamW
  int blocks = 2;    // the tiny model's (4 for an interleaved pipeline: pp * v chunks)
  bool resume = false;
  bool save = false;
  int64_t until = 0;
};

struct LegEnd {
  std::vector<float> params;  // whole model, host side
  StateFingerprint fingerprint;
  int pushes = 0, pulls = 0, param_pulls = 0;
  int device_steps = 0, state_uploads = 0, state_downloads = 0;
  int64_t world_grad_ops = 0, collective_grad_ops = 0;  // grad.* entries in each flight recorder
  int64_t collective_ops = 0;                           // every entry in the collectives' flight recorder
  int compute_buffers = 0;
  int boundaries = 0, copies = 0, host_boundaries = 0;  // StagedModel's counters
  // Step-program ops (executor tags) issued on each world and the groups split off it.
  int64_t host_step_ops = 0, device_step_ops = 0, device_sends = 0, device_recvs = 0, device_tp_ops = 0;
};

int64_t grad_entries(const comm::Communicator& c) {
  int64_t n = 0;
  for (const comm::FlightRecord& e : c.flight_recorder().snapshot().entries)
    if (e.tag.find("grad") != std::string::npos) ++n;
  return n;
}

std::vector<LegEnd> run_leg(int world, const Leg& leg, const fs::path& root) {
  const TrainConfig config = tiny_config(
      leg.plan, world, kData,
      leg.sgd ? OptimizerConfig{SgdConfig{.lr = 0.1, .momentum = 0.9}} : OptimizerConfig{AdamWConfig{.lr = 1e-2}},
      leg.blocks);
  auto host_store = comm::make_in_process_store();
  auto device_store = comm::make_in_process_store();
  std::vector<LegEnd> out(world);
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      try {
        comm::GlooOptions go;
        go.timeout = testing::kTestTimeout;
        auto host_log = std::make_shared<testing::TapLog>(), device_log = std::make_shared<testing::TapLog>();
        auto c = std::make_unique<testing::TapCommunicator>(comm::make_gloo_communicator(host_store, r, world, go),
                                                            host_log);
        std::unique_ptr<comm::Communicator> dc;
        TrainerOptions to;
        to.record_events = false;
        StagedModel* staged = nullptr;
        testing::StagedOptimizer* staged_opt = nullptr;
        if (leg.staged) {
          dc = std::make_unique<testing::TapCommunicator>(comm::make_gloo_communicator(device_store, r, world, go),
                                                          device_log);
          to.collectives = dc.get();
          to.make_device_model = [&staged](model::LabMlp& host, const strategy::Plan&) {
            auto m = std::make_unique<StagedModel>(host);
            staged = m.get();
            return m;
          };
          if (leg.device_optimizer)
            to.make_device_optimizer = [&staged_opt](const Optimizer& host, model::Model&) {
              auto o = std::make_unique<testing::StagedOptimizer>(host);
              staged_opt = o.get();
              return o;
            };
        }
        Trainer trainer(config, *c, to);
        CommCoordinator coord(*c, testing::kTestTimeout);
        if (leg.resume) resume_trainer(trainer, checkpoint::LoadOptions(root), coord);
        while (trainer.state().step < leg.until) trainer.step();
        if (leg.save) save_trainer(trainer, checkpoint::SaveOptions(root, 3, {}), coord);
        out[r].params = gather_full_params(trainer);
        out[r].fingerprint = state_fingerprint(trainer);
        out[r].world_grad_ops = grad_entries(*c);
        if (dc) out[r].collective_grad_ops = grad_entries(*dc);
        if (dc) out[r].collective_ops = static_cast<int64_t>(dc->flight_recorder().snapshot().entries.size());
        out[r].host_step_ops = host_log->step_ops();
        out[r].device_step_ops = device_log->step_ops();
        out[r].device_sends = device_log->step_ops("send");
        out[r].device_recvs = device_log->step_ops("recv");
        {
          std::lock_guard lock(device_log->mu);
          for (const std::string& t : device_log->tags)
            if (t.find("/tp.") != std::string::npos || t.find("/sp.") != std::string::npos) ++out[r].device_tp_ops;
        }
        if (staged) {
          out[r].boundaries = staged->boundaries;
          out[r].copies = staged->copies;
          out[r].host_boundaries = staged->host_boundaries;
          out[r].pushes = staged->pushes;
          out[r].pulls = staged->pulls;
          out[r].param_pulls = staged->param_pulls;
          out[r].compute_buffers = staged->compute_buffers;
        }
        if (staged_opt) {
          out[r].device_steps = staged_opt->steps;
          out[r].state_uploads = staged_opt->uploads;
          out[r].state_downloads = staged_opt->downloads;
        }
        c->barrier()->wait();
      } catch (const std::exception& e) {
        std::lock_guard lock(mu);
        ADD_FAILURE() << "rank " << r << ": " << e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

size_t count_differences(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i] ? 1 : 0;
  return n;
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("parlab_device_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(DeviceModelTest, StagedComputeTrainsBitIdenticalToTheHostModelWithCollectivesOnItsOwnWorld) {
  const std::vector<LegEnd> cpu = run_leg(2, Leg{.until = 4}, {});
  const std::vector<LegEnd> dev = run_leg(2, Leg{.staged = true, .until = 4}, {});
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(count_differences(dev[r].params, cpu[r].params), 0u) << "rank " << r;
    EXPECT_EQ(dev[r].fingerprint.combined_hex(), cpu[r].fingerprint.combined_hex()) << "rank " << r;
    // One push at construction, one per optimizer step; one pull per step.
    EXPECT_EQ(dev[r].pushes, 1 + 4) << "rank " << r;
    EXPECT_EQ(dev[r].pulls, 4) << "rank " << r;
    // The buckets went over the collectives' world; the host world carried none.
    EXPECT_GT(cpu[r].world_grad_ops, 0) << "rank " << r;
    EXPECT_EQ(dev[r].collective_grad_ops, cpu[r].world_grad_ops) << "rank " << r;
    EXPECT_EQ(dev[r].world_grad_ops, 0) << "rank " << r;
  }
  // And the weights moved: a run that never pushed would still hold the initial ones.
  const std::vector<LegEnd> start = run_leg(2, Leg{.until = 0}, {});
  EXPECT_GT(count_differences(dev[0].params, start[0].params), dev[0].params.size() / 2);
}

// Tensor slices and pipeline stages on a device model (the CUDA model's path, on the host):
// bit-identical to the host run, and every op of the step program -- the TP reductions of
// boundary tensors and the pipeline's sends and receives included -- runs on the collectives'
// world (on a GPU: NCCL, device to device), none on the host world. The boundary tensors are the
// model's compute memory: a send copies one in compute memory, and no host microbatch state ever
// holds one (the stand-in keeps its own states, so reading the host's would compute garbage).
TEST(DeviceModelTest, TensorAndPipelineSplitsOnADeviceModelMoveBoundariesInComputeMemory) {
  struct Split {
    const char* plan;
    int world;
    bool tp, pp;
    int blocks = 2;
  };
  for (const Split& sp :
       {Split{"tp=2,gbs=16,mb=4", 2, true, false}, Split{"tp=2,sp=on,gbs=16,mb=4", 2, true, false},
        Split{"pp=2,gbs=16,mb=4", 2, false, true}, Split{"pp=2,schedule=gpipe,gbs=16,mb=4", 2, false, true},
        Split{"pp=2,v=2,schedule=interleaved,gbs=16,mb=4", 2, false, true, 4},
        Split{"tp=2,pp=2,gbs=16,mb=4", 4, true, true}, Split{"tp=2,dp=2,zero=1,gbs=16,mb=4", 4, true, false}}) {
    SCOPED_TRACE(sp.plan);
    const std::vector<LegEnd> cpu = run_leg(sp.world, Leg{.plan = sp.plan, .blocks = sp.blocks, .until = 3}, {});
    const std::vector<LegEnd> dev =
        run_leg(sp.world, Leg{.staged = true, .plan = sp.plan, .blocks = sp.blocks, .until = 3}, {});
    const std::vector<LegEnd> start = run_leg(sp.world, Leg{.plan = sp.plan, .blocks = sp.blocks, .until = 0}, {});
    for (int r = 0; r < sp.world; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(count_differences(dev[r].params, cpu[r].params), 0u);
      EXPECT_EQ(dev[r].fingerprint.combined_hex(), cpu[r].fingerprint.combined_hex());
      // The CPU run's step ops all went over its world; the device run's all over the collectives'.
      EXPECT_GT(cpu[r].host_step_ops, 0);
      EXPECT_EQ(dev[r].host_step_ops, 0);
      EXPECT_EQ(dev[r].device_step_ops, cpu[r].host_step_ops);
      EXPECT_EQ(dev[r].host_boundaries, 0);
      EXPECT_GT(dev[r].boundaries, 0);
      EXPECT_EQ(dev[r].pulls, 3);
      if (sp.tp) {
        EXPECT_GT(dev[r].device_tp_ops, 0);
      }
      if (sp.pp) {
        EXPECT_GT(dev[r].device_sends, 0);
        EXPECT_EQ(dev[r].device_sends, dev[r].device_recvs);  // each stage sends one way and receives the other
        EXPECT_EQ(dev[r].copies, dev[r].device_sends);        // every send copied its tensor in compute memory
        EXPECT_GE(dev[r].compute_buffers, dev[r].copies);
      }
    }
    EXPECT_GT(count_differences(dev[0].params, start[0].params), dev[0].params.size() / 2) << "training moved them";
  }
}

// ZeRO-1 with the optimizer on the host (SGD has no device update): the host updates its shard,
// pushes it, and the all-gather of the shards runs in device memory, so the host's copy of the
// other ranks' shards is stale until the trainer syncs it. Checkpoints, fingerprints and
// gathers must read the device's weights, bit-identical to the CPU run's.
TEST(DeviceModelTest, Zero1WithAHostOptimizerOnADeviceModelLeavesTheHostCurrentForReaders) {
  const char* plan = "dp=2,zero=1,gbs=16,mb=4";
  for (bool sgd : {false, true}) {
    SCOPED_TRACE(sgd ? "sgd" : "adamw");
    const std::vector<LegEnd> cpu = run_leg(2, Leg{.plan = plan, .sgd = sgd, .until = 3}, {});
    const std::vector<LegEnd> dev = run_leg(2, Leg{.staged = true, .plan = plan, .sgd = sgd, .until = 3}, {});
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE("rank " + std::to_string(r));
      EXPECT_EQ(count_differences(dev[r].params, cpu[r].params), 0u);
      EXPECT_EQ(dev[r].fingerprint.combined_hex(), cpu[r].fingerprint.combined_hex());
      EXPECT_EQ(dev[r].pulls, 3);        // the shard's gradients, once a step
      EXPECT_EQ(dev[r].param_pulls, 1);  // the whole weights, once, for the readers after the run
    }
  }
}

// ZeRO-2 of tensor-parallel slices on a device model with its optimizer on the device: the
// buckets bind to the slice's gradients in compute memory, bit-identical to the host run.
TEST(DeviceModelTest, Zero2OfTensorParallelSlicesOnADeviceModelMatchesTheHostRun) {
  const char* plan = "tp=2,dp=2,zero=2,gbs=16,mb=4";
  const std::vector<LegEnd> cpu = run_leg(4, Leg{.plan = plan, .until = 3}, {});
  const std::vector<LegEnd> dev =
      run_leg(4, Leg{.staged = true, .device_optimizer = true, .plan = plan, .until = 3}, {});
  for (int r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(count_differences(dev[r].params, cpu[r].params), 0u);
    EXPECT_EQ(dev[r].fingerprint.combined_hex(), cpu[r].fingerprint.combined_hex());
    EXPECT_EQ(dev[r].host_step_ops, 0);
    EXPECT_EQ(dev[r].device_step_ops, cpu[r].host_step_ops);
    EXPECT_GT(dev[r].device_tp_ops, 0);
    EXPECT_EQ(dev[r].device_steps, 3);
    EXPECT_EQ(dev[r].pulls, 0);
  }
}

TEST(DeviceModelTest, CheckpointsAreDeviceIndependentInBothDirections) {
  const std::vector<LegEnd> straight = run_leg(2, Leg{.until = 5}, {});

  const fs::path a = fresh_dir("dev_to_cpu");
  run_leg(2, Leg{.staged = true, .save = true, .until = 3}, a);
  const std::vector<LegEnd> on_cpu = run_leg(2, Leg{.resume = true, .until = 5}, a);

  const fs::path b = fresh_dir("cpu_to_dev");
  run_leg(2, Leg{.save = true, .until = 3}, b);
  const std::vector<LegEnd> on_dev = run_leg(2, Leg{.staged = true, .resume = true, .until = 5}, b);

  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(count_differences(on_cpu[r].params, straight[r].params), 0u) << "device -> cpu, rank " << r;
    EXPECT_EQ(on_cpu[r].fingerprint.combined_hex(), straight[r].fingerprint.combined_hex()) << "rank " << r;
    EXPECT_EQ(count_differences(on_dev[r].params, straight[r].params), 0u) << "cpu -> device, rank " << r;
    EXPECT_EQ(on_dev[r].fingerprint.combined_hex(), straight[r].fingerprint.combined_hex()) << "rank " << r;
  }
  fs::remove_all(a);
  fs::remove_all(b);
}

// The optimizer on the device: the step copies nothing across (no gradient pull, no parameter
// push after construction), yet the host state the fingerprint and the gathered weights read is
// the CPU run's, bit for bit, because they sync the host first (Trainer::sync_host).
TEST(DeviceModelTest, ADeviceOptimizerTrainsBitIdenticalWithoutHostCopiesInTheStep) {
  for (const char* plan : {kPlan, "gbs=16,mb=4,zero=1", "gbs=16,mb=4,zero=2", "gbs=16,mb=4,zero=3"}) {
    const std::vector<LegEnd> cpu = run_leg(2, Leg{.plan = plan, .until = 4}, {});
    const std::vector<LegEnd> dev =
        run_leg(2, Leg{.staged = true, .device_optimizer = true, .plan = plan, .until = 4}, {});
    for (int r = 0; r < 2; ++r) {
      SCOPED_TRACE(std::string(plan) + ", rank " + std::to_string(r));
      EXPECT_EQ(count_differences(dev[r].params, cpu[r].params), 0u);
      EXPECT_EQ(dev[r].fingerprint.combined_hex(), cpu[r].fingerprint.combined_hex());
      EXPECT_EQ(dev[r].device_steps, 4);
      // Construction only; a ZeRO-3 host model holds no whole copy to push from or pull into (its
      // shard's mirror moves instead). The gather and the fingerprint sync once (the second
      // finds the host current).
      const bool zero3 = std::string(plan).find("zero=3") != std::string::npos;
      EXPECT_EQ(dev[r].pushes, zero3 ? 0 : 1);
      EXPECT_EQ(dev[r].pulls, 0);
      EXPECT_EQ(dev[r].param_pulls, zero3 ? 0 : 1);
      EXPECT_EQ(dev[r].state_downloads, 1);
    }
  }
}

TEST(DeviceModelTest, CheckpointsOfADeviceOptimizerAreDeviceIndependentInBothDirections) {
  // DDP, and ZeRO-3, whose shard lives in the device's memory with a host mirror for checkpoints.
  for (const char* plan : {kPlan, "gbs=16,mb=4,zero=3"}) {
    SCOPED_TRACE(plan);
    const std::vector<LegEnd> straight = run_leg(2, Leg{.plan = plan, .until = 5}, {});

    const fs::path a = fresh_dir("devopt_to_cpu");
    run_leg(2, Leg{.staged = true, .device_optimizer = true, .plan = plan, .save = true, .until = 3}, a);
    const std::vector<LegEnd> on_cpu = run_leg(2, Leg{.plan = plan, .resume = true, .until = 5}, a);

    const fs::path b = fresh_dir("cpu_to_devopt");
    run_leg(2, Leg{.plan = plan, .save = true, .until = 3}, b);
    const std::vector<LegEnd> on_dev =
        run_leg(2, Leg{.staged = true, .device_optimizer = true, .plan = plan, .resume = true, .until = 5}, b);

    for (int r = 0; r < 2; ++r) {
      EXPECT_EQ(count_differences(on_cpu[r].params, straight[r].params), 0u) << "device -> cpu, rank " << r;
      EXPECT_EQ(on_cpu[r].fingerprint.combined_hex(), straight[r].fingerprint.combined_hex()) << "rank " << r;
      EXPECT_EQ(count_differences(on_dev[r].params, straight[r].params), 0u) << "cpu -> device, rank " << r;
      EXPECT_EQ(on_dev[r].fingerprint.combined_hex(), straight[r].fingerprint.combined_hex()) << "rank " << r;
      EXPECT_GE(on_dev[r].state_uploads, 1) << "the loaded optimizer state reached the device, rank " << r;
    }
    fs::remove_all(a);
    fs::remove_all(b);
  }
}

// ZeRO-2/3 on a device model keep their shards in device memory: the host update path has
// nothing to read, so a run without a device optimizer is refused before step 0, naming it.
TEST(DeviceModelTest, Zero2OnADeviceModelWithoutADeviceOptimizerIsRefusedBeforeTheFirstStep) {
  const TrainConfig config = tiny_config("gbs=16,mb=4,zero=2", 2, kData, SgdConfig{.lr = 0.1});
  auto host_store = comm::make_in_process_store(), device_store = comm::make_in_process_store();
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      comm::GlooOptions go;
      go.timeout = testing::kTestTimeout;
      auto c = comm::make_gloo_communicator(host_store, r, 2, go);
      auto dc = comm::make_gloo_communicator(device_store, r, 2, go);
      TrainerOptions to;
      to.collectives = dc.get();
      to.make_device_model = [](model::LabMlp& host, const strategy::Plan&) {
        return std::make_unique<StagedModel>(host);
      };
      try {
        Trainer t(config, *c, to);
      } catch (const ConfigError& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) EXPECT_NE(errors[r].find("ZeRO-2 on the staged model"), std::string::npos) << errors[r];
}

// Device memory by the split (issue 31), on the stand-in: a device model keeps what the host
// keeps and takes the rest from its compute memory, every byte charged by category to its own
// account and its transient buffers pooled (runtime/model/compute_memory.h, the CUDA model's
// pool over the heap). 4 ranks, one microbatch each (the ledger's one in flight), AdamW on the
// "device" (its state on the device's account too).
struct DeviceMemoryEnd {
  MemoryReport report;                                          // the device's account beside the ledger
  int64_t allocations_after_first = 0, allocations_at_end = 0;  // the device allocator's calls
  int64_t cached_bytes = 0;                                     // released buffers the pool keeps
};

std::vector<DeviceMemoryEnd> run_device_memory(const std::string& plan, int kWorld, int steps, int blocks = 2) {
  const TrainConfig config = tiny_config(plan, kWorld, 64, AdamWConfig{.lr = 1e-2}, blocks);
  auto host_store = comm::make_in_process_store(), device_store = comm::make_in_process_store();
  std::vector<DeviceMemoryEnd> out(kWorld);
  comm::testing::run_rank_threads(kWorld, [&](int r, std::barrier<>& sync) {
    comm::GlooOptions go;
    go.timeout = testing::kTestTimeout;
    auto c = comm::make_gloo_communicator(host_store, r, kWorld, go);
    auto dc = comm::make_gloo_communicator(device_store, r, kWorld, go);
    StagedModel* staged = nullptr;
    TrainerOptions to;
    to.record_events = false;
    to.collectives = dc.get();
    to.make_device_model = [&staged](model::LabMlp& host, const strategy::Plan&) {
      auto m = std::make_unique<StagedModel>(host);
      staged = m.get();
      return m;
    };
    to.make_device_optimizer = [&staged](const Optimizer& host, model::Model&) {
      return std::make_unique<testing::StagedOptimizer>(host, &staged->device_account());
    };
    Trainer trainer(config, *c, to);
    trainer.step();
    out[r].allocations_after_first = staged->device_memory().raw_allocations();
    for (int s = 1; s < steps; ++s) trainer.step();
    out[r].allocations_at_end = staged->device_memory().raw_allocations();
    out[r].cached_bytes = staged->device_memory().cached_bytes();
    out[r].report = memory_report(trainer, strategy::load_cluster("cpu-local"));
    sync.arrive_and_wait();
  });
  return out;
}

TEST(DeviceModelTest, DeviceMemoryByTheSplitEqualsTheLedgerAndSteadyStepsAllocateNothing) {
  using model::MemoryCategory;
  const model::MlpShape shape = mlp_shape(tiny_config(kPlan, 4, 64).model);
  const int64_t n = model::ParamLayout(shape).numel();  // divides by 4: shards are exact
  for (int zero = 0; zero <= 3; ++zero) {
    SCOPED_TRACE("zero=" + std::to_string(zero));
    const std::vector<DeviceMemoryEnd> ranks =
        run_device_memory("gbs=16,mb=4,bucket_mb=0.008,zero=" + std::to_string(zero), 4, 4);
    for (const DeviceMemoryEnd& e : ranks) {
      const MemoryReport& m = e.report;
      for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer,
                               MemoryCategory::kActivations, MemoryCategory::kTemporary})
        std::printf("  device zero=%d rank %d %-11s measured %8lld B, ledger %8.0f B\n", zero, m.rank,
                    std::string(model::to_string(c)).c_str(), static_cast<long long>(m.measured(c)), m.ledger(c));
      for (MemoryCategory c : {MemoryCategory::kParameters, MemoryCategory::kGradients, MemoryCategory::kOptimizer})
        EXPECT_EQ(static_cast<double>(m.measured(c)), m.ledger(c)) << "rank " << m.rank << " " << model::to_string(c);
      // By hand: DDP the whole model; ZeRO-3 a quarter of the parameters, ZeRO-2/3 of the
      // gradients, ZeRO-1+ of the AdamW moments (what is gathered in flight is temporary).
      EXPECT_EQ(m.measured(MemoryCategory::kParameters), 4 * n / (zero >= 3 ? 4 : 1)) << "rank " << m.rank;
      EXPECT_EQ(m.measured(MemoryCategory::kGradients), 4 * n / (zero >= 2 ? 4 : 1)) << "rank " << m.rank;
      EXPECT_EQ(m.measured(MemoryCategory::kOptimizer), 8 * n / (zero >= 1 ? 4 : 1)) << "rank " << m.rank;
      ASSERT_TRUE(m.deviation(MemoryCategory::kActivations));
      EXPECT_LE(std::abs(*m.deviation(MemoryCategory::kActivations)), 0.15) << "rank " << m.rank;
      // ZeRO-2/3 gather layers and fill buckets every step: those come from the pool, which
      // keeps them between steps (DDP and ZeRO-1 reduce their buckets in place: no buffers).
      if (zero >= 2) {
        EXPECT_GT(e.allocations_after_first, 0) << "rank " << m.rank;
        EXPECT_GT(e.cached_bytes, 0) << "rank " << m.rank << ": the pool kept nothing";
      }
      EXPECT_EQ(e.allocations_at_end, e.allocations_after_first)
          << "rank " << m.rank << ": steps 2-4 called the device allocator";
    }
  }
}

// A pipeline stage's sends copy their boundary into compute memory (a GPU pipeline cudaMalloced
// one per send): from the second step on, every copy is a buffer an earlier send gave back.
TEST(DeviceModelTest, PipelineSendCopiesComeFromThePoolAfterTheFirstStep) {
  for (const char* plan : {"pp=2,gbs=16,mb=4", "pp=2,v=2,schedule=interleaved,gbs=16,mb=4"}) {
    SCOPED_TRACE(plan);
    for (const DeviceMemoryEnd& e : run_device_memory(plan, 2, 4, /*blocks=*/4)) {
      EXPECT_GT(e.allocations_after_first, 0) << "rank " << e.report.rank << ": no send copy was made";
      EXPECT_EQ(e.allocations_at_end, e.allocations_after_first) << "rank " << e.report.rank;
      EXPECT_GT(e.cached_bytes, 0) << "rank " << e.report.rank;
    }
  }
}

}  // namespace
}  // namespace parlab::train
