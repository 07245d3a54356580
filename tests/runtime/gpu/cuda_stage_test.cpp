// Tensor-parallel slices and pipeline stages (one span, or interleaved chunks) of the CUDA model
// on ONE GPU, against the whole network on the CPU (model::LabMlp). The test plays the executor
// on the device boundary tensors (compute_boundary): it sums the slices' partial sums (the TP
// all-reduce) and calls the finishes, or hands a stage's boundary tensor to the next stage. Each slice's parameters
// come from the host LabMlp slice (counter RNG at global positions); every local gradient element is compared with the
// whole network's at LabMlp::tp_global_offset, every stage's gradient at its global flat offset. Tolerance 1e-4
// relative to each tensor's scale, as device_mlp_test.cpp (an offset or slicing bug gives ~1).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/model/cuda/cuda_model.h"
#include "runtime/model/lab_mlp.h"
#include "tests/runtime/gpu/gpu_test_support.h"

namespace parlab::compute::cuda {
namespace {

using gpu_test::max_rel_diff;
using gpu_test::report;
using model::LabMlp;
using model::MicrobatchState;

constexpr double kTolerance = 1e-4;
constexpr int64_t kBatch = 8;
constexpr uint64_t kSeed = 11;

model::MlpShape tiny_shape() {
  model::MlpShape s;
  s.hidden = 32;
  s.ffn = 64;
  s.blocks = 3;
  s.classes = 10;
  return s;
}

void fill(MicrobatchState& mb, const model::MlpShape& shape) {
  const std::vector<float> x = gpu_test::random_normal(kBatch * shape.hidden, 300);
  const std::vector<int32_t> labels = gpu_test::random_labels(kBatch, shape.classes, 301);
  std::copy(x.begin(), x.end(), mb.activation(0).begin());
  std::copy(labels.begin(), labels.end(), mb.labels().begin());
}

std::vector<float> vec(std::span<const float> s) { return {s.begin(), s.end()}; }

// A device boundary tensor, to the host and back.
std::vector<float> download(CudaModel& gpu, MicrobatchState& mb, int l, bool gradient) {
  const std::span<float> d = gpu.compute_boundary(l, gradient, mb);
  std::vector<float> h(d.size());
  gpu.compute_to_host(h, d);
  return h;
}

void upload(CudaModel& gpu, MicrobatchState& mb, int l, bool gradient, const std::vector<float>& h) {
  gpu.compute_from_host(gpu.compute_boundary(l, gradient, mb), h);
}

// The CPU's whole-network step on the same data.
struct CpuRun {
  LabMlp model;
  MicrobatchState mb;
  CpuRun(const model::MlpShape& shape) : model(shape, kSeed), mb(model.new_microbatch(kBatch, kBatch)) {
    fill(mb, shape);
    model.zero_grads();
    model.forward(mb);
    model.backward(mb);
  }
};

TEST(CudaStage, TensorParallelSlicesOnOneGpuMatchTheWholeCpuNetwork) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const model::MlpShape shape = tiny_shape();
  const int L = static_cast<int>(shape.blocks);
  CpuRun cpu(shape);
  std::vector<std::unique_ptr<LabMlp>> hosts;
  std::vector<std::unique_ptr<CudaModel>> gpus;
  std::vector<MicrobatchState> mbs;
  for (int r = 0; r < 2; ++r) {
    hosts.push_back(std::make_unique<LabMlp>(shape, kSeed, 0, L + 1, model::ModelStorage{}, model::TpSlice{r, 2}));
    gpus.push_back(std::make_unique<CudaModel>(*hosts[r], kBatch, 1, 0));
    ASSERT_EQ(gpus[r]->tp_slice().size, 2);
    gpus[r]->zero_grads();
    mbs.push_back(hosts[r]->new_microbatch(kBatch, kBatch));
    fill(mbs[r], shape);
  }
  // The TP all-reduce of a device boundary tensor, through the host: both slices get the sum.
  auto all_reduce = [&](bool gradient, int l) {
    std::vector<float> a = download(*gpus[0], mbs[0], l, gradient);
    const std::vector<float> b = download(*gpus[1], mbs[1], l, gradient);
    for (size_t k = 0; k < a.size(); ++k) a[k] += b[k];
    for (int r = 0; r < 2; ++r) upload(*gpus[r], mbs[r], l, gradient, a);
  };
  for (int l = 0; l < L; ++l) {
    for (int r = 0; r < 2; ++r) gpus[r]->forward_layer(l, mbs[r]);
    all_reduce(false, l + 1);
    for (int r = 0; r < 2; ++r) gpus[r]->tp_finish_forward(l, mbs[r], 0, kBatch);
  }
  for (int r = 0; r < 2; ++r) gpus[r]->forward_layer(L, mbs[r]);
  const double dlogits = max_rel_diff(vec(mbs[0].logits()), vec(cpu.mb.logits()));
  report("tp=2 logits vs the whole CPU network", dlogits, kTolerance);
  EXPECT_LT(dlogits, kTolerance);
  for (int r = 0; r < 2; ++r) gpus[r]->backward_layer(L, mbs[r]);
  for (int l = L - 1; l >= 0; --l) {
    for (int r = 0; r < 2; ++r) gpus[r]->backward_layer(l, mbs[r]);
    all_reduce(true, l);
    for (int r = 0; r < 2; ++r) gpus[r]->tp_finish_backward(l, mbs[r], 0, kBatch);
  }
  const double dx0 = max_rel_diff(download(*gpus[1], mbs[1], 0, true), vec(cpu.mb.dactivation(0)));
  report("tp=2 dactivation(0)", dx0, kTolerance);
  EXPECT_LT(dx0, kTolerance);
  for (int r = 0; r < 2; ++r) {
    gpus[r]->synchronize();
    gpus[r]->pull_grads(hosts[r]->owned_range());
    const model::ParamLayout& local = hosts[r]->layout();
    for (size_t i = 0; i < local.tensors().size(); ++i) {
      const model::ParamTensor& t = local.tensors()[i];
      const model::ParamTensor& g = cpu.model.layout().tensors()[i];
      std::vector<float> got, want;
      for (int64_t j = 0; j < t.numel; ++j) {
        got.push_back(hosts[r]->grads()[static_cast<size_t>(t.offset + j)]);
        want.push_back(cpu.model.grads()[static_cast<size_t>(LabMlp::tp_global_offset(t, g, j, {r, 2}))]);
      }
      const double d = max_rel_diff(got, want);
      EXPECT_LT(d, kTolerance) << "slice " << r << " gradient of " << t.name;
    }
  }
}

TEST(CudaStage, TwoPipelineStagesOnOneGpuMatchTheWholeCpuNetwork) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const model::MlpShape shape = tiny_shape();
  const int L = static_cast<int>(shape.blocks);
  const int cut = 2;  // stage 0: blocks 0, 1; stage 1: block 2 and the head
  CpuRun cpu(shape);
  LabMlp host0(shape, kSeed, 0, cut), host1(shape, kSeed, cut, L + 1);
  CudaModel gpu0(host0, kBatch, 1, 0), gpu1(host1, kBatch, 1, 0);
  ASSERT_FALSE(gpu0.packed() || gpu1.packed());
  ASSERT_EQ(gpu1.compute_params().size(), host1.params().size());
  gpu0.zero_grads();
  gpu1.zero_grads();
  MicrobatchState mb0 = host0.new_microbatch(kBatch, kBatch), mb1 = host1.new_microbatch(kBatch, kBatch);
  fill(mb0, shape);
  fill(mb1, shape);  // the last stage reads the labels
  for (int l = 0; l < cut; ++l) gpu0.forward_layer(l, mb0);
  upload(gpu1, mb1, cut, false, download(gpu0, mb0, cut, false));  // the send
  for (int l = cut; l <= L; ++l) gpu1.forward_layer(l, mb1);
  const double dlogits = max_rel_diff(vec(mb1.logits()), vec(cpu.mb.logits()));
  report("pp=2 logits vs the whole CPU network", dlogits, kTolerance);
  EXPECT_LT(dlogits, kTolerance);
  for (int l = L; l >= cut; --l) gpu1.backward_layer(l, mb1);
  upload(gpu0, mb0, cut, true, download(gpu1, mb1, cut, true));
  for (int l = cut - 1; l >= 0; --l) gpu0.backward_layer(l, mb0);
  const double dx0 = max_rel_diff(download(gpu0, mb0, 0, true), vec(cpu.mb.dactivation(0)));
  report("pp=2 dactivation(0)", dx0, kTolerance);
  EXPECT_FALSE(mb0.has_activation(cut) || mb1.has_activation(cut)) << "a boundary went through the host state";
  EXPECT_LT(dx0, kTolerance);
  for (auto [host, gpu] : {std::pair{&host0, &gpu0}, std::pair{&host1, &gpu1}}) {
    gpu->synchronize();
    gpu->pull_grads(host->owned_range());
    const model::FlatRange o = host->owned_range();
    const std::vector<float> want(cpu.model.grads().begin() + o.begin, cpu.model.grads().begin() + o.end);
    const double d = max_rel_diff(vec(host->grads()), want);
    report("stage [" + std::to_string(host->first_layer()) + ", " + std::to_string(host->end_layer()) + ") gradients",
           d, kTolerance);
    EXPECT_LT(d, kTolerance);
  }
  // The stage's parameters on the GPU are the host's at their global offsets.
  std::vector<float> on_gpu(host1.params().size());
  gpu1.compute_to_host(on_gpu, gpu1.compute_params());
  EXPECT_EQ(on_gpu, vec(host1.params()));
}

// Interleaved: stage 0 holds layers {0, 2}, stage 1 {1, 3 (the head)}; the packed flat buffers hold
// each chunk's tensors one after the other (lab_mlp.h), bound into the device model at the host's
// positions. Every boundary crosses between the stages.
TEST(CudaStage, InterleavedChunksOnOneGpuMatchTheWholeCpuNetwork) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const model::MlpShape shape = tiny_shape();
  const int L = static_cast<int>(shape.blocks);
  ASSERT_EQ(L, 3);
  CpuRun cpu(shape);
  LabMlp host0(shape, kSeed, {{0, 1}, {2, 3}}, model::ModelStorage{}, model::TpSlice{});
  LabMlp host1(shape, kSeed, {{1, 2}, {3, 4}}, model::ModelStorage{}, model::TpSlice{});
  CudaModel gpu0(host0, kBatch, 1, 0), gpu1(host1, kBatch, 1, 0);
  ASSERT_TRUE(gpu0.packed() && gpu1.packed());
  ASSERT_EQ(gpu0.compute_params().size(), host0.params().size());
  gpu0.zero_grads();
  gpu1.zero_grads();
  MicrobatchState mb0 = host0.new_microbatch(kBatch, kBatch), mb1 = host1.new_microbatch(kBatch, kBatch);
  fill(mb0, shape);
  fill(mb1, shape);
  CudaModel* stage_of[] = {&gpu0, &gpu1, &gpu0, &gpu1};
  MicrobatchState* mb_of[] = {&mb0, &mb1, &mb0, &mb1};
  for (int l = 0; l <= L; ++l) {
    if (l > 0) upload(*stage_of[l], *mb_of[l], l, false, download(*stage_of[l - 1], *mb_of[l - 1], l, false));
    stage_of[l]->forward_layer(l, *mb_of[l]);
  }
  const double dlogits = max_rel_diff(vec(mb1.logits()), vec(cpu.mb.logits()));
  report("interleaved logits vs the whole CPU network", dlogits, kTolerance);
  EXPECT_LT(dlogits, kTolerance);
  for (int l = L; l >= 0; --l) {
    if (l < L) upload(*stage_of[l], *mb_of[l], l + 1, true, download(*stage_of[l + 1], *mb_of[l + 1], l + 1, true));
    stage_of[l]->backward_layer(l, *mb_of[l]);
  }
  for (auto [host, gpu] : {std::pair{&host0, &gpu0}, std::pair{&host1, &gpu1}}) {
    gpu->synchronize();
    gpu->pull_grads(host->owned_range());
    for (const model::ParamTensor& t : host->layout().tensors()) {
      const int64_t at = host->position(t);
      if (at < 0) continue;
      const auto local = static_cast<size_t>(at - host->owned_range().begin);
      const std::vector<float> got(host->grads().begin() + local, host->grads().begin() + local + t.numel);
      const std::vector<float> want(cpu.model.grads().begin() + t.offset,
                                    cpu.model.grads().begin() + t.offset + t.numel);
      EXPECT_LT(max_rel_diff(got, want), kTolerance) << t.name;
    }
  }
}

}  // namespace
}  // namespace parlab::compute::cuda
