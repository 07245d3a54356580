#pragma once
// Plan: how a model is split over a world of devices. dp x tp x pp = world; ZeRO acts on the
// data-parallel axis. The same key=value spelling is used by every command that takes a plan:
//
//   dp, tp, pp         data / tensor / pipeline parallel degrees (dp defaults to world/(tp*pp))
//   zero               0 (plain DDP), 1 (optimizer state), 2 (+ gradients), 3 (+ parameters)
//   mb                 microbatch size in samples (default: the model preset's, else 1)
//   microbatches       microbatches per optimizer step per data-parallel rank (default 1)
//   gbs                global batch in samples; implies microbatches = gbs / (mb * dp)
//   schedule           gpipe | 1f1b | interleaved          (default 1f1b)
//   v                  model chunks per rank when interleaved (default 2 then, else 1)
//   recompute          none | selective | full             (default none)
//   sp                 on | off: sequence parallel with tensor parallel (default off)
//   precision          fp32 | mixed (bf16 compute, fp32 master weights) (default mixed)
//   optimizer          adam | sgd                           (default adam)
//   bucket_mb          DDP gradient bucket in MiB, as PyTorch's bucket_cap_mb (default 25)
//
// Rank layout (Megatron order): tensor-parallel ranks are adjacent, then data-parallel, then
// pipeline stages:  rank = tp_index + tp * (dp_index + dp * pp_index).  Adjacent ranks share a
// node, so the chattiest group (TP) stays on NVLink.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strategy/model_spec.h"

namespace parlab::strategy {

struct ClusterSpec;

enum class Schedule { kGPipe, k1F1B, kInterleaved };
enum class Recompute { kNone, kSelective, kFull };
enum class OptimizerKind { kAdam, kSgd };
// Where mixed precision keeps its model state and in what width the collectives move it:
//   kZero      the ZeRO paper's (Rajbhandari et al. SC'20, 3.1): 16-bit parameters and gradients,
//              fp32 master weights, momentum and variance (2 + 2 + 12 bytes), each sharded by its
//              stage; gradients reduced and parameters gathered in 16 bits.
//   kFp32Main  parlab's runtime (Megatron's rule for bf16: gradients accumulate and all-reduce in
//              fp32): bf16 copies of the weights the matmuls read, fp32 main gradients, and the
//              fp32 parameter buffer as the optimizer's master copy (2 + 4 + 4 + 8 with Adam).
//              The master copy is replicated below ZeRO-3 (the optimizer updates a shard and the
//              updated fp32 values are all-gathered), sharded at ZeRO-3, where the bf16 copies are
//              made from each layer's fp32 gather and freed with it. Every collective moves fp32.
enum class MixedState { kZero, kFp32Main };

struct Plan {
  int dp = 0;  // 0: world / (tp * pp)
  int tp = 1;
  int pp = 1;
  int zero = 0;
  int64_t microbatch = 0;    // 0: model default
  int64_t microbatches = 0;  // 0: from gbs, else default_microbatches(dp, pp)
  int64_t global_batch = 0;  // 0: microbatch * microbatches * dp (resolve(): the plan policy)
  Schedule schedule = Schedule::k1F1B;
  int v = 0;  // 0: 2 when interleaved, else 1
  Recompute recompute = Recompute::kNone;
  bool sequence_parallel = false;
  Precision precision = Precision::kMixed;
  // Not given: kFp32Main for the lab network (kind = "mlp", the model parlab's runtime trains, so
  // `parlab plan` predicts what `parlab train` holds), kZero for every other model.
  MixedState mixed_state = MixedState::kZero;
  OptimizerKind optimizer = OptimizerKind::kAdam;
  double bucket_bytes = 25.0 * 1024 * 1024;
  // Keys the plan text named (parse_plan). resolve() fills only what was not given — the
  // precision, for one, defaults to the model's (the lab MLP trains in fp32) — and the planner
  // searches only over what was not given.
  std::vector<std::string> given;
  bool was_given(std::string_view key) const;

  int world() const { return dp * tp * pp; }
  // "dp=8,tp=8,pp=16,zero=1,mb=1,microbatches=64,schedule=1f1b,...": every key, parseable back.
  std::string to_string() const;
  // Only the keys the plan text named, in to_string()'s order: parse_plan(given_text()) is the
  // plan as given, before resolve() fills the rest.
  std::string given_text() const;
  // The shortest human name: "DDP x8", "ZeRO-3 x64", "TP 8 x PP 16 x DP 8 (ZeRO-1)".
  std::string short_name() const;
};

// Where a rank sits in the dp x tp x pp grid.
struct RankCoords {
  int dp = 0, tp = 0, pp = 0;
};
RankCoords coords_of(const Plan& plan, int rank);
int rank_of(const Plan& plan, RankCoords c);
// The world ranks of the groups a rank belongs to, in rank order.
std::vector<int> dp_group(const Plan& plan, int rank);
std::vector<int> tp_group(const Plan& plan, int rank);
std::vector<int> pp_group(const Plan& plan, int rank);

// Parses "k=v,k=v" on top of `base`. Throws ConfigError naming the key for an unknown key, a
// malformed pair or a value of the wrong type; range rules are checked by validate().
Plan parse_plan(std::string_view text, Plan base = {});

// The plan policy: the one place where what a plan did not set is decided. Every entry point
// (the planner, the simulator, `parlab train`, the lab) resolves through resolve(), and each
// default gives way to what the plan set:
//  - dp: world / (tp * pp);
//  - mb: the model's default microbatch; with gbs set and mb not, the largest microbatch up to that
//    default that cuts each replica's gbs / dp samples into whole microbatches (a multiple of pp
//    of them under a pipeline, `microbatches` of them when that is set);
//  - microbatches: gbs / (mb * dp) when gbs is set, else default_microbatches(dp, pp);
//  - gbs: mb * microbatches * dp;
//  - v (2 when interleaved), precision (the model's), mixed_state (fp32-main for the lab network).
// Throws ConfigError naming the field, its value and the rule broken.
Plan resolve(Plan plan, const ModelSpec& model, int world);

// Replicas that share one default global batch: with no gbs set, a step trains the samples of
// mb * lcm(dp, 4), the same on 1, 2 and 4 replicas (a run on 1 worker and one on 4 train the
// same samples, so their weights can be compared bit for bit) and one microbatch per replica
// from 4 replicas up.
inline constexpr int64_t kReplicasSharingABatch = 4;
// Microbatches per replica when gbs is not set: lcm(dp, 4) / dp, rounded up to a multiple of pp
// (a pipeline needs at least pp of them in flight).
int64_t default_microbatches(int dp, int pp);
// The global batch resolve() gives a plan of dp replicas and pp stages that set no gbs (microbatch
// 0: the model's default).
int64_t default_global_batch(const ModelSpec& model, int dp, int pp = 1, int64_t microbatch = 0);

// Weight-gradient groups of the lab MLP (runtime: LabMlp, ModelStorage::weight_grad_group): how
// many of a rank's microbatches a block's weight-gradient products reduce over at once, so each
// product reduces over at least kWeightGradGroupRows rows where the step has that many before
// its gradients are read. At the lab's microbatch of 64 a product per microbatch spends more time
// reading and writing the fp32 gradient than multiplying (issue 35's bench_model). Where every
// microbatch's gradient is reduced at once (ZeRO-2/3) or a TP slice computes it, 1. Under a
// pipeline, 1 too: a group's products all land on its last backward, in the schedule's cooldown,
// and the step program prices every microbatch's backward alike, so the simulator would miss
// that (measured at pp=2 on 2 workers: 12-18% faster than without groups, and 18-26% slower
// than predicted). `plan` must be resolved.
inline constexpr int64_t kWeightGradGroupRows = 512;
int weight_grad_group(const Plan& plan);
// Gradient elements of the blocks' weights, which a runtime with weight-gradient groups (the CPU's
// LabMlp) does not clear at the step's start: the first group product of the step writes them
// (llm.c's rule; issue 35). 0 where the plan has no groups (weight_grad_group 1) or the model is
// no MLP. The cost model leaves them out of the clear where ranks share cores, as the ledger
// counts the groups there. `plan` must be resolved.
int64_t first_write_grad_elements(const ModelSpec& model, const Plan& plan);

// Whether `plan`'s ranks meet only once a step, at the gradient sync (data parallelism, ZeRO-1/2):
// no tensor-parallel all-reduces, pipeline hand-offs or ZeRO-3 gathers inside the step. On shared
// cores such ranks run between meetings as a fair share would run them; the others wait for a
// core at every meeting (experiments' shared_core_pricing, runtime/train/core_home.h).
bool meets_once_a_step(const Plan& plan);

// Rejects impossible plans: dp*tp*pp = world, world fits the cluster, tp divides heads, kv
// heads and ffn, pp <= layers, interleaving rules, ZeRO stage limits, sequence parallel needs
// tp > 1, ... `plan` must be resolved. The first broken rule is thrown as ConfigError.
void validate(const Plan& plan, const ModelSpec& model, const ClusterSpec& cluster);

std::string_view to_string(Schedule s);
std::string_view to_string(Recompute r);
std::string_view to_string(Precision p);
std::string_view to_string(OptimizerKind o);
std::string_view to_string(MixedState s);

// Bytes per element of parameters, gradients and optimizer state, per parameter, for the plan's
// precision and optimizer (ZeRO paper, Rajbhandari et al. SC'20, section 3.1):
//   mixed + Adam:  2 (bf16 params) + 2 (bf16 grads) + 12 (fp32 master, momentum, variance)
//   mixed + SGD:   2 + 2 + 8 (fp32 master, momentum)
//   fp32  + Adam:  4 + 4 + 8 (momentum, variance)
//   fp32  + SGD:   4 + 4 + 4 (momentum)
// and, with mixed_state=fp32-main (parlab's runtime, see MixedState):
//   mixed + Adam:  2 (bf16 weight copies) + 4 (fp32 grads) + 12 (fp32 master 4, momentum, variance)
//   mixed + SGD:   2 + 4 + 8
struct StateBytes {
  double params = 0, grads = 0, optimizer = 0;
  // Of `optimizer`: the fp32 master copy when it is sharded with the parameters (ZeRO-3) rather
  // than with the optimizer state (ZeRO-1) -- mixed_state=fp32-main; 0 otherwise.
  double master = 0;
  // What one element occupies on the wire: gradients reduced, parameters gathered.
  double wire_grads = 0, wire_params = 0;
  double total() const { return params + grads + optimizer; }
};
// The ZeRO paper's convention (mixed_state=zero) for a precision and optimizer.
StateBytes state_bytes_per_param(Precision precision, OptimizerKind optimizer);
// The plan's: its precision, optimizer and mixed_state.
StateBytes state_bytes_per_param(const Plan& plan);
// Bytes of one activation element (bf16 under mixed precision, fp32 otherwise).
double activation_bytes_per_element(Precision precision);
// Bytes of one element of the activations that cross links (pipeline boundaries, TP collectives):
// 16-bit under mixed_state=zero, fp32 under fp32-main, whose residual stream stays fp32.
double boundary_bytes_per_element(const Plan& plan);

}  // namespace parlab::strategy
