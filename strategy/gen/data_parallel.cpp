// Data parallelism: DDP and ZeRO stages 1-3 on the data-parallel axis.
//
// DDP (PyTorch DistributedDataParallel, Li et al. VLDB'20): gradients are grouped into buckets
// of about bucket_mb MiB in reverse parameter order — the order backward produces them — and
// each bucket's all-reduce is issued on the communication stream as soon as its last gradient
// exists, overlapping the rest of the backward pass. With gradient accumulation only the last
// microbatch communicates. "Buckets are reduced in a predetermined order that is identical
// across processes" (reducer.hpp), which is also what makes the reduction deterministic.
//
// ZeRO (Rajbhandari et al. SC'20) keeps the same computation but shards state over the DP group:
//   stage 1  optimizer state: gradients are reduce-scattered (each rank keeps the reduced 1/dp it
//            owns), the rank updates its shard, and the updated parameters are all-gathered —
//            reduce-scatter + all-gather moves the same bytes as DDP's all-reduce.
//   stage 2  + gradients: the reduce-scatter happens after every microbatch's backward, since no
//            rank keeps a full gradient to accumulate into (why DeepSpeed refuses pp > 1).
//   stage 3  + parameters: each layer's parameters are all-gathered before its forward and again
//            before its backward (prefetching one layer ahead), and freed after; updated shards
//            need no all-gather. 3 x the parameter bytes per step against DDP's 2: 1.5x.
#include <algorithm>
#include <map>

#include "strategy/gen/builder.h"

namespace parlab::strategy::gen {
namespace {

struct Bucket {
  int index = 0;
  int chunk = 0;
  int64_t flat_begin = 0, flat_end = 0;
  int trigger_layer = 0;  // the lowest layer in the bucket: its backward completes the bucket
  int top_layer = 0;      // the highest: its backward opens the bucket (ZeRO-2/3 make it then)
};

class DataParallel final : public Hooks {
 public:
  bool needs_per_layer(const Slot& slot) const override {
    if (dp_ <= 1) return false;
    if (zero_ == 3) return true;
    return !slot.forward && (zero_ >= 2 || slot.microbatch == last_mb_);
  }

  // The step opens by clearing the gradient buffer the backward accumulates into: the whole
  // local buffer, or under ZeRO-2/3 (no rank keeps a full gradient) the rank's shard of it.
  void start(Builder& b) override {
    Op op = range_op(OpKind::kZeroGrad, grad_shard(b, zero_ >= 2), b.tags() ? "grad.zero" : "");
    op.memory_bytes = double(op.flat_end - op.flat_begin) * grad_accumulation_bytes_per_element(b.plan());
    // Groups clear no block weight (ZeRO-2/3, which shard the clear, have none).
    op.first_write_bytes =
        double(first_write_grad_elements(b.model(), b.plan())) * grad_accumulation_bytes_per_element(b.plan());
    b.add(std::move(op));
  }

  std::vector<int> before_compute(Builder& b, const Slot& slot, LayerRange range) override {
    if (dp_ <= 1 || zero_ != 3) return {};
    init(b);
    const std::tuple<bool, int, int> key{slot.forward, slot.microbatch, slot.chunk};
    if (key != pass_) {
      pass_ = key;
      gathered_.clear();
    }
    // Gather this layer (if the prefetch did not) and prefetch the next one of the pass.
    const LayerRange chunk = b.chunks()[slot.chunk];
    const int layer = range.begin;
    const int next = slot.forward ? layer + 1 : layer - 1;
    for (int l : {layer, next}) {
      if (!chunk.contains(l) || gathered_.count(l)) continue;
      const auto [begin, end] = b.flat_range({l, l + 1});
      Op op;
      op.kind = OpKind::kAllGather;
      op.stream = Stream::kComm;
      op.group = b.group_index(GroupKind::kDP);
      op.bytes = double(end - begin) * param_bytes_per_element(b.plan());
      op.flat_begin = begin;
      op.flat_end = end;
      op.min_chunk_bytes = min_chunk_bytes(b, op, param_bytes_per_element(b.plan()));
      op.layers = {l, l + 1};
      op.microbatch = slot.microbatch;
      op.chunk = slot.chunk;
      if (b.tags())
        op.tag = "param." + layer_tag(b.layers()[l]) + (slot.forward ? ".fwd" : ".bwd") + ".mb" +
                 std::to_string(slot.microbatch);
      gathered_[l] = b.add(std::move(op));
    }
    return {gathered_.at(layer)};
  }

  void after_compute(Builder& b, const Slot& slot, LayerRange range, int op_id) override {
    if (dp_ <= 1 || slot.forward || range.size() != 1) return;
    const bool last = slot.microbatch == last_mb_;
    if (zero_ <= 1 && !last) return;
    init(b);
    if (zero_ >= 2) open_buckets(b, slot, range, op_id);
    for (const Bucket& bucket : buckets_[slot.chunk]) {
      if (bucket.trigger_layer != range.begin) continue;
      Op op;
      op.kind = zero_ == 0 ? OpKind::kAllReduce : OpKind::kReduceScatter;
      op.stream = Stream::kComm;
      op.group = b.group_index(GroupKind::kDP);
      op.flat_begin = bucket.flat_begin;
      op.flat_end = bucket.flat_end;
      op.bytes = double(bucket.flat_end - bucket.flat_begin) * grad_bytes_per_element(b.plan());
      if (zero_ >= 1) op.min_chunk_bytes = min_chunk_bytes(b, op, grad_bytes_per_element(b.plan()));
      op.chunk = slot.chunk;
      op.microbatch = slot.microbatch;
      if (b.tags()) op.tag = bucket_tag(b, bucket) + (zero_ >= 2 ? ".mb" + std::to_string(slot.microbatch) : "");
      op.deps = {op_id};
      if (zero_ >= 2) add_accumulation(b, op, opener_.at({slot.microbatch, bucket.index}));
      op.overlaps_compute = zero_ <= 2;  // Op::overlaps_compute says why not ZeRO-3's
      sync_.push_back(b.add(std::move(op)));
    }
  }

  void finish(Builder& b) override {
    init(b);
    int last_backward = -1;
    for (const Op& op : b.ops())
      if (op.kind == OpKind::kBackward) last_backward = op.id;
    const int emb = b.group_index(GroupKind::kEmbedding);
    if (emb >= 0) {
      // The tied embedding's two copies (first and last stage) add their gradients.
      Op op;
      op.kind = OpKind::kAllReduce;
      op.stream = Stream::kComm;
      op.group = emb;
      op.bytes = double(b.model().vocab) * b.model().hidden / b.plan().tp * grad_bytes_per_element(b.plan());
      if (b.tags()) op.tag = "grad.tied_embedding";
      op.deps = {last_backward};
      sync_.push_back(b.add(std::move(op)));
    }

    // The optimizer updates the whole local buffer, or with ZeRO the contiguous 1/dp of it the
    // rank owns.
    Op opt = range_op(OpKind::kOptimizer, grad_shard(b, zero_ >= 1), b.tags() ? "optimizer" : "");
    const double elements = double(opt.flat_end - opt.flat_begin);
    opt.flops = elements * optimizer_flops_per_param(b.plan());
    opt.memory_bytes = elements * optimizer_traffic_bytes_per_param(b.plan());
    opt.deps = sync_;
    const int opt_id = b.add(std::move(opt));

    if (dp_ > 1 && (zero_ == 1 || zero_ == 2)) {
      for (const auto& chunk_buckets : buckets_) {
        for (const Bucket& bucket : chunk_buckets) {
          Op op;
          op.kind = OpKind::kAllGather;
          op.stream = Stream::kComm;
          op.group = b.group_index(GroupKind::kDP);
          op.flat_begin = bucket.flat_begin;
          op.flat_end = bucket.flat_end;
          op.bytes = double(bucket.flat_end - bucket.flat_begin) * param_bytes_per_element(b.plan());
          op.min_chunk_bytes = min_chunk_bytes(b, op, param_bytes_per_element(b.plan()));
          op.chunk = bucket.chunk;
          if (b.tags()) op.tag = "param." + bucket_tag(b, bucket).substr(5);  // "param.bucket3"
          op.deps = {opt_id};
          b.add(std::move(op));
        }
      }
    }
  }

 private:
  // ZeRO-2/3: the backward of a bucket's top layer opens it for its microbatch, in a slot of a ring
  // the rank keeps across steps, which it zeroes (train/executor.h): nothing is new memory.
  void open_buckets(Builder& b, const Slot& slot, LayerRange range, int op_id) {
    for (const Bucket& bucket : buckets_[slot.chunk]) {
      if (bucket.top_layer != range.begin) continue;
      opener_[{slot.microbatch, bucket.index}] = op_id;
      const double bytes = double(bucket.flat_end - bucket.flat_begin) * grad_accumulation_bytes_per_element(b.plan());
      Op& opener = b.op(op_id);
      opener.zeroed_bytes += bytes;
    }
  }

  // The reduced chunks a rank adds into its gradient shard, charged to the backward that opened
  // the bucket as 1/dp of the bucket on every rank. The runtime adds the rank's own chunk (the
  // bucket's overlap with its shard: all of a top bucket on the last rank, none on the first)
  // on its main thread whenever it next finds the reduce-scatter done, while its communication
  // thread goes on with the queued gathers. The total per rank is the same either way. Charged
  // where the chunk falls, one rank's backward grew at the top buckets and the other's at the
  // bottom ones, and ZeRO-3's per-layer gathers (which wait for both ranks) added the two up:
  // the simulator put ZeRO-3 on 2 workers 6-7% above the walk and 6-18% above measured steps.
  void add_accumulation(Builder& b, const Op& reduce_scatter, int opener) {
    const double elements = double(reduce_scatter.flat_end - reduce_scatter.flat_begin) / double(dp_);
    b.op(opener).accumulated_bytes += elements * grad_accumulation_bytes_per_element(b.plan());
  }

  // Buckets per chunk: walk the chunk's tensors from last to first, closing a bucket when the
  // next tensor would push it past the cap (a tensor larger than the cap gets its own bucket).
  void init(Builder& b) {
    if (initialized_) return;
    initialized_ = true;
    const auto& layout = b.layout();
    int index = 0;
    for (size_t c = 0; c < b.chunks().size(); ++c) {
      const LayerRange chunk = b.chunks()[c];
      std::vector<Bucket> out;
      Bucket cur{index, int(c), 0, 0, 0};
      double cur_bytes = 0;
      bool open = false;
      const double elem = grad_bytes_per_element(b.plan());
      for (auto it = layout.rbegin(); it != layout.rend(); ++it) {
        if (!chunk.contains(it->layer)) continue;
        const double bytes = double(it->numel) * elem;
        if (open && cur_bytes + bytes > b.plan().bucket_bytes) {
          out.push_back(cur);
          cur = Bucket{++index, int(c), 0, 0, 0};
          open = false;
        }
        if (!open) {
          cur.top_layer = it->layer;
          cur.flat_end = it->offset + it->numel;
          cur_bytes = 0;
          open = true;
        }
        cur.flat_begin = it->offset;
        cur.trigger_layer = it->layer;
        cur_bytes += bytes;
      }
      if (open) {
        out.push_back(cur);
        ++index;
      }
      buckets_.push_back(std::move(out));
    }
  }

  // The whole local flat buffer, or (`sharded`, with dp > 1) the contiguous 1/dp the rank owns.
  std::pair<int64_t, int64_t> grad_shard(const Builder& b, bool sharded) const {
    const int64_t n = b.local_elements();
    if (!sharded || dp_ <= 1) return {0, n};
    return zero_shard(n, dp_, b.coords().dp);
  }

  // A ZeRO collective's chunks are the parts of its range in each rank's shard: a layer or bucket
  // mostly (often wholly) in one shard moves like a broadcast, and the smallest chunk sets the
  // ring's time (collectives.h, ring_link_bytes). -1 when every chunk is the same.
  double min_chunk_bytes(const Builder& b, const Op& op, double bytes_per_element) const {
    const std::vector<int64_t> chunks = zero_chunk_elements(op.flat_begin, op.flat_end, b.local_elements(), dp_);
    const auto [smallest, largest] = std::minmax_element(chunks.begin(), chunks.end());
    return *smallest == *largest ? -1 : double(*smallest) * bytes_per_element;
  }

  // A compute-stream op over the flat element range [first, second).
  static Op range_op(OpKind kind, std::pair<int64_t, int64_t> range, std::string tag) {
    Op op;
    op.kind = kind;
    op.stream = Stream::kCompute;
    op.flat_begin = range.first;
    op.flat_end = range.second;
    op.tag = std::move(tag);
    return op;
  }

  static std::string bucket_tag(const Builder&, const Bucket& bucket) {
    return "grad.bucket" + std::to_string(bucket.index);
  }

 public:
  explicit DataParallel(int dp, int zero, int last_mb) : dp_(dp), zero_(zero), last_mb_(last_mb) {}

 private:
  int dp_, zero_, last_mb_;
  bool initialized_ = false;
  std::map<std::pair<int, int>, int> opener_;  // (microbatch, bucket index) -> its opening backward
  std::vector<std::vector<Bucket>> buckets_;
  std::vector<int> sync_;
  std::tuple<bool, int, int> pass_{false, -1, -1};
  std::map<int, int> gathered_;
};

}  // namespace

std::unique_ptr<Hooks> make_data_parallel_hooks(const Plan& plan) {
  return std::make_unique<DataParallel>(plan.dp, plan.zero, int(plan.microbatches) - 1);
}

}  // namespace parlab::strategy::gen
