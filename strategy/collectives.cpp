#include "strategy/collectives.h"

namespace parlab::strategy {

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all-reduce";
    case CollectiveOp::kReduceScatter:
      return "reduce-scatter";
    case CollectiveOp::kAllGather:
      return "all-gather";
    case CollectiveOp::kBroadcast:
      return "broadcast";
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective_op(std::string_view t) {
  if (t == "allreduce" || t == "all-reduce" || t == "all_reduce") return CollectiveOp::kAllReduce;
  if (t == "reducescatter" || t == "reduce-scatter" || t == "reduce_scatter") return CollectiveOp::kReduceScatter;
  if (t == "allgather" || t == "all-gather" || t == "all_gather") return CollectiveOp::kAllGather;
  if (t == "broadcast" || t == "bcast") return CollectiveOp::kBroadcast;
  return std::nullopt;
}

}  // namespace parlab::strategy
