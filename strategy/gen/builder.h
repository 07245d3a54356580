#pragma once
// Internals of build_step(): the pipeline schedule is the skeleton (which forward and backward
// slots a stage runs, in which order, with which sends and receives), and each other strategy
// plugs into it through Hooks — tensor parallel adds its collectives after compute ops, data
// parallel (DDP, ZeRO) adds gradient buckets, parameter gathers and the optimizer. One file per
// strategy, as nccl-tests keeps one file per collective.
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "strategy/step_program.h"

namespace parlab::strategy::gen {

// One slot of a pipeline schedule: a forward or backward of one model chunk for one microbatch.
struct Slot {
  bool forward = true;
  int microbatch = 0;
  int chunk = 0;
  Phase phase = Phase::kNone;
};

// The ordered slots of `stage` (schedule.cpp): GPipe, 1F1B (warm-up, steady 1F1B, cool-down)
// or interleaved 1F1B with v chunks.
std::vector<Slot> schedule_slots(const Plan& plan, int stage);

class Builder;

// What a strategy adds around compute ops. Default implementations add nothing.
class Hooks {
 public:
  virtual ~Hooks() = default;
  // Called before the first slot (ops that open the step).
  virtual void start(Builder&) {}
  // Whether this slot's compute must be written one layer per op (so a hook can attach).
  virtual bool needs_per_layer(const Slot&) const { return false; }
  // Called before the compute op of `layers` in `slot`; returns ops the compute op depends on.
  virtual std::vector<int> before_compute(Builder&, const Slot&, LayerRange) { return {}; }
  // Called after the compute op `op_id` of `layers` in `slot`.
  virtual void after_compute(Builder&, const Slot&, LayerRange, int op_id) {}
  // Called once all slots are written (optimizer, trailing collectives).
  virtual void finish(Builder&) {}
};

std::unique_ptr<Hooks> make_tensor_parallel_hooks();                // tensor.cpp
std::unique_ptr<Hooks> make_data_parallel_hooks(const Plan& plan);  // data_parallel.cpp (DDP, ZeRO 1-3)

class Builder {
 public:
  // `layers` is model.layer_list(); it must outlive the builder.
  Builder(const ModelSpec& model, const std::vector<LayerSpec>& layers, const Plan& plan, int rank,
          BuildOptions options);
  StepProgram take() { return std::move(prog_); }

  // Writes the whole program.
  void build();

  int add(Op&& op);  // moved in once: programs hold hundreds of thousands of ops
  // A new op of `kind` on `stream` at the end of the program, to fill in place (the hot paths:
  // compute ops, pipeline messages and TP calls, most of a program). The reference lasts until
  // the next op is added.
  Op& append(OpKind kind, Stream stream);
  int group_index(GroupKind kind) const;

  const ModelSpec& model() const { return model_; }
  const Plan& plan() const { return plan_; }
  const std::vector<LayerSpec>& layers() const { return layers_; }
  const std::vector<LocalTensor>& layout() const { return layout_; }
  const std::vector<LayerRange>& chunks() const { return chunks_; }
  int rank() const { return prog_.rank; }
  int stage() const { return prog_.stage; }
  RankCoords coords() const { return coords_; }
  int microbatches() const { return int(plan_.microbatches); }
  const BuildOptions& options() const { return options_; }
  bool tags() const { return options_.tags; }  // whether ops are named (BuildOptions::tags)

  // Compute of one microbatch: tokens and FLOPs (split by tensor parallelism).
  double tokens_per_microbatch() const;
  double forward_flops(LayerRange layers) const;
  double backward_flops(LayerRange layers) const;
  // Bytes of the activation crossing a layer boundary for one microbatch (TP collectives and
  // pipeline sends): tokens x hidden x activation bytes.
  double boundary_activation_bytes() const;
  // Flat element range of the local tensors of `layers`.
  std::pair<int64_t, int64_t> flat_range(LayerRange layers) const;
  int64_t local_elements() const { return layout_.empty() ? 0 : layout_.back().offset + layout_.back().numel; }
  // Ops emitted so far (ids), e.g. to wait for everything of a kind.
  const std::vector<Op>& ops() const { return prog_.ops; }
  // An op emitted earlier, to annotate (Op::zeroed_bytes and the like): its dependencies and kind stay.
  Op& op(int id) { return prog_.ops.at(size_t(id)); }

 private:
  void emit_slot(const Slot& slot);
  void emit_compute(const Slot& slot, LayerRange range, Deps deps);

  const ModelSpec& model_;
  Plan plan_;
  BuildOptions options_;
  StepProgram prog_;
  RankCoords coords_;
  const std::vector<LayerSpec>& layers_;
  std::vector<LocalTensor> layout_;
  std::vector<LayerRange> chunks_;
  std::vector<std::unique_ptr<Hooks>> hooks_;
  int last_compute_ = -1;
  // FLOPs and memory bytes of a compute op, by (forward, first layer, end).
  std::map<std::tuple<bool, int, int>, std::pair<double, double>> work_;
};

std::string layer_tag(const LayerSpec& layer);

}  // namespace parlab::strategy::gen
