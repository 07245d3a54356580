// lab-mlp forward/backward against an independent naive double-precision reference written here
// (per-sample loops, no BLAS, std::tanh), and against central finite differences of that
// reference's loss. Each comparison prints its largest relative difference.
#include "runtime/model/lab_mlp.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/compute/counter_rng.h"
#include "runtime/compute/cpu/matmul.h"
#include "base/errors.h"

namespace parlab::model {
namespace {

const MlpShape kTiny{.hidden = 6, .ffn = 10, .blocks = 2, .classes = 3};

// ---- naive double reference --------------------------------------------------------------
// Parameters are read from a flat vector with the PyTorch layout written out by hand here:
// per block [fc1.weight (f,h) | fc1.bias (f) | fc2.weight (h,f) | fc2.bias (h)], then
// [head.weight (C,h) | head.bias (C)].
struct Reference {
  MlpShape s;
  int64_t block_numel() const { return 2 * s.hidden * s.ffn + s.ffn + s.hidden; }

  static double gelu(double x) {
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  }
  static double dgelu(double x) {
    const double k = std::sqrt(2.0 / M_PI), t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * k * (1.0 + 3.0 * 0.044715 * x * x);
  }

  // Loss = (1/G) sum_b CE(sample b); if grad != null, writes dLoss/dparams (overwrites).
  double loss(const std::vector<double>& p, const std::vector<float>& X, const std::vector<int32_t>& y, int64_t B,
              double G, std::vector<double>* grad) const {
    const int64_t h = s.hidden, f = s.ffn, C = s.classes, L = s.blocks;
    if (grad != nullptr) grad->assign(p.size(), 0.0);
    double total = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      // forward, keeping every intermediate
      std::vector<std::vector<double>> xs(L + 1, std::vector<double>(h)), pre(L), post(L);
      for (int64_t k = 0; k < h; ++k) xs[0][k] = X[b * h + k];
      for (int64_t l = 0; l < L; ++l) {
        const double* W1 = &p[l * block_numel()];
        const double* b1 = W1 + f * h;
        const double* W2 = b1 + f;
        const double* b2 = W2 + h * f;
        pre[l].assign(f, 0.0);
        post[l].assign(f, 0.0);
        for (int64_t j = 0; j < f; ++j) {
          double a = b1[j];
          for (int64_t k = 0; k < h; ++k) a += W1[j * h + k] * xs[l][k];
          pre[l][j] = a;
          post[l][j] = gelu(a);
        }
        for (int64_t k = 0; k < h; ++k) {
          double a = b2[k];
          for (int64_t j = 0; j < f; ++j) a += W2[k * f + j] * post[l][j];
          xs[l + 1][k] = xs[l][k] + a;
        }
      }
      const double* Wh = &p[L * block_numel()];
      const double* bh = Wh + C * h;
      std::vector<double> logits(C);
      double mx = -1e300;
      for (int64_t c = 0; c < C; ++c) {
        double a = bh[c];
        for (int64_t k = 0; k < h; ++k) a += Wh[c * h + k] * xs[L][k];
        logits[c] = a;
        mx = std::max(mx, a);
      }
      double sum = 0.0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(logits[c] - mx);
      total += (std::log(sum) + mx - logits[y[b]]) / G;
      if (grad == nullptr) continue;

      // backward of this sample
      double* g = grad->data();
      std::vector<double> dx(h, 0.0);
      double* gWh = g + L * block_numel();
      double* gbh = gWh + C * h;
      for (int64_t c = 0; c < C; ++c) {
        const double dlogit = (std::exp(logits[c] - mx) / sum - (c == y[b] ? 1.0 : 0.0)) / G;
        gbh[c] += dlogit;
        for (int64_t k = 0; k < h; ++k) {
          gWh[c * h + k] += dlogit * xs[L][k];
          dx[k] += dlogit * Wh[c * h + k];
        }
      }
      for (int64_t l = L - 1; l >= 0; --l) {
        const double* W1 = &p[l * block_numel()];
        const double* W2 = W1 + f * h + f;
        double* gW1 = g + l * block_numel();
        double* gb1 = gW1 + f * h;
        double* gW2 = gb1 + f;
        double* gb2 = gW2 + h * f;
        std::vector<double> dpost(f, 0.0), dnext = dx;  // dx carries the residual path
        for (int64_t k = 0; k < h; ++k) {
          gb2[k] += dnext[k];
          for (int64_t j = 0; j < f; ++j) {
            gW2[k * f + j] += dnext[k] * post[l][j];
            dpost[j] += dnext[k] * W2[k * f + j];
          }
        }
        for (int64_t j = 0; j < f; ++j) {
          const double dpre = dpost[j] * dgelu(pre[l][j]);
          gb1[j] += dpre;
          for (int64_t k = 0; k < h; ++k) {
            gW1[j * h + k] += dpre * xs[l][k];
            dx[k] += dpre * W1[j * h + k];
          }
        }
      }
    }
    return total;
  }
};

// A microbatch of B deterministic inputs and labels.
void fill_inputs(MicrobatchState& mb, uint64_t seed, int64_t first_sample = 0) {
  const compute::CounterRng rng(seed, compute::RngStream::kDataInput);
  const int64_t h = kTiny.hidden;
  std::span<float> x = mb.activation(0);
  for (int64_t i = 0; i < mb.batch() * h; ++i) {
    x[i] = static_cast<float>(rng.normal(first_sample * h + i));
  }
  for (int64_t b = 0; b < mb.batch(); ++b) {
    mb.labels()[b] = static_cast<int32_t>((first_sample + b) % kTiny.classes);
  }
}

std::vector<float> inputs_of(MicrobatchState& mb) { return {mb.activation(0).begin(), mb.activation(0).end()}; }

double max_rel_diff(std::span<const float> a, const std::vector<double>& b, double floor) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::abs(a[i] - b[i]) / std::max(std::abs(b[i]), floor));
  }
  return worst;
}

TEST(LabMlpTest, MatchesNaiveDoubleReference) {
  LabMlp model(kTiny, 1234);
  const int64_t B = 5, G = 8;  // G != B: the 1/global_batch scale is checked too
  MicrobatchState mb = model.new_microbatch(B, G);
  fill_inputs(mb, 1);
  const double loss_sum = model.forward(mb);
  model.backward(mb);

  const Reference ref{kTiny};
  const std::vector<double> p(model.params().begin(), model.params().end());
  std::vector<double> grad;
  const double ref_loss = ref.loss(p, inputs_of(mb), {mb.labels().begin(), mb.labels().end()}, B, G, &grad);
  std::printf("  loss: model %.9f  reference %.9f\n", loss_sum / G, ref_loss);
  EXPECT_NEAR(loss_sum / G, ref_loss, 1e-6 * ref_loss);
  for (const ParamTensor& t : model.layout().tensors()) {
    const std::vector<double> want(grad.begin() + t.offset, grad.begin() + t.offset + t.numel);
    const double diff = max_rel_diff(model.grad(t.name), want, 1e-3);
    std::printf("  %-22s max rel diff %.3g\n", t.name.c_str(), diff);
    EXPECT_LT(diff, 1e-4) << t.name;
  }
}

TEST(LabMlpTest, GradientMatchesCentralFiniteDifferences) {
  LabMlp model(kTiny, 99);
  const int64_t B = 4;
  MicrobatchState mb = model.new_microbatch(B, B);
  fill_inputs(mb, 2);
  model.forward(mb);
  model.backward(mb);

  // d loss / d p_i ~ (loss(p + e_i eps) - loss(p - e_i eps)) / (2 eps), evaluated in double at
  // the model's own fp32 parameters; truncation error O(eps^2) ~ 1e-10.
  const Reference ref{kTiny};
  const std::vector<float> x = inputs_of(mb);
  const std::vector<int32_t> y(mb.labels().begin(), mb.labels().end());
  std::vector<double> p(model.params().begin(), model.params().end());
  const double eps = 1e-5;
  std::vector<double> fd(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    const double saved = p[i];
    p[i] = saved + eps;
    const double up = ref.loss(p, x, y, B, B, nullptr);
    p[i] = saved - eps;
    const double down = ref.loss(p, x, y, B, B, nullptr);
    p[i] = saved;
    fd[i] = (up - down) / (2 * eps);
  }
  const double diff = max_rel_diff(model.grads(), fd, 1e-3);
  std::printf("  all %zu parameters: max rel diff vs finite differences %.3g\n", p.size(), diff);
  EXPECT_LT(diff, 1e-4);
}

TEST(LabMlpTest, TwoMicrobatchesAccumulateToOneBatchOfTwice) {
  const int64_t B = 3;
  LabMlp split(kTiny, 5), whole(kTiny, 5);
  for (int m = 0; m < 2; ++m) {
    MicrobatchState mb = split.new_microbatch(B, 2 * B);
    fill_inputs(mb, 3, m * B);
    split.forward(mb);
    split.backward(mb);
  }
  MicrobatchState mb = whole.new_microbatch(2 * B, 2 * B);
  fill_inputs(mb, 3, 0);
  whole.forward(mb);
  whole.backward(mb);
  std::vector<double> want(whole.grads().begin(), whole.grads().end());
  const double diff = max_rel_diff(split.grads(), want, 1e-3);
  std::printf("  2 x %lld vs 1 x %lld: max rel diff %.3g\n", (long long)B, (long long)(2 * B), diff);
  EXPECT_LT(diff, 1e-5);
}

TEST(LabMlpTest, GlobalBatchScalesGradientsExactly) {
  // Loss scale 1/G with G a power of two only changes exponents, so gradients for G = 16 are
  // exactly a quarter of those for G = 4 (same 4 samples).
  LabMlp a(kTiny, 6), b(kTiny, 6);
  MicrobatchState ma = a.new_microbatch(4, 4), mb = b.new_microbatch(4, 16);
  EXPECT_EQ(ma.loss_scale(), 0.25f);
  EXPECT_EQ(mb.loss_scale(), 0.0625f);
  fill_inputs(ma, 4);
  fill_inputs(mb, 4);
  EXPECT_EQ(a.forward(ma), b.forward(mb));  // the loss sum does not depend on the scale
  a.backward(ma);
  b.backward(mb);
  for (size_t i = 0; i < a.grads().size(); ++i) ASSERT_EQ(a.grads()[i], 4.0f * b.grads()[i]) << i;
}

TEST(LabMlpTest, EmptyMicrobatchContributesNothing) {
  LabMlp model(kTiny, 7);
  MicrobatchState full = model.new_microbatch(2, 2);
  fill_inputs(full, 5);
  model.forward(full);
  model.backward(full);
  const std::vector<float> before(model.grads().begin(), model.grads().end());
  MicrobatchState empty = model.new_microbatch(0, 2);
  EXPECT_EQ(model.forward(empty), 0.0);
  model.backward(empty);
  EXPECT_EQ(std::vector<float>(model.grads().begin(), model.grads().end()), before);
  EXPECT_TRUE(empty.dactivation(0).empty());
}

TEST(LabMlpTest, PipelineStagesReproduceTheWholeModel) {
  // Stage 0 = block 0, stage 1 = block 1 + head; boundary tensors are copied like sends/recvs.
  LabMlp whole(kTiny, 8), s0(kTiny, 8, 0, 1), s1(kTiny, 8, 1, 3);
  EXPECT_EQ(s0.owned_range(), whole.layout().layer_range(0));
  EXPECT_EQ(s1.owned_range(), whole.layout().layers_range(1, 3));
  MicrobatchState m = whole.new_microbatch(3, 3), m0 = s0.new_microbatch(3, 3), m1 = s1.new_microbatch(3, 3);
  fill_inputs(m, 6);
  fill_inputs(m0, 6);
  fill_inputs(m1, 6);  // labels; its activation(0) is never used by stage 1
  const double loss = whole.forward(m);
  s0.forward(m0);
  std::ranges::copy(m0.activation(1), m1.activation(1).begin());  // send activation(1)
  EXPECT_EQ(s1.forward(m1), loss);
  whole.backward(m);
  s1.backward(m1);
  std::ranges::copy(m1.dactivation(1), m0.dactivation(1).begin());  // send dactivation(1)
  s0.backward(m0);
  std::vector<float> joined(s0.grads().begin(), s0.grads().end());
  joined.insert(joined.end(), s1.grads().begin(), s1.grads().end());
  EXPECT_EQ(joined, std::vector<float>(whole.grads().begin(), whole.grads().end()));
  std::vector<float> params(s0.params().begin(), s0.params().end());
  params.insert(params.end(), s1.params().begin(), s1.params().end());
  EXPECT_EQ(params, std::vector<float>(whole.params().begin(), whole.params().end()));
  EXPECT_THROW(s0.forward_layer(2, m0), RuntimeError);
  EXPECT_THROW(s0.param("head.weight"), RuntimeError);
  EXPECT_EQ(s1.param("head.bias").data(), s1.params().data() + s1.params().size() - 3);
}

TEST(LabMlpTest, LayerGradientsAreFinalWhenTheirBackwardReturns) {
  LabMlp model(kTiny, 9);
  MicrobatchState mb = model.new_microbatch(2, 2);
  fill_inputs(mb, 7);
  model.forward(mb);
  const FlatRange head = model.layout().layer_range(2), block1 = model.layout().layer_range(1);
  model.backward_layer(2, mb);
  const std::vector<float> head_grads(model.grads().begin() + head.begin, model.grads().begin() + head.end);
  for (int64_t i = block1.begin; i < block1.end; ++i) ASSERT_EQ(model.grads()[i], 0.0f);
  model.backward_layer(1, mb);
  model.backward_layer(0, mb);
  EXPECT_EQ(head_grads, std::vector<float>(model.grads().begin() + head.begin, model.grads().begin() + head.end));
}

// Weight-gradient groups: 5 microbatches of 3, in groups of 3, the last not deferrable (as the
// executor says of a step's last microbatch). Blocks defer their weight gradients (held rows,
// nothing in dW yet), the third microbatch closes a group, the fifth closes the second group
// early; the gradients are the per-microbatch ones within fp32 summation order, the rows held
// are charged as activations, and a group never asked to defer computes exactly as no group.
std::vector<float> grouped_grads(int group, bool defer, bool mixed, MemoryAccount* account, bool check_pending) {
  LabMlp model(kTiny, 21, 0, kTiny.num_layers(),
               ModelStorage{.account = account, .mixed_precision = mixed, .weight_grad_group = group});
  const int64_t B = 3;
  const FlatRange w1 = model.layout().find("blocks.0.fc1.weight").range();
  const auto dw1_zero = [&] {
    return std::all_of(model.grads().begin() + w1.begin, model.grads().begin() + w1.end,
                       [](float g) { return g == 0; });
  };
  for (int m = 0; m < 5; ++m) {
    MicrobatchState mb = model.new_microbatch(B, 5 * B);
    fill_inputs(mb, 31, m * B);
    model.forward(mb);
    model.set_weight_grads_deferrable(defer && m < 4);
    model.backward(mb);
    if (!check_pending) continue;
    const bool open = m == 0 || m == 1 || m == 3;  // groups {0, 1, 2} and {3, 4}
    EXPECT_EQ(model.weight_grads_pending(), open) << "after microbatch " << m;
    // Per range (what a bucket's collective reads): a block's weights are pending, not the head.
    EXPECT_EQ(model.weight_grads_pending(w1), open) << "after microbatch " << m;
    EXPECT_FALSE(model.weight_grads_pending(model.layout().layer_range(kTiny.blocks))) << "the head never defers";
    EXPECT_FALSE(model.weight_grads_pending(model.layout().find("blocks.0.fc1.bias").range())) << "biases never defer";
    if (m == 0) {
      EXPECT_TRUE(dw1_zero()) << "a deferred weight gradient is not in the buffer yet";
    }
    if (m == 2) {
      EXPECT_FALSE(dw1_zero()) << "the group's products ran when it closed";
    }
  }
  return {model.grads().begin(), model.grads().end()};
}

TEST(LabMlpTest, WeightGradGroupsSumTheSameGradients) {
  for (const bool mixed : {false, true}) {
    if (mixed && !compute::cpu::bf16_supported()) {
      std::printf("  mixed: skipped (%s)\n", std::string(compute::cpu::bf16_unsupported_reason()).c_str());
      continue;
    }
    MemoryAccount account;
    const std::vector<float> plain = grouped_grads(1, true, mixed, nullptr, false);
    const std::vector<float> grouped = grouped_grads(3, true, mixed, &account, true);
    const std::vector<double> want(plain.begin(), plain.end());
    const double diff = max_rel_diff(grouped, want, 1e-3);
    std::printf("  %s: groups of 3 vs one product a microbatch: max rel diff %.3g\n", mixed ? "mixed" : "fp32", diff);
    EXPECT_LT(diff, mixed ? 1e-4 : 1e-5);
    EXPECT_NE(grouped, plain) << "the grouped products must have run (another summation order)";
    // Rows held: 2 blocks x 3 microbatches x 3 rows x 2 (h + f) elements, 4 bytes (bf16: 2).
    const int64_t rows_bytes = 2 * 3 * 3 * 2 * (kTiny.hidden + kTiny.ffn) * (mixed ? 2 : 4);
    EXPECT_EQ(account.current(MemoryCategory::kActivations), 0) << "the model is gone: so are its rows";
    EXPECT_GE(account.peak(MemoryCategory::kActivations), rows_bytes);
    EXPECT_EQ(grouped_grads(3, false, mixed, nullptr, false), plain)
        << "never deferred: the plain products, bit for bit";
    EXPECT_EQ(grouped_grads(3, true, mixed, nullptr, false), grouped) << "run to run";
  }
}

// Mixed precision makes a weight's two bf16 copies in one pass where the weights stay for the
// backward (both on its layer's first forward), or each when its product first needs it (a ZeRO-3
// rank, per pass): the same bits either way, on a shape whose copies are oneDNN's packed layout
// where this CPU reads that, and on one whose are not.
TEST(LabMlpTest, Bf16CopiesMadeTogetherOrPerPassComputeTheSame) {
  if (!compute::cpu::bf16_supported()) {
    GTEST_SKIP() << compute::cpu::bf16_unsupported_reason();
  }
  for (const MlpShape& shape : {MlpShape{.hidden = 64, .ffn = 128, .blocks = 2, .classes = 3}, kTiny}) {
    struct Run {
      std::vector<float> grads;
      int64_t copies_after_forward = 0, copies_after_backward = 0;
    };
    const auto run = [&](bool per_pass) {
      LabMlp model(shape, 23, 0, shape.num_layers(), ModelStorage{.mixed_precision = true});
      model.set_bf16_copies_per_pass(per_pass);
      MicrobatchState mb = model.new_microbatch(4, 4);
      fill_inputs(mb, 33, 0);
      model.forward(mb);
      Run r;
      r.copies_after_forward = model.bf16_copies_made();
      model.backward(mb);
      r.copies_after_backward = model.bf16_copies_made();
      r.grads.assign(model.grads().begin(), model.grads().end());
      return r;
    };
    const Run together = run(false), per_pass = run(true);
    const int64_t weights = 2 * shape.blocks;
    EXPECT_EQ(together.copies_after_forward, 2 * weights) << "both copies on the first forward";
    EXPECT_EQ(per_pass.copies_after_forward, weights) << "the forward's only";
    EXPECT_EQ(together.copies_after_backward, 2 * weights);
    EXPECT_EQ(per_pass.copies_after_backward, 2 * weights);
    EXPECT_EQ(together.grads, per_pass.grads) << shape.hidden << " x " << shape.ffn;
  }
}

// With groups, zero_grads leaves a block weight's gradient to the step's first product, which
// writes it (llm.c's rule). Nothing of the last step may leak: a second step's gradients are those
// of the same step on a fresh model, bit for bit, whether its first product is a group's or a
// plain one (nothing deferred); read before any product, the gradients are zeros; and a step of
// one empty microbatch leaves zeros.
TEST(LabMlpTest, TheStepsFirstWeightGradientProductWritesWhatZeroGradsLeft) {
  for (const bool mixed : {false, true}) {
    if (mixed && !compute::cpu::bf16_supported()) continue;
    const ModelStorage storage{.mixed_precision = mixed, .weight_grad_group = 3};
    const auto step = [](LabMlp& model, int first, bool defer, bool clear = true) {
      if (clear) model.zero_grads();
      for (int m = 0; m < 3; ++m) {
        MicrobatchState mb = model.new_microbatch(3, 9);
        fill_inputs(mb, 31, (first + m) * 3);
        model.forward(mb);
        model.set_weight_grads_deferrable(defer && m < 2);
        model.backward(mb);
      }
      return std::vector<float>(model.grads().begin(), model.grads().end());
    };
    const auto nonzero = [](const std::vector<float>& g) {
      return std::count_if(g.begin(), g.end(), [](float x) { return x != 0.0f; });
    };
    for (const bool defer : {true, false}) {
      LabMlp used(kTiny, 21, 0, kTiny.num_layers(), storage), fresh(kTiny, 21, 0, kTiny.num_layers(), storage);
      ASSERT_GT(nonzero(step(used, 0, true)), 0);
      EXPECT_EQ(step(used, 5, defer), step(fresh, 5, defer)) << (mixed ? "mixed" : "fp32") << ", defer " << defer;
    }
    LabMlp used(kTiny, 21, 0, kTiny.num_layers(), storage);
    step(used, 0, true);
    used.zero_grads();
    EXPECT_EQ(nonzero({used.grads().begin(), used.grads().end()}), 0) << "read before any product";
    // A bucket's gradients read alone (a collective's) are zeros too, the rest left to their products.
    step(used, 0, true);
    used.zero_grads();
    const FlatRange w1 = used.layout().find("blocks.1.fc1.weight").range();
    const std::span<float> bucket = used.compute_grads(w1);
    EXPECT_EQ(nonzero({bucket.begin(), bucket.end()}), 0) << "one bucket read before its product";
    EXPECT_THROW(used.compute_grads({0, used.owned_range().end + 1}), RuntimeError);
    LabMlp fresh(kTiny, 21, 0, kTiny.num_layers(), storage);
    EXPECT_EQ(step(used, 5, true, false), step(fresh, 5, true)) << "after a bucket's read";
    step(used, 0, true);
    used.zero_grads();
    MicrobatchState empty = used.new_microbatch(0, 9);
    used.forward(empty);
    used.set_weight_grads_deferrable(false);
    used.backward(empty);
    EXPECT_EQ(nonzero({used.grads().begin(), used.grads().end()}), 0) << "a step of one empty microbatch";
  }
}

TEST(LabMlpTest, WeightGradGroupRowsAreChargedAsTheLedgerCountsThem) {
  MemoryAccount account;
  LabMlp model(kTiny, 21, 0, kTiny.num_layers(), ModelStorage{.account = &account, .weight_grad_group = 2});
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 0) << "nothing held before a group opens";
  MicrobatchState mb(kTiny, 4, 8, &account);
  fill_inputs(mb, 3);
  model.forward(mb);
  const int64_t before = account.current(MemoryCategory::kActivations);
  model.set_weight_grads_deferrable(true);
  model.backward(mb);
  mb.release_activations();
  // Each of the 2 blocks holds 2 microbatches x 4 rows of x, dy (h wide), post, dpre (f wide).
  const int64_t rows = 2 * (2 * 4) * 2 * (kTiny.hidden + kTiny.ffn) * 4;
  EXPECT_EQ(account.current(MemoryCategory::kActivations), rows + (4 + 12 + 4) * 4)  // + labels, logits, losses
      << "before the backward: " << before;
  EXPECT_THROW(LabMlp(kTiny, 1, 0, 3, ModelStorage{.weight_grad_group = 0}), ConfigError);
}

TEST(LabMlpTest, BackwardNeedsItsForward) {
  LabMlp model(kTiny, 10);
  MicrobatchState mb = model.new_microbatch(2, 2);
  fill_inputs(mb, 8);
  EXPECT_THROW(model.backward_layer(2, mb), RuntimeError);
  model.forward(mb);
  model.backward(mb);
  EXPECT_THROW(model.backward_layer(0, mb), RuntimeError);  // saved activations were released
  MicrobatchState fresh = model.new_microbatch(2, 2);
  EXPECT_THROW(model.forward_layer(1, fresh), RuntimeError);  // activation(1) never set
  EXPECT_THROW(model.new_microbatch(3, 2), ConfigError);
}

TEST(LabMlpTest, InitIsSeededBoundedAndIndependentOfTheSplit) {
  const LabMlp a(kTiny, 11), b(kTiny, 11), c(kTiny, 12);
  EXPECT_TRUE(std::ranges::equal(a.params(), b.params()));
  EXPECT_FALSE(std::ranges::equal(a.params(), c.params()));
  for (const ParamTensor& t : a.layout().tensors()) {
    // U(+-1/sqrt(fan_in)) as nn.Linear, the residual-stream writer fc2 scaled by 1/sqrt(L) (L = 2).
    const bool residual = t.name.find(".fc2.") != std::string::npos;
    const float bound = (residual ? 1.0f / std::sqrt(2.0f) : 1.0f) / std::sqrt(static_cast<float>(t.fan_in));
    float lo = 1.0f, hi = -1.0f;
    for (int64_t j = 0; j < t.numel; ++j) {
      lo = std::min(lo, a.params()[t.offset + j]);
      hi = std::max(hi, a.params()[t.offset + j]);
    }
    EXPECT_GE(lo, -bound) << t.name;
    EXPECT_LE(hi, bound) << t.name;
    if (t.numel >= 10) {
      EXPECT_GT(hi - lo, bound) << t.name;  // actually spread, not constant
    }
  }
}

TEST(LabMlpTest, MicrobatchMemoryIsAccountedAndReleased) {
  MemoryAccount account;
  LabMlp model(kTiny, 13, 0, kTiny.num_layers(), ModelStorage{.account = &account});
  EXPECT_EQ(account.current(MemoryCategory::kParameters), model.layout().numel() * 4);
  EXPECT_EQ(account.current(MemoryCategory::kGradients), model.layout().numel() * 4);
  const int64_t B = 4;  // h 6, f 10, L 2, C 3
  MicrobatchState mb(kTiny, B, B, &account);
  fill_inputs(mb, 9);
  model.forward(mb);
  // labels 4 ints + activations 3 x (4 x 6) + saved 2 blocks x 2 x (4 x 10) + logits and probs
  // 2 x (4 x 3) + losses 4 = 4 + 72 + 160 + 24 + 4 = 264 four-byte values
  EXPECT_EQ(mb.allocated_bytes(), 264 * 4);
  EXPECT_EQ(account.current(MemoryCategory::kActivations), 264 * 4);
  model.backward(mb);
  // saved activations released (-160); of the activation gradients only dactivation(0) (+24)
  // remains, each upstream one freed by the backward that consumed it: 128 values
  EXPECT_EQ(mb.allocated_bytes(), 128 * 4);
  // Temporary at its peak: two activation gradients (the running block's input and output, 24
  // each) and the backward scratch growing from dlogits (4 x 3) to dgelu (4 x 10).
  EXPECT_LE(account.peak(MemoryCategory::kTemporary), (2 * 24 + 12 + 40) * 4);
  mb.release_activations();
  EXPECT_EQ(account.current(MemoryCategory::kActivations), (4 + 12 + 4) * 4);  // labels, logits, losses
}

// adopt_grads moves the gradients into memory the caller owns (the DP group's registered
// memory): the values come along, the layers accumulate into it, the account holds one buffer at
// every moment and releases it with the model; a wrong size or a model without gradients is refused.
TEST(LabMlpTest, AdoptedGradientsLiveInTheGivenMemoryAndAreChargedOnce) {
  MemoryAccount account;
  const int64_t bytes = LabMlp(kTiny, 13).layout().numel() * 4;
  auto storage = std::make_shared<std::vector<float>>();
  {
    LabMlp model(kTiny, 13, 0, kTiny.num_layers(), ModelStorage{.account = &account});
    LabMlp plain(kTiny, 13);
    for (LabMlp* m : {&model, &plain}) {
      MicrobatchState mb = m->new_microbatch(4, 4);
      fill_inputs(mb, 9);
      m->forward(mb);
      m->backward(mb);
    }
    storage->assign(static_cast<size_t>(model.owned_range().numel()), -1.0f);
    EXPECT_THROW(model.adopt_grads(std::span<float>(*storage).first(3), storage), RuntimeError);
    model.adopt_grads(*storage, storage);
    EXPECT_EQ(model.grads().data(), storage->data());
    EXPECT_TRUE(std::equal(model.grads().begin(), model.grads().end(), plain.grads().begin()));
    EXPECT_EQ(account.current(MemoryCategory::kGradients), bytes);
    EXPECT_EQ(account.peak(MemoryCategory::kGradients), bytes) << "never both buffers at once";
    // A second microbatch accumulates into the adopted memory, as into the model's own.
    for (LabMlp* m : {&model, &plain}) {
      MicrobatchState mb = m->new_microbatch(4, 8);
      fill_inputs(mb, 9, 4);
      m->forward(mb);
      m->backward(mb);
    }
    EXPECT_TRUE(std::equal(storage->begin(), storage->end(), plain.grads().begin()));
    model.zero_grads();
    EXPECT_TRUE(std::all_of(storage->begin(), storage->end(), [](float v) { return v == 0.0f; }));
  }
  EXPECT_EQ(account.current(MemoryCategory::kGradients), 0) << "released with the model";
  LabMlp sharded(kTiny, 13, 0, kTiny.num_layers(), ModelStorage{.grads = false});
  EXPECT_THROW(sharded.adopt_grads(*storage, storage), RuntimeError);
}

TEST(LabMlpTest, StepFlopsCount) {
  // 3 x [2 B (h f + f h) L + 2 B h C] for h 6, f 10, L 2, C 3, B 4:
  //   forward = 2*4*(60+60)*2 + 2*4*6*3 = 1920 + 144 = 2064; x3 = 6192
  EXPECT_EQ(LabMlp::step_matmul_flops(kTiny, 4), 6192.0);
}

}  // namespace
// A model makes its process keep freed memory (keep_freed_memory): every microbatch frees its
// activations and allocates them again, 1 MB buffers at the lab's shapes (microbatch 64, ffn
// 4096), and with glibc's defaults each came back from the OS and faulted its pages in again
// (18k faults, a fifth of an fp32 lab-mlp step; issue 35). After the first microbatches, the
// steady ones fault nothing in.
TEST(LabMlpTest, SteadyMicrobatchesFaultNoFreshPagesIn) {
  const MlpShape shape{.hidden = 1024, .ffn = 4096, .blocks = 2, .classes = 4};
  LabMlp model(shape, 11);
  const auto minor_faults = [] {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return int64_t(u.ru_minflt);
  };
  const auto microbatch = [&] {
    MicrobatchState mb = model.new_microbatch(64, 64);
    std::fill(mb.activation(0).begin(), mb.activation(0).end(), 0.5f);
    std::fill(mb.labels().begin(), mb.labels().end(), 1);
    model.forward(mb);
    model.backward(mb);
  };
  for (int i = 0; i < 3; ++i) microbatch();  // first touches: the heap grows to its peak
  const int64_t before = minor_faults();
  for (int i = 0; i < 6; ++i) microbatch();
  // Without it these microbatches faulted 7.9k pages in; a few faults of
  // the library's own (oneDNN's first primitive of a shape) are not the heap's.
  EXPECT_LT(minor_faults() - before, 100) << "steady microbatches fault fresh pages in";
}

// Blocks of 32 MiB and more are kept once freed, for the next block of their size (ZeRO-3's
// gathered layers, made and freed per layer and pass, reuse their pages instead of faulting new
// ones in); a block of another size first returns what is kept, so the process never holds more
// than it had in use at once; the account sees only what is in use.
TEST(LabMlpTest, FreedLargeBlocksServeTheNextOfTheirSize) {
  keep_freed_memory();
  MemoryAccount account;
  const std::size_t n = kLargeBlockBytes / sizeof(float) + 1024;
  const float* first = nullptr;
  {
    CountedVector<float> a = counted_vector<float>(&account, MemoryCategory::kTemporary, n);
    first = a.data();
    EXPECT_EQ(account.current(MemoryCategory::kTemporary), int64_t(n * sizeof(float)));
  }
  EXPECT_EQ(account.current(MemoryCategory::kTemporary), 0);
  EXPECT_GE(kept_large_block_bytes(), n * sizeof(float));
  {
    CountedVector<float> again = counted_vector<float>(&account, MemoryCategory::kTemporary, n);
    EXPECT_EQ(again.data(), first) << "the kept block serves the next of its size";
  }
  {
    CountedVector<float> other = counted_vector<float>(&account, MemoryCategory::kTemporary, n + 4096);
    EXPECT_EQ(kept_large_block_bytes(), 0u) << "a new size returns what is kept first";
  }
  CountedVector<float> small = counted_vector<float>(&account, MemoryCategory::kTemporary, 1024);
  small.clear();
  small.shrink_to_fit();
  EXPECT_EQ(kept_large_block_bytes(), (n + 4096) * sizeof(float)) << "small blocks are glibc's";
}

}  // namespace parlab::model
