// The Executor's ZeRO handlers: reduce-scatter, all-gather and broadcast, and the buffers they
// need (executor.h describes the life of each buffer; shards.h what a rank keeps).
#include <algorithm>
#include <numeric>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/executor.h"
#include "base/errors.h"

namespace parlab::train {
namespace {

using strategy::Op;
using strategy::OpKind;

double now() { return comm::wall_clock_seconds(); }

model::FlatRange range_of(const Op& op) { return {op.flat_begin, op.flat_end}; }

}  // namespace

void Executor::plan_zero_buffers() {
  const size_t n = program_.ops.size();
  gathers_of_.assign(n, {});
  buckets_of_.assign(n, {});
  last_op_of_mb_.assign(static_cast<size_t>(std::max<int64_t>(program_.plan.microbatches, 0)), -1);
  const int zero = shards_.zero();
  std::vector<int> consumers(n, 0);
  for (const Op& op : program_.ops) {
    // A send or a TP collective after a microbatch's last compute still reads its tensors.
    if (op.kind == OpKind::kSend || is_tp(op)) last_op_of_mb_.at(op.microbatch) = op.id;
    if (op.kind == OpKind::kForward || op.kind == OpKind::kBackward) {
      last_op_of_mb_.at(op.microbatch) = op.id;
      if (zero >= 3)
        for (int d : op.deps)
          if (program_.ops[d].kind == OpKind::kAllGather) {
            gathers_of_[op.id].push_back(d);
            ++consumers[d];
          }
    }
    if (zero >= 2 && op.kind == OpKind::kReduceScatter && is_dp_state_collective(op)) {
      // The backward ops of this microbatch that write into the bucket (they precede it).
      bool written = false;
      for (int b = 0; b < op.id; ++b) {
        const Op& bw = program_.ops[b];
        if (bw.kind != OpKind::kBackward || bw.microbatch != op.microbatch) continue;
        if (!model_.layout().layers_range(bw.layers.begin, bw.layers.end).intersects(range_of(op))) continue;
        buckets_of_[b].push_back(op.id);
        written = true;
      }
      if (!written)
        throw ConfigError("program op " + std::to_string(op.id), strategy::describe(program_, op),
                          "a ZeRO-2/3 reduce-scatter needs an earlier backward op that writes its bucket");
    }
    if (op.is_collective() && op.kind != OpKind::kAllReduce && zero >= 1 && is_dp_state_collective(op)) {
      const comm::Communicator& c = *comms_.at(op.group);
      const model::FlatRange mine = zero_shard(flat_elements_, c.size(), c.rank());
      if (!(mine == shards_.shard()))
        throw ConfigError("ZeRO shard of rank " + std::to_string(program_.rank),
                          std::to_string(shards_.shard().begin) + ".." + std::to_string(shards_.shard().end),
                          "group " + c.group_name() + " rank " + std::to_string(c.rank()) + " owns " +
                              std::to_string(mine.begin) + ".." + std::to_string(mine.end));
    }
  }
  if (zero >= 3)
    for (const Op& op : program_.ops)
      if (op.kind == OpKind::kAllGather && is_dp_state_collective(op) && consumers[op.id] != 1)
        throw ConfigError("program op " + std::to_string(op.id), strategy::describe(program_, op),
                          "a ZeRO-3 gather must feed exactly one compute op (it is freed after it)");
  plan_bucket_ring();
}

// Collective over the DP group (every member builds its executor in the same order).
void Executor::plan_bucket_ring() {
  if (shards_.zero() < 2 || !model_.compute_is_host()) return;
  comm::Communicator* dp = nullptr;
  for (const Op& op : program_.ops) {
    if (op.kind != OpKind::kReduceScatter || !is_dp_state_collective(op)) continue;
    dp = &comm_of(op);
    bucket_slot_elements_ = std::max(bucket_slot_elements_, op.flat_end - op.flat_begin);
  }
  if (dp == nullptr || dp->size() < 2) return;
  bucket_ring_ = dp->allocate_registered(static_cast<size_t>(kBucketSlots * bucket_slot_elements_));
  slot_owner_.assign(kBucketSlots, -1);
}

std::span<float> Executor::make_bucket(int rs, int64_t elements) {
  if (bucket_ring_.data.empty()) return make_buffer(rs, elements, Fill::kZero);
  const int slot = next_slot_;
  if (const int owner = slot_owner_[static_cast<size_t>(slot)]; owner >= 0) {
    const bool issued = std::find(pending_reduce_scatters_.begin(), pending_reduce_scatters_.end(), owner) !=
                        pending_reduce_scatters_.end();
    if (!issued) {
      const double t0 = now();
      const std::span<float> bucket = make_buffer(rs, elements, Fill::kZero);
      add_bucket_work(program_.ops[rs], t0, now());
      return bucket;
    }
    // The compute stream waits for the reduce-scatter that holds the slot: exposed communication.
    wait_work(owner);
    retire_reduce_scatter(owner);  // frees the slot
  }
  next_slot_ = (slot + 1) % kBucketSlots;
  slot_owner_[static_cast<size_t>(slot)] = rs;
  slot_of_[rs] = slot;
  if (options_.account)
    options_.account->allocate(model::MemoryCategory::kTemporary, elements * int64_t{sizeof(float)});
  const std::span<float> bucket =
      bucket_ring_.data.subspan(static_cast<size_t>(slot * bucket_slot_elements_), static_cast<size_t>(elements));
  const double t0 = now();
  model_.compute_zero(bucket);  // the backward accumulates into it
  add_bucket_work(program_.ops[rs], t0, now());
  return bucket;
}

std::span<float> Executor::bucket_of(int rs) {
  if (const auto s = slot_of_.find(rs); s != slot_of_.end()) {
    const Op& op = program_.ops[rs];
    return bucket_ring_.data.subspan(static_cast<size_t>(s->second * bucket_slot_elements_),
                                     static_cast<size_t>(op.flat_end - op.flat_begin));
  }
  const auto it = buffers_.find(rs);
  return it == buffers_.end() ? std::span<float>() : it->second->span();
}

// A step's transient buffers (ZeRO-3's gathered layers, ZeRO-2/3 gradient buckets) come and go
// per layer and microbatch: 27 of about 33 MB in a lab-mlp ZeRO-3 step. Each used to be a fresh
// allocation above glibc's largest mmap threshold (32 MiB), so every one was mapped, page-faulted
// and zeroed, then unmapped (a TLB shootdown across the rank's threads): about 1 s a step of
// "idle" on 4 ranks of 2 cores, and CPU the communication thread waited for. A freed buffer is
// kept for the next one of its size in the step, but never so that a rank holds more than the
// most it had in use at once: a buffer that must be made new first returns spares (largest
// first) until in use + spare + new fits under that peak. So the accounted and the resident
// peak are what they would be without the reuse, and the step's end returns every buffer:
// between steps a rank holds none, as the ledger says.
std::span<float> Executor::make_buffer(int op_id, int64_t elements, Fill fill) {
  std::unique_ptr<model::ComputeBuffer> buffer;
  if (const auto spare = spare_buffers_.find(elements); spare != spare_buffers_.end()) {
    buffer = std::move(spare->second);
    spare_buffers_.erase(spare);
    spare_elements_ -= elements;
    if (fill == Fill::kZero) model_.compute_zero(buffer->span());
  } else {
    peak_in_use_elements_ = std::max(peak_in_use_elements_, in_use_elements_ + elements);
    while (!spare_buffers_.empty() && in_use_elements_ + spare_elements_ + elements > peak_in_use_elements_) {
      const auto largest = std::prev(spare_buffers_.end());
      spare_elements_ -= largest->first;
      spare_buffers_.erase(largest);
    }
    // In the model's compute memory (device memory on a GPU: the layers bind it, NCCL moves it).
    // A host model charges the account; device memory is not host memory. A new buffer is zeroed
    // only when its op accumulates into it.
    model::MemoryAccount* account = model_.compute_is_host() ? options_.account : nullptr;
    buffer =
        model_.make_compute_buffer(elements, account, model::MemoryCategory::kTemporary,
                                   fill == Fill::kZero ? model::BufferInit::kZero : model::BufferInit::kOverwritten);
  }
  auto [it, inserted] = buffers_.emplace(op_id, std::move(buffer));
  if (!inserted) throw RuntimeError("executor: op " + std::to_string(op_id) + " already has a buffer");
  in_use_elements_ += elements;
  return it->second->span();
}

void Executor::free_buffer(int op_id) {
  if (const auto s = slot_of_.find(op_id); s != slot_of_.end()) {
    const Op& op = program_.ops[op_id];
    if (options_.account)
      options_.account->release(model::MemoryCategory::kTemporary,
                                (op.flat_end - op.flat_begin) * int64_t{sizeof(float)});
    slot_owner_[static_cast<size_t>(s->second)] = -1;
    slot_of_.erase(s);
    return;
  }
  const auto it = buffers_.find(op_id);
  if (it == buffers_.end()) return;
  const auto elements = static_cast<int64_t>(it->second->span().size());
  spare_buffers_.emplace(elements, std::move(it->second));
  buffers_.erase(it);
  in_use_elements_ -= elements;
  spare_elements_ += elements;
}

void Executor::release_buffers() {
  for (auto it = slot_of_.begin(); it != slot_of_.end();) free_buffer((it++)->first);
  next_slot_ = 0;
  buffers_.clear();
  spare_buffers_.clear();
  in_use_elements_ = spare_elements_ = peak_in_use_elements_ = 0;
}

void Executor::unbind_all() {
  if (shards_.zero() >= 2) model_.bind_grads(model_.owned_range(), {});
  if (shards_.zero() >= 3) model_.bind_params(model_.owned_range(), {});
  release_buffers();
  grad_binding_.clear();
}

std::vector<int64_t> Executor::counts_of(const Op& op) const {
  return shard_counts(range_of(op), flat_elements_, comm_of(op).size());
}

namespace {
// Where this rank's chunk of an op's range starts, and how long it is.
struct Chunk {
  int64_t begin = 0;
  int64_t count = 0;
};
Chunk my_chunk(const Op& op, const std::vector<int64_t>& counts, int rank) {
  const int64_t before = std::accumulate(counts.begin(), counts.begin() + rank, int64_t{0});
  return {op.flat_begin + before, counts[static_cast<size_t>(rank)]};
}
// This rank's chunk within its shard's buffer `shard` (which starts at `shard_begin`). An empty
// chunk (the op's range misses the shard) lies at the shard's start: where the rank's data
// lies, so a registered all-gather finds it in registered memory like its peers' chunks.
template <typename T>
std::span<T> chunk_of_shard(std::span<T> shard, int64_t shard_begin, Chunk c) {
  if (c.count == 0) return shard.first(0);
  return shard.subspan(static_cast<size_t>(c.begin - shard_begin), static_cast<size_t>(c.count));
}
}  // namespace

void Executor::before_compute(const Op& op) {
  poll_reduce_scatters();
  for (int g : gathers_of_[op.id]) model_.bind_params(range_of(program_.ops[g]), buffers_.at(g)->span());
  for (int rs : buckets_of_[op.id]) {
    if (!bucket_of(rs).empty()) continue;
    const Op& bucket = program_.ops[rs];
    // Zeroed: the backward accumulates into it.
    model_.bind_grads(range_of(bucket), make_bucket(rs, bucket.flat_end - bucket.flat_begin));
    grad_binding_[bucket.flat_begin] = rs;
  }
}

void Executor::after_compute(const Op& op) {
  for (int g : gathers_of_[op.id]) {
    model_.bind_params(range_of(program_.ops[g]), {});
    free_buffer(g);
  }
  release_if_last(op);
  poll_reduce_scatters();
}

void Executor::release_if_last(const Op& op) {
  if (op.microbatch >= 0 && last_op_of_mb_.at(op.microbatch) == op.id) model_.release_microbatch(mbs_[op.microbatch]);
}

void Executor::issue_reduce_scatter(const Op& op) {
  if (is_tp(op)) return run_tp_collective(op);
  comm::Communicator& c = comm_of(op);
  const std::vector<int64_t> counts = counts_of(op);
  const Chunk mine = my_chunk(op, counts, c.rank());
  if (shards_.zero() <= 1) {
    // Stage 1: the model's whole gradient bucket, reduced in place.
    if (skipped(op)) return;
    const std::span<float> bucket = grad_range(op);
    record_issue(op, c,
                 c.reduce_scatter_v(bucket, counts, bucket.subspan(mine.begin - op.flat_begin, mine.count),
                                    collective_options(op)));
    return;
  }
  const std::span<float> bucket = bucket_of(op.id);
  if (bucket.empty())
    throw RuntimeError("executor: no backward wrote the bucket of " + strategy::describe(program_, op));
  if (skipped(op)) {
    // Nothing issued: the rank keeps its own, unreduced chunk (the fault's lesson).
    pending_reduce_scatters_.push_back(op.id);
    retire_reduce_scatter(op.id);
    return;
  }
  record_issue(op, c,
               c.reduce_scatter_v(bucket, counts, bucket.subspan(mine.begin - op.flat_begin, mine.count),
                                  collective_options(op)));
  pending_reduce_scatters_.push_back(op.id);
}

void Executor::retire_reduce_scatter(int op_id) {
  const auto pending = std::find(pending_reduce_scatters_.begin(), pending_reduce_scatters_.end(), op_id);
  if (pending == pending_reduce_scatters_.end()) return;
  pending_reduce_scatters_.erase(pending);
  const Op& op = program_.ops[op_id];
  if (const int idx = issued_index_[op_id]; idx >= 0) issued_[idx].work->wait();  // rethrows a failure
  const std::vector<int64_t> counts = counts_of(op);
  const Chunk mine = my_chunk(op, counts, comm_of(op).rank());
  const std::span<const float> reduced =
      std::span<const float>(bucket_of(op_id)).subspan(mine.begin - op.flat_begin, mine.count);
  // Microbatches accumulate into the shard (the first adds onto zeros: an exact copy), in the
  // model's compute memory (a kernel on a GPU, ordered after the collective the wait saw end).
  const double t0 = now();
  model_.compute_accumulate(chunk_of_shard(shards_.compute_grads(), shards_.shard().begin, mine), reduced);
  add_bucket_work(op, t0, now());  // on a device, the launch: the kernel runs in stream order
  if (const auto b = grad_binding_.find(op.flat_begin); b != grad_binding_.end() && b->second == op_id) {
    model_.bind_grads(range_of(op), {});
    grad_binding_.erase(b);
  }
  free_buffer(op_id);
}

void Executor::poll_reduce_scatters() {
  for (size_t k = 0; k < pending_reduce_scatters_.size();) {
    const int id = pending_reduce_scatters_[k];
    Issued& i = issued_[issued_index_[id]];
    if (!i.work->completed()) {
      ++k;
      continue;
    }
    if (i.observed_done_seconds < 0) i.observed_done_seconds = now();
    retire_reduce_scatter(id);  // removes entry k
  }
}

void Executor::issue_all_gather(const Op& op) {
  if (is_tp(op)) return run_tp_collective(op);
  comm::Communicator& c = comm_of(op);
  const std::vector<int64_t> counts = counts_of(op);
  const Chunk mine = my_chunk(op, counts, c.rank());
  if (shards_.zero() >= 3) {
    // A layer, from every rank's shard into a buffer that lives until its one consumer ran.
    // Never skipped by the fault: no rank can compute a layer it does not have.
    const std::span<float> layer = make_buffer(op.id, op.flat_end - op.flat_begin, Fill::kNone);
    const std::span<const float> in =
        chunk_of_shard(std::span<const float>(shards_.compute_params()), shards_.shard().begin, mine);
    record_issue(op, c, c.all_gather_v(in, layer, counts, collective_options(op)));
    return;
  }
  if (skipped(op)) return;
  // Stages 1-2: the updated shard's part of the bucket, gathered in place in the model's copy.
  const std::span<float> bucket =
      model_.compute_params().subspan(op.flat_begin - model_.owned_range().begin, op.flat_end - op.flat_begin);
  record_issue(
      op, c,
      c.all_gather_v(bucket.subspan(mine.begin - op.flat_begin, mine.count), bucket, counts, collective_options(op)));
}

void Executor::issue_broadcast(const Op& op) {
  if (skipped(op)) return;
  comm::Communicator& c = comm_of(op);
  if (!model_.holds_params())
    throw UnsupportedOp("cannot broadcast " + strategy::describe(program_, op) + ": this rank holds only a shard");
  const std::span<float> range =
      model_.compute_params().subspan(op.flat_begin - model_.owned_range().begin, op.flat_end - op.flat_begin);
  record_issue(op, c, c.broadcast(range, 0, collective_options(op)));
}

}  // namespace parlab::train
