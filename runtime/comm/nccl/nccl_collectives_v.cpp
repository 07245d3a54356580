// The uneven reduce-scatter and all-gather of the Communicator interface on NCCL, which has only
// the even ones (ncclReduceScatter / ncclAllGather need the same count on every rank).
//
// Chunk r (counts[r] elements at offset counts[0] + ... + counts[r-1]) becomes one rooted
// collective: ncclReduce to rank r for the reduce-scatter, ncclBroadcast from rank r for the
// all-gather, every one inside the single ncclGroupStart/End of Impl::issue_locked, so the whole
// operation is one Work and NCCL schedules the chunks together.
//
// Why rooted collectives and not ncclSend/ncclRecv: a reduce-scatter REDUCES, and with point to
// point each rank would have to receive dp - 1 chunks into scratch buffers and sum them itself;
// ncclReduce does the arithmetic in NCCL's kernels, in place at the root, with no scratch. Empty
// chunks are simply skipped: the counts are arguments every rank passes alike (the ZeRO shard
// boundaries), so every rank skips the same chunks and the remaining calls pair up in the same
// order on every rank -- a count-0 send/recv pair or a 0-element collective is never issued.
// Determinism: for a fixed communicator, chunk sizes and NCCL version every ncclReduce picks the
// same algorithm and reduces in the same order, so the same inputs give the same bits.
#include <vector>

#include "runtime/comm/nccl/nccl_check.h"
#include "runtime/comm/nccl/nccl_impl.h"

namespace parlab::comm {

namespace {
double bytes_of(std::size_t elements) { return static_cast<double>(elements) * sizeof(float); }
}  // namespace

std::shared_ptr<Work> NcclCommunicator::run_reduce_scatter_v(std::span<const float> in, std::span<const int64_t> counts,
                                                             std::span<float> out, const CollectiveOptions& o) {
  return impl_->collective(
      OpKind::kReduceScatter, bytes_of(in.size()), o,
      [in, out, c = std::vector<int64_t>(counts.begin(), counts.end()), me = rank()](ncclComm_t comm, cudaStream_t s) {
        std::size_t offset = 0;
        for (int r = 0; r < static_cast<int>(c.size()); ++r) {
          const auto n = static_cast<std::size_t>(c[static_cast<std::size_t>(r)]);
          // recvbuff is read only at the root; elsewhere null, so a misuse faults loudly.
          if (n > 0)
            PARLAB_NCCL_CHECK_ASYNC(
                ncclReduce(in.data() + offset, r == me ? out.data() : nullptr, n, ncclFloat32, ncclSum, r, comm, s));
          offset += n;
        }
      });
}

std::shared_ptr<Work> NcclCommunicator::run_all_gather_v(std::span<const float> in, std::span<float> out,
                                                         std::span<const int64_t> counts, const CollectiveOptions& o) {
  return impl_->collective(
      OpKind::kAllGather, bytes_of(out.size()), o,
      [in, out, c = std::vector<int64_t>(counts.begin(), counts.end()), me = rank()](ncclComm_t comm, cudaStream_t s) {
        std::size_t offset = 0;
        for (int r = 0; r < static_cast<int>(c.size()); ++r) {
          const auto n = static_cast<std::size_t>(c[static_cast<std::size_t>(r)]);
          // The root sends its input (it may alias its chunk of out: in place); the others
          // receive into their chunk (sendbuff is read only at the root).
          float* chunk = out.data() + offset;
          if (n > 0)
            PARLAB_NCCL_CHECK_ASYNC(ncclBroadcast(r == me ? in.data() : chunk, chunk, n, ncclFloat32, r, comm, s));
          offset += n;
        }
      });
}

}  // namespace parlab::comm
