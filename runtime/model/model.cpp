#include "runtime/model/model.h"

#include <algorithm>
#include <string>

#include "base/errors.h"

namespace parlab::model {

namespace {

[[noreturn]] void no_slices(const Model& m) {
  throw RuntimeError("the " + std::string(m.device_name()) +
                     " model holds whole layers: tensor-parallel slices are not implemented there");
}

}  // namespace

namespace {

class HostBuffer final : public ComputeBuffer {
 public:
  HostBuffer(int64_t n, MemoryAccount* account, MemoryCategory category, BufferInit init)
      : allocator_(account, category), size_(static_cast<size_t>(n)), values_(allocator_.allocate(size_)) {
    if (init == BufferInit::kZero) std::fill_n(values_, size_, 0.0f);
  }
  ~HostBuffer() override { allocator_.deallocate(values_, size_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  std::span<float> span() override { return {values_, size_}; }

 private:
  CountingAllocator<float> allocator_;
  size_t size_;
  float* values_;
};

void check_sizes(size_t a, size_t b, const char* what) {
  if (a != b)
    throw RuntimeError(std::string(what) + ": " + std::to_string(a) + " elements against " + std::to_string(b));
}

}  // namespace

std::unique_ptr<ComputeBuffer> Model::make_compute_buffer(int64_t elements, MemoryAccount* account,
                                                          MemoryCategory category, BufferInit init) {
  return std::make_unique<HostBuffer>(elements, account, category, init);
}

void Model::compute_accumulate(std::span<float> dst, std::span<const float> src) {
  check_sizes(dst.size(), src.size(), "compute_accumulate");
  for (size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
}

void Model::compute_copy(std::span<float> dst, std::span<const float> src) {
  check_sizes(dst.size(), src.size(), "compute_copy");
  std::copy(src.begin(), src.end(), dst.begin());
}

std::span<float> Model::compute_boundary(int l, bool gradient, MicrobatchState& mb) {
  return gradient ? mb.dactivation(l) : mb.activation(l);
}

void Model::release_microbatch(MicrobatchState& mb) { mb.release_activations(); }

void Model::compute_to_host(std::span<float> host, std::span<const float> compute) {
  check_sizes(host.size(), compute.size(), "compute_to_host");
  std::copy(compute.begin(), compute.end(), host.begin());
}

void Model::compute_from_host(std::span<float> compute, std::span<const float> host) {
  check_sizes(compute.size(), host.size(), "compute_from_host");
  std::copy(host.begin(), host.end(), compute.begin());
}

void Model::compute_zero(std::span<float> compute) { std::fill(compute.begin(), compute.end(), 0.0f); }

void Model::tp_finish_forward(int, MicrobatchState&, int64_t, int64_t) const { no_slices(*this); }
void Model::tp_finish_backward(int, MicrobatchState&, int64_t, int64_t) { no_slices(*this); }

}  // namespace parlab::model
