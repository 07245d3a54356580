// The Executor's tensor- and pipeline-parallel handlers (executor.h describes both).
#include <algorithm>

#include "runtime/comm/flight_recorder.h"
#include "runtime/train/executor.h"
#include "runtime/train/sampler.h"
#include "base/errors.h"

namespace parlab::train {
namespace {

using strategy::Op;
using strategy::OpKind;

bool forward_tag(const Op& op) { return op.tag.rfind("act.", 0) == 0; }

}  // namespace

bool Executor::is_tp(const Op& op) const {
  return op.is_collective() && program_.group_of(op).kind == strategy::GroupKind::kTP;
}

bool Executor::is_dp_state_collective(const Op& op) const { return op.is_collective() && !is_tp(op); }

// ---- tensor parallelism ----

void Executor::run_tp_collective(const Op& op) {
  const Op& producer = program_.ops[op.deps.at(0)];
  const bool forward = producer.kind == OpKind::kForward;
  const int layer = op.layers.begin;
  model::MicrobatchState& mb = mbs_[op.microbatch];
  // The partial sum in compute memory (device memory on a GPU: the TP group's NCCL reduces it there).
  const std::span<float> buf =
      forward ? model_.compute_boundary(layer + 1, false, mb) : model_.compute_boundary(layer, true, mb);
  comm::Communicator& c = comm_of(op);
  const int64_t h = model_.shape().hidden;
  std::vector<int64_t> counts(static_cast<size_t>(c.size()));
  for (int r = 0; r < c.size(); ++r) counts[r] = rank_slice(mb.batch(), r, c.size()).count * h;
  const RankSlice rows = rank_slice(mb.batch(), c.rank(), c.size());
  const std::span<float> mine = buf.subspan(static_cast<size_t>(rows.begin * h), static_cast<size_t>(rows.count * h));
  auto finish = [&](int64_t begin, int64_t end) {
    if (forward) {
      model_.tp_finish_forward(layer, mb, begin, end);
    } else {
      model_.tp_finish_backward(layer, mb, begin, end);
    }
  };
  const bool skip = skipped(op);  // the rank computes on its partial sums; its peers wait
  switch (op.kind) {
    case OpKind::kAllReduce:
      if (!skip) record_issue(op, c, c.all_reduce(buf, collective_options(op)));
      finish(0, mb.batch());
      break;
    case OpKind::kReduceScatter:
      if (!skip) record_issue(op, c, c.reduce_scatter_v(buf, counts, mine, collective_options(op)));
      finish(rows.begin, rows.begin + rows.count);
      break;
    case OpKind::kAllGather:
      if (!skip) record_issue(op, c, c.all_gather_v(mine, buf, counts, collective_options(op)));
      break;
    default:
      throw RuntimeError("executor: " + strategy::describe(program_, op) + " is no tensor-parallel collective");
  }
  release_if_last(op);
}

// ---- pipeline parallelism ----

// For each send, the boundary its producer left (forward: activation(end), backward:
// dactivation(begin)); for each recv, the one its consumer reads (forward: activation(begin),
// backward: dactivation(end)).
void Executor::plan_p2p() {
  p2p_layer_.assign(program_.ops.size(), -1);
  for (const Op& op : program_.ops) {
    if (!op.is_p2p()) continue;
    const bool fwd = forward_tag(op);
    if (op.kind == OpKind::kSend) {
      if (op.deps.size() != 1)
        throw ConfigError("program op " + std::to_string(op.id), strategy::describe(program_, op),
                          "a send must depend on exactly the op that produced its tensor");
      const Op& producer = program_.ops[op.deps[0]];
      p2p_layer_[op.id] = fwd ? producer.layers.end : producer.layers.begin;
    } else {
      for (const Op& later : program_.ops) {
        if (later.id <= op.id || !later.is_compute() ||
            std::find(later.deps.begin(), later.deps.end(), op.id) == later.deps.end())
          continue;
        p2p_layer_[op.id] = fwd ? later.layers.begin : later.layers.end;
        break;
      }
      if (p2p_layer_[op.id] < 0)
        throw ConfigError("program op " + std::to_string(op.id), strategy::describe(program_, op),
                          "no compute op depends on this recv");
    }
    const auto& paths = op.kind == OpKind::kSend ? options_.send_comms : options_.recv_comms;
    const auto it = paths.find(op.peer);
    if (it == paths.end() || it->second == nullptr)
      throw ConfigError(
          std::string(op.kind == OpKind::kSend ? "send" : "recv") + " path to rank " + std::to_string(op.peer),
          "missing", "the executor needs a communicator for " + strategy::describe(program_, op));
    const std::vector<int>& members = it->second->world_ranks();
    if (members.size() != 2 || std::find(members.begin(), members.end(), op.peer) == members.end() ||
        std::find(members.begin(), members.end(), program_.rank) == members.end())
      throw ConfigError("communicator " + it->second->group_name(), "members",
                        "a point-to-point path holds exactly this rank and its peer " + std::to_string(op.peer));
  }
}

comm::Communicator& Executor::p2p_comm(const Op& op) const {
  return *(op.kind == OpKind::kSend ? options_.send_comms : options_.recv_comms).at(op.peer);
}

std::span<float> Executor::boundary_of(const Op& op, int layer) {
  return model_.compute_boundary(layer, !forward_tag(op), mbs_[op.microbatch]);
}

namespace {
int group_rank_of(const comm::Communicator& c, int world_rank) {
  const auto& m = c.world_ranks();
  return static_cast<int>(std::find(m.begin(), m.end(), world_rank) - m.begin());
}
}  // namespace

void Executor::issue_send(const Op& op) {
  if (step_ == options_.faults.skip_send_step) {  // the injected fault: the peer waits
    release_if_last(op);
    return;
  }
  // A copy in compute memory (device to device on a GPU): the microbatch may release the tensor
  // before the peer has received it.
  const std::span<const float> src = boundary_of(op, p2p_layer_[op.id]);
  const std::span<float> out = make_buffer(op.id, static_cast<int64_t>(src.size()), Fill::kNone);
  model_.compute_copy(out, src);
  comm::Communicator& c = p2p_comm(op);
  record_issue(op, c, c.send(out, group_rank_of(c, op.peer), collective_options(op)));
  release_if_last(op);
}

void Executor::issue_recv(const Op& op) {
  comm::Communicator& c = p2p_comm(op);
  record_issue(op, c, c.recv(boundary_of(op, p2p_layer_[op.id]), group_rank_of(c, op.peer), collective_options(op)));
}

}  // namespace parlab::train
