#pragma once
// The trainer: one rank's training loop around the Executor.
//
//   step():  sampler.next_batch()  -> this rank's slice (ElasticSampler::rank_indices over the DP
//            group) -> `microbatches` contiguous microbatches (sizes differ by at most one; a short
//            last batch of an epoch gives uneven, possibly empty, microbatches) -> SyntheticDataset
//            fill -> Executor::run (forward, backward, bucket all-reduces, optimizer) ->
//            sampler.advance() -> a StepRecord to the telemetry sink.
//
// Batch arithmetic: global batch G = mb x microbatches x dp is fixed by the plan (`gbs`); with
// another worker count the accumulation steps change, not G (resolve_train_plan). The loss scale
// of every microbatch is 1 / (the step's actual global batch), so a short last batch still gives
// the gradient of its mean loss, and a rank with no samples contributes zeros to every
// collective it still joins.
//
// Determinism: for a fixed world size the weights are bit-identical run to run: parameters and
// data are counter-based (CounterRng), BLAS runs one thread, the ring all-reduce sums in a fixed
// order, and microbatches accumulate in program order.
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/comm/communicator.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/core_home.h"
#include "runtime/train/data.h"
#include "runtime/train/device_optimizer.h"
#include "runtime/train/executor.h"
#include "runtime/train/optimizer.h"
#include "runtime/train/sampler.h"
#include "runtime/train/shards.h"
#include "runtime/train/telemetry.h"
#include "strategy/cluster_spec.h"
#include "strategy/model_spec.h"
#include "strategy/partition.h"
#include "strategy/plan.h"

namespace parlab::train {

struct TrainConfig {
  strategy::ModelSpec model;  // kind mlp (the lab network)
  strategy::Plan plan;        // resolved and validated for the world size
  OptimizerConfig optimizer = AdamWConfig{};
  int64_t data_size = 0;  // synthetic samples, indices [0, data_size)
  uint64_t seed = 0;      // parameter init, data and epoch shuffles (separate RNG streams)
  std::chrono::milliseconds comm_timeout = comm::kDefaultTimeout;
};

// The lab network's shape from a ModelSpec; ConfigError unless model.kind is mlp.
model::MlpShape mlp_shape(const strategy::ModelSpec& model);

// The layers [begin, end) spanned by the model of `rank`: its pipeline stage's (the whole
// network without pipeline parallelism).
strategy::LayerRange stage_layers(const strategy::ModelSpec& model, const strategy::Plan& plan, int rank);
// The chunks of layers that model holds (several under the interleaved schedule), in order.
std::vector<model::LayerChunk> stage_model_chunks(const strategy::ModelSpec& model, const strategy::Plan& plan,
                                                  int rank);

// A plan as given (parse_plan) for `world` workers: resolved by the plan policy
// (strategy::resolve, the same defaults the planner and the simulator take) and validated against
// `cluster` sized to the world. Refuses what the CPU runtime cannot train (precision=mixed where
// bf16 matmuls are unavailable, saying why). Throws ConfigError naming the field.
strategy::Plan resolve_train_plan(const strategy::ModelSpec& model, strategy::Plan given, int world,
                                  const strategy::ClusterSpec& cluster);
// The same for plan text ("gbs=256,bucket_mb=4"), parsed first.
strategy::Plan resolve_train_plan(const strategy::ModelSpec& model, std::string_view plan_text, int world,
                                  const strategy::ClusterSpec& cluster);

// Builds every rank's step program and throws UnsupportedOp for the first op the runtime cannot
// execute (a launcher calls it before starting any worker).
void check_runtime_supports(const strategy::ModelSpec& model, const strategy::Plan& plan);

// The plan's optimizer (adam -> AdamW, sgd -> SGD) with PyTorch's defaults, `lr` when > 0.
OptimizerConfig optimizer_config(strategy::OptimizerKind kind, double lr = 0, double momentum = 0,
                                 double weight_decay = -1);

// Everything that makes the run continue exactly: one struct, so a checkpoint saves and restores
// it whole. Random numbers have no hidden state: every one is CounterRng(seed, stream, counter)
// with the counter derived from the sample index, the flat parameter offset or the epoch, so
// (seed, sampler state) is the whole RNG state.
// Under ZeRO the model holds only what its stage keeps (shards.h) and `shards` the rank's
// shard of parameters and gradients; the optimizer covers shards->shard().
struct TrainerState {
  int64_t step = 0;  // optimizer steps taken
  model::LabMlp model;
  std::unique_ptr<Optimizer> optimizer;
  ElasticSampler sampler;
  uint64_t seed = 0;
  std::unique_ptr<ModelShards> shards = nullptr;
  // On a device: the model that computes (model.h), whose host buffers are `model`'s, so
  // checkpoints, exports and fingerprints read `model` on every device. Null on the CPU.
  std::unique_ptr<model::Model> device_model = nullptr;
  // The optimizer's device twin (device_optimizer.h) when the device has one: then the device
  // holds the current parameters and optimizer state between Trainer::sync_host calls.
  std::unique_ptr<DeviceOptimizer> device_optimizer = nullptr;
  // What the executor runs: device_model, else model.
  model::Model& compute_model() { return device_model ? *device_model : static_cast<model::Model&>(model); }
};

// Builds the model that computes on a device around the host model (whole network, full
// parameters and gradients) for a plan; set by the launcher for --device cuda.
using DeviceModelFactory =
    std::function<std::unique_ptr<model::Model>(model::LabMlp& host, const strategy::Plan& plan)>;

struct TrainerOptions {
  TelemetrySink* sink = nullptr;  // borrowed; receives every step's record
  bool record_events = true;      // keep per-op events in the records (traces, overlap checks)
  bool record_samples = false;    // put this rank's dataset indices in each record
  // When set, the first step() writes its inputs, labels, weights before the update and the
  // gradients the optimizer applies here (dump.h; the caller picks the per-rank folder).
  std::filesystem::path dump_dir;
  InjectedFaults faults;  // skip-allreduce and slow (executor.h); none by default
  // --device cuda: the step program computes on make_device_model(state.model, plan) and its
  // collectives and pipeline sends run on communicators split off `collectives` (an NCCL world over
  // the same ranks: DP, TP and the pipeline pairs all move device memory), while `world` (Gloo,
  // host memory) keeps checkpoints, dumps, exports and barriers. Both null:
  // the CPU, everything on `world`. Borrowed.
  DeviceModelFactory make_device_model;
  comm::Communicator* collectives = nullptr;
  // With a device model: the optimizer's device twin (device_optimizer.h), so a step copies
  // nothing to the host. Unset (or returning null): the update runs on the host.
  DeviceOptimizerFactory make_device_optimizer;
  // The CPU trainer's rank, where its host's ranks outnumber the cores: its core (core_home.h).
  CoreHome core_home;
};

class Trainer {
 public:
  // `world` is this rank's communicator over all ranks of the plan (a world of one for a single
  // process: the same code path). Builds this rank's step program (per-layer ops), the model, the
  // optimizer over the program's optimizer range and the group communicators (sub-groups are
  // split off `world`, a collective call). Throws UnsupportedOp before any compute when the plan
  // needs ops the runtime cannot run yet, ConfigError on bad input. `world` is borrowed.
  Trainer(TrainConfig config, comm::Communicator& world, TrainerOptions options = {});
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One optimizer step; returns its record (also given to the sink).
  StepRecord step();

  const TrainConfig& config() const { return config_; }
  const strategy::StepProgram& program() const { return program_; }
  const TrainerState& state() const { return state_; }
  TrainerState& state() { return state_; }
  int rank() const { return world_.rank(); }
  int dp_rank() const { return dp_rank_; }
  // The bytes this rank holds, by category, counted by the accounting allocator (model,
  // optimizer, executor buffers and microbatch states all charge it).
  const model::MemoryAccount& memory() const { return memory_; }
  model::MemoryAccount& memory() { return memory_; }
  // The communicator of the data-parallel group (the world's for pure data parallelism): the
  // group over which the ZeRO shards are cut.
  comm::Communicator& dp_comm() const;
  // The communicator of the tensor-parallel group (tp > 1 only).
  comm::Communicator& tp_comm() const;
  // The communicator over every rank of the plan.
  comm::Communicator& world_comm() const { return world_; }
  // Every communicator the trainer's ops use (the world's and the groups split off it), e.g. to
  // dump all their flight recorders when the rank fails or is stopped.
  std::vector<const comm::Communicator*> communicators() const;
  // Communication memory the step keeps besides the communicators' own: ZeRO-2/3's registered
  // gradient-bucket ring (executor.h).
  int64_t bucket_ring_bytes() const;
  // After the host parameters were written outside a step (a checkpoint load): copies them (and
  // the optimizer state, when the device has its own) to the device model. A no-op on the CPU.
  void host_state_changed();
  // Before anything reads the host state outside a step (checkpoints, exports, fingerprints):
  // after device-optimizer steps copies the device's parameters and optimizer state to the host
  // buffers (state().model, state().optimizer). Idempotent until the next step; a no-op on the
  // CPU. const: the host buffers are then a mirror of the device's truth, not new state.
  void sync_host() const;

 private:
  std::vector<model::MicrobatchState> load_microbatches(const GlobalBatch& batch,
                                                        std::vector<std::vector<int64_t>>& indices);
  void dump_optimizer_inputs(const strategy::Op& op, std::span<const float> params, std::span<const float> grads,
                             const std::map<std::string, std::string>& meta);

  TrainConfig config_;
  comm::Communicator& world_;
  model::MemoryAccount memory_;  // before state_: the state's buffers charge it
  TrainerOptions options_;
  strategy::StepProgram program_;
  int dp_rank_ = 0;
  SyntheticDataset data_;
  TrainerState state_;
  // The program groups' communicators, split off `base` where a group is not all of it.
  std::vector<comm::Communicator*> group_communicators(comm::Communicator& base);

  std::vector<std::unique_ptr<comm::Communicator>> owned_comms_;
  comm::Communicator* dp_comm_ = nullptr;
  comm::Communicator* tp_comm_ = nullptr;
  std::unique_ptr<Executor> executor_;
  // Steps since the last sync_host after which the device holds weights the host lacks (a device
  // update, or a device ZeRO all-gather of shards the host optimizer updated one of).
  mutable bool host_stale_ = false;
};

}  // namespace parlab::train
