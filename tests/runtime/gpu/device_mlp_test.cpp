// A whole lab-mlp forward+backward on the GPU (DeviceMlp) against the CPU reference
// (model::LabMlp): same initial weights (bit for bit), then losses, logits, every boundary
// gradient and every parameter gradient within tolerance; and the GPU result bit-identical
// from run to run. Differences are relative to each tensor's scale (gpu_test::max_rel_diff).
// Tolerances: 1e-5 on the loss; 1e-4 on logits and gradients (fp32 GEMMs summed in another order
// through up to 9 layers give ~1e-6..1e-5; an indexing or layout bug gives ~1).
#include <gtest/gtest.h>

#include <vector>

#include "runtime/gpu/device.h"
#include "runtime/model/cuda/device_mlp.h"
#include "runtime/gpu/memory.h"
#include "runtime/model/lab_mlp.h"
#include "tests/runtime/gpu/gpu_test_support.h"

namespace parlab::compute::cuda {
namespace {

using gpu_test::bitwise_equal;
using gpu_test::max_rel_diff;
using gpu_test::report;
using model::LabMlp;
using model::MlpShape;

struct Batch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

Batch make_batch(const MlpShape& shape, int64_t B, uint64_t seed) {
  return {gpu_test::random_normal(B * shape.hidden, seed), gpu_test::random_labels(B, shape.classes, seed + 1)};
}

// CPU reference: one microbatch of `batch` out of `global_batch`, forward then backward.
model::MicrobatchState cpu_step(LabMlp& model, const Batch& batch, int64_t global_batch) {
  const int64_t B = static_cast<int64_t>(batch.labels.size());
  model::MicrobatchState mb = model.new_microbatch(B, global_batch);
  std::copy(batch.x.begin(), batch.x.end(), mb.activation(0).begin());
  std::copy(batch.labels.begin(), batch.labels.end(), mb.labels().begin());
  model.forward(mb);
  model.backward(mb);
  return mb;
}

void gpu_step(DeviceMlp& model, const Batch& batch, int64_t global_batch) {
  model.set_microbatch(batch.x, batch.labels, global_batch);
  model.forward();
  model.backward();
}

std::vector<float> grads_of(const DeviceMlp& model) {
  std::vector<float> g(static_cast<size_t>(model.layout().numel()));
  model.download_grads(g);
  return g;
}

void compare_with_cpu(const MlpShape& shape, int64_t B, int64_t global_batch) {
  LabMlp cpu(shape, 7);
  DeviceMlp gpu = DeviceMlp::from_seed(shape, 7, B, 0);
  // Same initial weights, bit for bit.
  std::vector<float> params(cpu.params().size());
  gpu.download_params(params);
  ASSERT_TRUE(bitwise_equal(params, {cpu.params().begin(), cpu.params().end()}));

  const Batch batch = make_batch(shape, B, 100);
  model::MicrobatchState mb = cpu_step(cpu, batch, global_batch);
  gpu_step(gpu, batch, global_batch);

  const double dloss = std::abs(gpu.loss_sum() - mb.loss_sum()) / std::abs(mb.loss_sum());
  report("loss sum", dloss, 1e-5);
  EXPECT_LT(dloss, 1e-5);
  const double dlogits = max_rel_diff(gpu.logits(), {mb.logits().begin(), mb.logits().end()});
  report("logits", dlogits, 1e-4);
  EXPECT_LT(dlogits, 1e-4);
  const double dx0 = max_rel_diff(gpu.dactivation(0), {mb.dactivation(0).begin(), mb.dactivation(0).end()});
  report("dactivation(0) (input gradient)", dx0, 1e-4);
  EXPECT_LT(dx0, 1e-4);

  const std::vector<float> g = grads_of(gpu);
  double worst = 0.0;
  for (const model::ParamTensor& t : cpu.layout().tensors()) {
    const auto want = cpu.grad(t.name);
    const std::vector<float> got(g.begin() + t.offset, g.begin() + t.offset + t.numel);
    const double d = max_rel_diff(got, {want.begin(), want.end()});
    worst = std::max(worst, d);
    EXPECT_LT(d, 1e-4) << t.name;
  }
  report("every parameter gradient (worst)", worst, 1e-4);
}

TEST(DeviceMlp, SmallNetworkMatchesCpuLabMlp) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  compare_with_cpu({.hidden = 64, .ffn = 256, .blocks = 3, .classes = 10}, 32, 128);
}

TEST(DeviceMlp, LabMlpPresetMatchesCpuLabMlp) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  compare_with_cpu(model::lab_mlp_preset(), model::kLabMlpMicrobatch, 4 * model::kLabMlpMicrobatch);
}

// ZeRO-2/3 bindings: a model with every parameter unbound (zeros of its own) computes, once the
// layers are bound to a buffer holding the weights, exactly what the model holding them does, and
// writes its gradients into the bound buffer, not its own; an unbound tensor is refused by name.
TEST(DeviceMlp, BoundParameterAndGradientBuffersComputeLikeTheModelsOwn) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const MlpShape shape{.hidden = 64, .ffn = 128, .blocks = 2, .classes = 10};
  const int64_t B = 16;
  const Batch batch = make_batch(shape, B, 300);
  DeviceMlp own = DeviceMlp::from_seed(shape, 5, B, 0);
  gpu_step(own, batch, B);
  const std::vector<float> want = grads_of(own);

  DeviceMlp bound(shape, {}, B, 0);  // parameters zero: nothing of its own to compute with
  const LabMlp host(shape, 5);
  const model::FlatRange all{0, bound.layout().numel()};
  compute::cuda::DeviceGuard guard(0);
  compute::cuda::DeviceBuffer<float> weights(static_cast<size_t>(all.numel())), grads(static_cast<size_t>(all.numel()));
  weights.upload(host.params(), bound.stream());
  grads.zero(bound.stream());
  bound.bind_params(all, weights.span());
  bound.bind_grads(all, grads.span());
  gpu_step(bound, batch, B);
  std::vector<float> got(static_cast<size_t>(all.numel()));
  grads.download(got, bound.stream());
  EXPECT_TRUE(bitwise_equal(got, want)) << "max rel diff " << max_rel_diff(got, want);
  EXPECT_TRUE(bitwise_equal(grads_of(bound), std::vector<float>(got.size(), 0.0f))) << "its own gradients were written";

  bound.bind_params(all, {});
  bound.set_microbatch(batch.x, batch.labels, B);
  try {
    bound.forward();
    ADD_FAILURE() << "an unbound layer computed";
  } catch (const RuntimeError& e) {
    EXPECT_NE(std::string(e.what()).find("blocks.0.fc1"), std::string::npos) << e.what();
  }
}

TEST(DeviceMlp, BitIdenticalAcrossRunsAndInstances) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const MlpShape shape = model::lab_mlp_preset();
  const int64_t B = model::kLabMlpMicrobatch;
  const Batch batch = make_batch(shape, B, 200);
  DeviceMlp a = DeviceMlp::from_seed(shape, 3, B, 0);
  gpu_step(a, batch, B);
  const std::vector<float> first = grads_of(a);
  const std::vector<float> first_losses = a.losses();
  a.zero_grads();
  gpu_step(a, batch, B);
  EXPECT_TRUE(bitwise_equal(grads_of(a), first)) << "second run on the same model differs";
  EXPECT_TRUE(bitwise_equal(a.losses(), first_losses));
  DeviceMlp b = DeviceMlp::from_seed(shape, 3, B, 0);  // new stream, cuBLAS handle, workspace
  gpu_step(b, batch, B);
  EXPECT_TRUE(bitwise_equal(grads_of(b), first)) << "a fresh instance differs";
}

TEST(DeviceMlp, MicrobatchGradientsSumToTheFullBatch) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  // With loss scale 1/global_batch, two microbatches of 16 accumulate the gradient of one
  // batch of 32 (the property DDP and gradient accumulation rely on).
  const MlpShape shape{.hidden = 32, .ffn = 64, .blocks = 2, .classes = 5};
  const Batch full = make_batch(shape, 32, 300);
  const Batch first{{full.x.begin(), full.x.begin() + 16 * 32}, {full.labels.begin(), full.labels.begin() + 16}};
  const Batch second{{full.x.begin() + 16 * 32, full.x.end()}, {full.labels.begin() + 16, full.labels.end()}};
  DeviceMlp whole = DeviceMlp::from_seed(shape, 5, 32, 0);
  gpu_step(whole, full, 32);
  DeviceMlp split = DeviceMlp::from_seed(shape, 5, 32, 0);
  gpu_step(split, first, 32);
  gpu_step(split, second, 32);
  const double d = max_rel_diff(grads_of(split), grads_of(whole));
  report("2 x 16 accumulated vs 32", d, 1e-5);
  EXPECT_LT(d, 1e-5);
}

TEST(DeviceMlp, SlotsKeepEachMicrobatchSoForwardsMayRunBeforeTheirBackwards) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  // GPipe order (F0 F1 B1 B0) on two slots gives the gradients of the sequential order on one
  // slot (F0 B0 F1 B1): each slot kept its own activations.
  const MlpShape shape{.hidden = 32, .ffn = 64, .blocks = 2, .classes = 5};
  const Batch full = make_batch(shape, 32, 301);
  const Batch first{{full.x.begin(), full.x.begin() + 16 * 32}, {full.labels.begin(), full.labels.begin() + 16}};
  const Batch second{{full.x.begin() + 16 * 32, full.x.end()}, {full.labels.begin() + 16, full.labels.end()}};
  DeviceMlp sequential = DeviceMlp::from_seed(shape, 5, 16, 0);
  gpu_step(sequential, first, 32);
  gpu_step(sequential, second, 32);
  DeviceMlp piped(shape, LabMlp(shape, 5).params(), 16, 0, /*slots=*/2);
  piped.select_slot(0);
  piped.set_microbatch(first.x, first.labels, 32);
  piped.forward();
  piped.select_slot(1);
  piped.set_microbatch(second.x, second.labels, 32);
  piped.forward();
  piped.backward();
  piped.select_slot(0);
  piped.backward();
  // Only the order in which the two microbatches add onto the gradients differs (cuBLAS's beta = 1
  // addition); a slot that shared activations would be off by O(1).
  const double d = max_rel_diff(grads_of(piped), grads_of(sequential));
  report("F0 F1 B1 B0 on two slots vs F0 B0 F1 B1", d, 1e-6);
  EXPECT_LT(d, 1e-6);
  EXPECT_THROW(piped.select_slot(2), RuntimeError);
}

TEST(DeviceMlp, RejectsBadInputOnTheHost) {
  PARLAB_REQUIRE_CUDA_DEVICES(1);
  const MlpShape shape{.hidden = 4, .ffn = 8, .blocks = 1, .classes = 3};
  DeviceMlp m = DeviceMlp::from_seed(shape, 1, 2, 0);
  const std::vector<float> x(8, 0.0f);
  EXPECT_THROW(m.set_microbatch(x, std::vector<int32_t>{0, 3}, 2), ConfigError);  // label 3
  EXPECT_THROW(m.set_microbatch(std::vector<float>(12), std::vector<int32_t>{0, 1, 2}, 3),
               ConfigError);                        // 3 > max_batch
  EXPECT_THROW(m.backward_layer(0), RuntimeError);  // before any forward
  m.set_microbatch(x, std::vector<int32_t>{0, 1}, 2);
  EXPECT_THROW(m.backward_layer(1), RuntimeError);                           // head backward before head forward
  EXPECT_THROW(DeviceMlp(shape, std::vector<float>(5), 2, 0), ConfigError);  // wrong count
}

}  // namespace
}  // namespace parlab::compute::cuda
