#pragma once
// StepProgram: the ordered list of ops one rank performs in one optimizer step. Every strategy
// (DDP, ZeRO, tensor, pipeline) is a generator of step programs; the analytic cost model, the
// SimGrid simulator and the runtime all consume the same programs, so "simulated vs measured"
// compares like with like.
//
// Execution semantics (every executor honours them):
//   - Each op runs on a stream. A rank has a compute stream and a communication stream; ops of
//     one stream run one after another in program order (like CUDA streams).
//   - `deps` lists ops (of the same rank, any stream) that must have finished before the op
//     starts. Same-stream order is implicit and not repeated in `deps`.
//   - Collectives are called by every member of `group` in the same order with the same bytes
//     (check_consistency() proves it). Tensor-parallel collectives sit on the compute stream:
//     they are synchronous with the layer, as in Megatron; data-parallel ones on the
//     communication stream, so they overlap the rest of the backward pass.
//   - kSend is asynchronous: the stream issues it and moves on (the transfer proceeds in the
//     background; the step ends only when it is delivered). kRecv blocks its stream until the
//     data has arrived. This is what lets 1F1B's send-forward/receive-backward pairs proceed
//     without the batched isend/irecv Megatron needs.
//   - `bytes` follows the nccl-tests size convention (strategy/collectives.h).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "strategy/collectives.h"
#include "strategy/model_spec.h"
#include "strategy/partition.h"
#include "strategy/plan.h"

namespace parlab::strategy {

enum class OpKind {
  kForward,    // forward of `layers` for `microbatch` (compute)
  kBackward,   // backward of `layers` for `microbatch`, accumulating gradients (compute)
  kOptimizer,  // optimizer step over the flat element range [flat_begin, flat_end) (compute)
  // Clears the gradient buffer [flat_begin, flat_end) the backward accumulates into, once per
  // step before anything writes to it (compute, bandwidth-bound: `memory_bytes` are the bytes
  // written). PyTorch's optimizer.zero_grad(), Megatron's zero_grad_buffer().
  kZeroGrad,
  kAllReduce,
  kReduceScatter,
  kAllGather,
  kBroadcast,
  kSend,  // to `peer`
  kRecv,  // from `peer`
};

enum class Stream { kCompute, kComm };
enum class GroupKind { kDP, kTP, kPP, kEmbedding, kWorld };
// Where a compute op sits in a pipeline schedule (Megatron's phase names).
enum class Phase { kNone, kWarmup, kSteady, kCooldown };

struct Group {
  GroupKind kind = GroupKind::kWorld;
  std::string name;        // "dp.3" (the 4th DP group), "tp.0", "pp.1", "emb.0", "world"
  std::vector<int> ranks;  // world ranks, ascending
  int size() const { return int(ranks.size()); }
};

// An op's `deps`: most ops have none or one (the compute op a collective or a send follows), so
// up to two live inside the op and more on the heap -- programs hold millions of ops, and a heap
// vector each was most of what building them cost. The part of a vector's interface programs use.
class Deps {
 public:
  Deps() = default;
  Deps(std::initializer_list<int> ids) {
    for (int d : ids) push_back(d);
  }
  Deps(std::vector<int>&& ids) {  // NOLINT: implicit, as the vector it replaces
    if (ids.size() > kInline) {
      heap_ = std::move(ids);
    } else {
      for (int d : ids) push_back(d);
    }
  }
  Deps(const std::vector<int>& ids) : Deps(std::vector<int>(ids)) {}  // NOLINT: implicit

  void push_back(int d) {
    if (heap_.empty() && n_ < kInline) {
      inline_[n_++] = d;
      return;
    }
    if (heap_.empty()) heap_.assign(inline_, inline_ + n_), n_ = 0;
    heap_.push_back(d);
  }
  void clear() { heap_.clear(), n_ = 0; }
  size_t size() const { return heap_.empty() ? size_t(n_) : heap_.size(); }
  bool empty() const { return size() == 0; }
  const int* begin() const { return heap_.empty() ? inline_ : heap_.data(); }
  const int* end() const { return begin() + size(); }
  int operator[](size_t i) const { return begin()[i]; }
  int at(size_t i) const {
    if (i >= size()) throw std::out_of_range("Deps::at");
    return begin()[i];
  }
  friend bool operator==(const Deps& a, const Deps& b) { return std::equal(a.begin(), a.end(), b.begin(), b.end()); }

 private:
  static constexpr int kInline = 2;
  int inline_[kInline] = {0, 0};
  int n_ = 0;              // ids in inline_ (while heap_ is empty)
  std::vector<int> heap_;  // all of them, once there are more than kInline
};

struct Op {
  int id = 0;  // index in StepProgram::ops
  OpKind kind = OpKind::kForward;
  Stream stream = Stream::kCompute;
  std::string tag;  // names the tensor/bucket/microbatch: "fwd.mb3.c1", "grad.bucket2", "act.mb3.c0"
  Phase phase = Phase::kNone;

  // Compute ops.
  double flops = 0;
  double memory_bytes = 0;  // bytes moved through device memory (the optimizer is bandwidth-bound)
  // ZeRO-2/3's gradient buckets, which the rank's compute stream handles around a backward that
  // opens one (no rank keeps a whole gradient to accumulate into, so every microbatch's backward
  // writes into buckets of its own): bytes of buckets it zeroes first (`zeroed_bytes`: slots of a
  // ring it keeps across steps, so none is new memory), and bytes of reduced chunks the rank adds
  // into its gradient shard after each bucket's reduce-scatter (`accumulated_bytes`: read twice,
  // written once). The runtime does this work on the main thread (train/executor_zero.cpp); the
  // cost model charges it to the opening backward (compute_seconds_alone).
  double zeroed_bytes = 0, accumulated_bytes = 0;
  // The gradient clear (kZeroGrad): the part of `memory_bytes` that a runtime with weight-gradient
  // groups leaves to the step's first product, which writes it (first_write_grad_elements): the
  // cost model charges the clear without it where ranks share cores (the CPU runtime).
  double first_write_bytes = 0;
  LayerRange layers;  // also set on TP collectives and ZeRO-3 gathers: the layers concerned
  int microbatch = -1;
  int chunk = 0;  // model chunk (interleaved schedule)

  // Communication ops.
  int group = -1;    // index into StepProgram::groups (collectives)
  double bytes = 0;  // per call
  int count = 1;     // back-to-back calls of `bytes` each (a layer range's TP collectives)
  // A run of sequence-parallel calls written as one op (BuildOptions::call_runs, what the
  // planner walks): `count` repetitions of a pattern of `pattern_calls` calls (at most 32), call k
  // of each a reduce-scatter where bit k of `pattern_gathers` is clear and an all-gather where it
  // is set; `kind` is the first call's. 0: `count` calls of `kind`.
  int pattern_calls = 0;
  uint32_t pattern_gathers = 0;
  int peer = -1;  // send/recv: the other world rank
  // Element range of the rank's local flat parameter/gradient buffer that a bucket collective,
  // a ZeRO shard or the optimizer covers (local_param_layout()).
  int64_t flat_begin = 0, flat_end = 0;
  // A ZeRO reduce-scatter or all-gather whose chunks (the parts of [flat_begin, flat_end) in each
  // rank's shard, zero_chunk_elements) differ: the smallest chunk's bytes, which sets the ring's
  // time (strategy/collectives.h, ring_link_bytes: the busiest link carries bytes - min_chunk).
  // -1: balanced, S/n each.
  double min_chunk_bytes = -1;
  // A collective that overlaps compute even where the ranks fill a host's cores
  // (ClusterSpec::serializes_comm_with_compute, where the others take turns with it): the gradient
  // syncs of DDP (all-reduces), ZeRO-1 and ZeRO-2 (reduce-scatters). Their buckets lie in
  // registered memory (ZeRO-2's a ring the runtime registers with its communicator, DDP's and
  // ZeRO-1's spans of the gradients it registers), so on one host the ranks meet around a single
  // pass over the data (each sums its chunk where the peers' buckets lie) and wait for each other
  // asleep, and the communication thread has nothing else to do until the update: the rank's
  // compute pays only the CPU of the pass (comm_cpu_bytes). Measured on 2 workers (stop 58): each
  // of ZeRO-1's 20 MB buckets took 1.2-1.7 ms beside the backward, where taking turns priced it
  // 2.6 ms after it. ZeRO-3's reduce-scatters use the same ring but share the thread with every
  // layer's gathers, which they hold back; there taking turns is what was measured (held2 ZeRO-3
  // on 2 workers: 112-140 ms exposed; 137.6 taking turns, 105-109 overlapped). Only while the
  // group's members can all hold a core at once (strategy::overlaps_compute_on): a meeting of more
  // ranks than cores takes turns too (docs/DESIGN.md, "Shared-core hosts").
  bool overlaps_compute = false;

  Deps deps;

  bool is_collective() const {
    return kind == OpKind::kAllReduce || kind == OpKind::kReduceScatter || kind == OpKind::kAllGather ||
           kind == OpKind::kBroadcast;
  }
  bool is_compute() const { return is_layer_compute() || kind == OpKind::kOptimizer || kind == OpKind::kZeroGrad; }
  // A forward or backward: compute over `layers` for `microbatch`.
  bool is_layer_compute() const { return kind == OpKind::kForward || kind == OpKind::kBackward; }
  bool is_p2p() const { return kind == OpKind::kSend || kind == OpKind::kRecv; }
  // The calls a collective op makes: `count`, times the pattern's length for a run of calls.
  int calls() const { return count * (pattern_calls > 0 ? pattern_calls : 1); }
  // What call k (0 <= k < calls()) is.
  OpKind call_kind(int k) const {
    if (pattern_calls == 0) return kind;
    return (pattern_gathers >> (k % pattern_calls)) & 1u ? OpKind::kAllGather : OpKind::kReduceScatter;
  }
};

// Which of a rank's two lanes a walk of its program (the simulator's streams, the cost model's
// walk) runs `op` on: 0 for the compute stream's ops and the point-to-point ops, 1 for the
// communication stream's collectives. A send goes where the compute stream reaches it, right after
// the compute that made its data, and a recv right before the compute that reads it: the runtime
// issues them on each pipeline path's own communicator, so neither waits behind the data-parallel
// collectives queued ahead of it on the communication stream (a trace of PP 2 x DP 2 on 4 workers,
// stop 58: a stage's last gradient went out while its first bucket's all-reduce ran, where the
// communication lane had held it behind all four buckets, 20 ms).
inline int walk_lane(const Op& op) { return op.stream == Stream::kCompute || op.is_p2p() ? 0 : 1; }

struct StepProgram {
  int rank = 0;
  int world = 1;
  int stage = 0;
  Plan plan;
  std::vector<Group> groups;
  std::vector<Op> ops;

  const Group& group_of(const Op& op) const { return groups.at(op.group); }
};

// One parameter tensor as a rank holds it: after the tensor-parallel split, placed in the rank's
// flat buffer in layer order (forward order), as the runtime stores it.
struct LocalTensor {
  std::string name;
  int layer = 0;       // index into ModelSpec::layer_list()
  int64_t offset = 0;  // elements
  int64_t numel = 0;   // elements this rank holds
};
std::vector<LocalTensor> local_param_layout(const ModelSpec& model, const Plan& plan, int rank);
// The same from a layer list already built (model.layer_list(): the planner builds thousands of
// programs, and a list costs more than most of them).
std::vector<LocalTensor> local_param_layout(const ModelSpec& model, const std::vector<LayerSpec>& layer_list,
                                            const Plan& plan, int rank);

// ZeRO's shard of data-parallel rank r (Rajbhandari et al. SC'20): the contiguous
//   [n r / dp, n (r + 1) / dp)
// of a local flat buffer of n elements, the range its optimizer updates and, from stage 2/3, the
// gradients and parameters it keeps (runtime/train/shards.h holds the runtime to the same cut).
std::pair<int64_t, int64_t> zero_shard(int64_t elements, int dp, int r);
// How many elements of [begin, end) each rank's shard holds: the chunks of that range's
// reduce-scatter or all-gather, rank by rank (some may be 0).
std::vector<int64_t> zero_chunk_elements(int64_t begin, int64_t end, int64_t elements, int dp);

// Generator knobs that do not change what is computed, only how finely it is written down.
struct BuildOptions {
  // One compute op per layer (the runtime executes layer by layer) instead of one per model
  // chunk and microbatch (enough for the cost model and the simulator). Layers whose gradients a
  // data-parallel hook or a ZeRO-3 gather needs are always written per layer.
  bool per_layer_ops = false;
  // Name every op (Op::tag). The planner walks thousands of programs for their times alone,
  // which no tag changes; formatting a tag per op was most of the cost of building them. Untagged
  // programs are for such walks: the simulator, the runtime and check_consistency() match by tag.
  bool tags = true;
  // Write the sequence-parallel reduce-scatter / all-gather calls that follow a compute op as
  // one op per run of layers that make the same calls (Op::pattern_calls) instead of one op per
  // call. For walks that only time them (the planner's, where those calls were most of the ops);
  // check_consistency() expands runs, the simulator and the runtime take one op per call.
  bool call_runs = false;
};

// The program of `rank` for a resolved, validated plan.
StepProgram build_step(const ModelSpec& model, const Plan& plan, int rank, BuildOptions options = {});
// The same from model.layer_list() already built.
StepProgram build_step(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan, int rank,
                       BuildOptions options = {});

// FLOPs of one microbatch through `layers` on one rank: forward FLOPs per token (per sample for
// the MLP) times tokens, split by tensor parallelism (every GEMM and attention head is divided t
// ways; the lab MLP's small head is replicated). Backward is twice the forward, plus the
// replayed forward under full recompute, or attention's score and value products (4 s h per
// token and block) under selective recompute (Korthikanti et al. 2022).
double forward_flops(const ModelSpec& model, const Plan& plan, LayerRange layers);
double backward_flops(const ModelSpec& model, const Plan& plan, LayerRange layers);
double forward_flops(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
                     LayerRange layers);
double backward_flops(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
                      LayerRange layers);
// Bytes the bandwidth-bound kernels of one microbatch through `layers` move through device
// memory on one rank (step_program.cpp derives them tensor by tensor from Megatron's kernels:
// LayerNorm, bias-dropout-add, scale-mask-softmax, attention dropout, GeLU, the vocab-parallel
// cross-entropy). GEMMs are not counted here: they are FLOPs. Zero for the lab MLP, whose
// calibrated rate already includes its elementwise work.
double forward_memory_bytes(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
                            LayerRange layers);
double backward_memory_bytes(const ModelSpec& model, const std::vector<LayerSpec>& layer_list, const Plan& plan,
                             LayerRange layers);
// One optimizer update per parameter: memory traffic and FLOPs. Adam reads parameters,
// gradients and both moments and writes parameters and moments: 28 bytes in fp32 and in mixed
// precision (fp32 master + bf16 copy, bf16 gradients); SGD with momentum moves 20. About 12
// FLOPs per element for Adam, 3 for SGD: the update is bandwidth-bound.
double optimizer_traffic_bytes_per_param(const Plan& plan);
// Bytes per element of the gradient buffer the backward accumulates into and kZeroGrad clears:
// fp32 in both precisions (the runtime's host gradients, Megatron's main_grad buffer).
double grad_accumulation_bytes_per_element(const Plan& plan);
double optimizer_flops_per_param(const Plan& plan);
// Bytes of the activation crossing a layer boundary for one microbatch, as pipeline stages send
// it and tensor-parallel collectives reduce it: tokens x hidden x activation bytes (split by t
// with sequence parallelism for pipeline sends).
double boundary_activation_bytes(const ModelSpec& model, const Plan& plan);
double tp_collective_bytes(const ModelSpec& model, const Plan& plan);

// Bytes one element of the tensors that cross links occupies: gradients (DP all-reduce /
// reduce-scatter), parameters (ZeRO all-gather) and activations (TP collectives, pipeline p2p).
double grad_bytes_per_element(const Plan& plan);
double param_bytes_per_element(const Plan& plan);

std::string_view to_string(OpKind kind);
std::string_view to_string(Stream stream);
std::string_view to_string(GroupKind kind);
std::string_view to_string(Phase phase);
// The collective an op performs, for ops where is_collective().
CollectiveOp collective_of(OpKind kind);

// "all-reduce grad.bucket3 12.6 MB dp.0" and the like, for messages.
std::string describe(const StepProgram& program, const Op& op);
// The whole program, one op per line, for learners (`parlab plan --program RANK`) and golden
// tests:  "<id> <stream> <kind> <tag> [layers a-b] [elems a-b] [bytes [min-chunk B], group |
// peer] [deps ...]" (min-chunk only on uneven ZeRO collectives).
std::string to_text(const StepProgram& program);

}  // namespace parlab::strategy
