// bench_model: the lab-mlp training step of one worker (global batch in microbatches, AdamW), in
// fp32 and in mixed precision, against oneDNN's matmul alone at the lab's shapes, with the
// step's time broken down by kernel.
//
// Goals (issue 35), printed beside the figures, never asserted:
//   fp32 step  >= 85% of oneDNN's fp32 matmul rate at the lab's shapes, the forward products
//                 64 x 4096 x 1024 and 64 x 1024 x 4096 run as plain oneDNN calls (the reference);
//   mixed step >= 1.8x faster than the fp32 step.
// The step's FLOPs are counted (LabMlp::step_matmul_flops: 3 x the forward's), not measured.
//
// The breakdown runs each kind of work of the step alone on the model's own buffers, as often as
// one step runs it: the matrix products as the layers call them (cpu::linear_*), the element-wise
// kernels (GELU, biases, residual, copies, bf16 conversions, softmax), the data fill, the
// gradient clear, the bf16 weight copies and the AdamW pass. "other" is the step minus their sum.
//
// Every job runs once per round, round after round (interleaved), timed in process CPU time and
// wall time, so load on a shared machine falls on all of them alike; figures are medians over
// the rounds with the range beside them. The goals' ratios are taken per round (the step against
// the reference and the fp32 step measured in the same round), then their median and range.
// Each job's minor page faults are counted too: a step that faults in fresh memory every
// microbatch spends CPU time the parts above do not show.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sys/resource.h>

#include <ctime>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/timing.h"
#include "runtime/compute/blas_threads.h"
#include "runtime/compute/cpu/kernels.h"
#include "runtime/compute/cpu/matmul.h"
#include "runtime/model/lab_mlp.h"
#include "runtime/train/data.h"
#include "runtime/train/optimizer.h"
#include "strategy/plan.h"

namespace {

using parlab::model::LabMlp;
using parlab::model::MlpShape;
namespace cpu = parlab::compute::cpu;
namespace bench = parlab::bench;

double cpu_seconds() { return bench::cpu_seconds(CLOCK_PROCESS_CPUTIME_ID); }

int64_t minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Job {
  std::string name;
  std::function<void()> run;
  std::vector<double> cpu, wall, faults;
  bench::Range cpu_range() const { return bench::range_of(cpu); }
};

// One worker's model, optimizer and microbatch state, fp32 or mixed.
struct Worker {
  Worker(const MlpShape& shape, bool mixed, int64_t gbs, int group)
      : model(shape, 1, 0, shape.num_layers(),
              parlab::model::ModelStorage{.mixed_precision = mixed, .weight_grad_group = group}),
        adamw(parlab::train::AdamWConfig{.lr = 2e-4}, model.owned_range()),
        gbs(gbs) {
    if (mixed) model.set_mixed_precision(true);
  }
  LabMlp model;
  parlab::train::AdamW adamw;
  int64_t gbs;
};

// The products one microbatch of B runs, by kind, with the shapes and kernels the layers use
// (runtime/compute/cpu/linear.cpp), on the model's weights and gradients (so their memory
// traffic is the step's) and activation buffers of the step's sizes. bf16: the blocks' products
// take the bf16 weight copies prepared for them (the forward's and the input gradient's, as the
// mixed model keeps them); the head stays fp32, as in the mixed model.
enum class Kind { kForward, kDinp, kDweight };
// Weight gradients reduce over `rows` rows a call: a weight-gradient group's (LabMlp), run once a
// group; the other products over one microbatch's B.
struct Products {
  Products(const MlpShape& s, int64_t B, int64_t rows) : s(s), B(B), rows(rows) {
    x.assign(rows * s.ffn, 0.01f), y.assign(B * s.ffn, 0.0f), dy.assign(rows * s.ffn, 0.02f);
    x16.assign(rows * s.ffn, 0x3c00), dy16.assign(rows * s.ffn, 0x3c00);
  }
  // w16, w16t: the bf16 weight copies prepared for the forward and for the input gradient, each
  // at its weight's flat offset, for the mixed model; null for fp32.
  // `first`: the step's first weight-gradient products, which write the gradient (LabMlp's
  // zero_grads leaves the block weights' to them); later ones accumulate.
  void run(Kind kind, LabMlp& m, const uint16_t* w16, const uint16_t* w16t, bool first = false) {
    const auto& layout = m.layout();
    const float* p = m.params().data();
    float* g = m.grads().data();
    const int64_t h = s.hidden, f = s.ffn;
    auto layer = [&](const std::string& name, int64_t C, int64_t OC, bool bf16, bool accumulate) {
      const int64_t w = layout.find(name + ".weight").offset, bias = layout.find(name + ".bias").offset;
      cpu::GemmShape fwd{.M = B, .N = OC, .K = C, .trans_b = true};
      cpu::GemmShape dinp{.M = B, .N = C, .K = OC, .accumulate = accumulate};
      cpu::GemmShape dw{.M = OC, .N = C, .K = rows, .trans_a = true, .accumulate = !first || name == "head"};
      const cpu::GemmShape& shape = kind == Kind::kForward ? fwd : kind == Kind::kDinp ? dinp : dw;
      const bool weight_b = kind != Kind::kDweight;  // the weight is op(B); dW's output is the gradient
      float* out = kind == Kind::kDweight ? g + w : y.data();
      const float* b = kind == Kind::kForward ? p + bias : nullptr;
      const cpu::WeightUse use = kind == Kind::kForward ? cpu::WeightUse::kForward : cpu::WeightUse::kInputGrad;
      const cpu::PreparedWeightBf16 prepared =
          cpu::prepared_view_bf16(kind == Kind::kForward ? w16 + w : w16t + w, OC, C, use);
      if (bf16 && weight_b)
        cpu::gemm_bf16(shape, x16.data(), prepared, out, b);
      else if (bf16)
        cpu::gemm_bf16(shape, dy16.data(), x16.data(), out, b);
      else
        cpu::gemm_f32(shape, kind == Kind::kDweight ? dy.data() : x.data(), weight_b ? p + w : x.data(), out, b);
    };
    const bool bf16 = w16 != nullptr;
    for (int64_t l = 0; l < s.blocks; ++l) {
      const std::string b = "blocks." + std::to_string(l);
      layer(b + ".fc1", h, f, bf16, true);
      layer(b + ".fc2", f, h, bf16, false);
    }
    layer("head", h, s.classes, false, false);
  }
  // The element-wise kernels of one microbatch (block_forward/backward, head, mixed or not).
  void elementwise(bool mixed, float* db) {
    const int64_t h = s.hidden, f = s.ffn, C = s.classes, bh = B * h, bf = B * f;
    std::vector<int32_t> labels(B, 0);
    for (int64_t l = 0; l < s.blocks; ++l) {
      if (mixed) {
        cpu::to_bf16(x16.data(), x.data(), bh);
        cpu::gelu_forward_bf16(x16.data(), dy16.data(), y.data(), bf);
      } else {
        cpu::gelu_forward(y.data(), x.data(), bf);
      }
      cpu::residual_forward(y.data(), y.data(), x.data(), bh);
      std::copy(dy.begin(), dy.begin() + bh, y.begin());
      cpu::bias_backward(db, dy.data(), B, h);
      if (mixed) {
        cpu::to_bf16(dy16.data(), dy.data(), bh);
        cpu::gelu_bias_backward_bf16(x16.data(), db, dy16.data(), dy.data(), B, f);
      } else {
        cpu::gelu_bias_backward(y.data(), cpu::GradWrite::kOverwrite, db, x.data(), dy.data(), B, f);
      }
    }
    cpu::softmax_cross_entropy_forward(y.data(), dy.data() + B, x.data(), labels.data(), B, C);
    cpu::softmax_cross_entropy_backward(y.data(), cpu::GradWrite::kOverwrite, dy.data() + B, labels.data(), 1.0f, B, C);
  }
  MlpShape s;
  int64_t B, rows;
  // The model's own kind of buffer (its counting allocator), so the kernels see memory as the step's do.
  parlab::model::CountedVector<float> x, y, dy;
  parlab::model::CountedVector<uint16_t> x16, dy16;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_model: the lab-mlp step (1 worker, fp32 and mixed) vs oneDNN's matmul alone, by kernel"};
  int64_t hidden = 1024, ffn = 4096, blocks = 8, classes = 16, mb = 64, gbs = 512;
  int rounds = 5;
  bool mixed = true;
  app.add_option("--hidden", hidden, "h");
  app.add_option("--ffn", ffn, "f");
  app.add_option("--blocks", blocks, "L");
  app.add_option("--classes", classes, "C");
  app.add_option("--mb", mb, "microbatch");
  app.add_option("--gbs", gbs, "global batch (one worker: gbs / mb microbatches per step)");
  app.add_option("--rounds", rounds, "timed rounds of every job (after one warm-up)");
  app.add_option("--mixed", mixed, "also the mixed-precision step (needs bf16 matmuls)");
  CLI11_PARSE(app, argc, argv);
  if (gbs % mb != 0) {
    std::fprintf(stderr, "--gbs must be a multiple of --mb\n");
    return 2;
  }
  mixed = mixed && cpu::bf16_supported();

  parlab::compute::pin_blas_to_one_thread();
  const MlpShape shape{.hidden = hidden, .ffn = ffn, .blocks = blocks, .classes = classes};
  const int64_t micro = gbs / mb;
  const double flops = LabMlp::step_matmul_flops(shape, gbs);
  const parlab::train::SyntheticDataset data({.seed = 2, .size = gbs, .width = hidden, .classes = classes});
  std::vector<std::vector<int64_t>> batches(micro);
  for (int64_t i = 0; i < gbs; ++i) batches[i / mb].push_back(i);

  // The weight-gradient groups one worker's step makes (strategy::weight_grad_group's rule).
  parlab::strategy::Plan plan;
  plan.microbatch = mb, plan.microbatches = micro;
  const int group = parlab::strategy::weight_grad_group(plan);
  Worker f32(shape, false, gbs, group);
  std::unique_ptr<Worker> mix = mixed ? std::make_unique<Worker>(shape, true, gbs, group) : nullptr;
  auto train_step = [&](Worker& w) {
    w.model.zero_grads();
    for (size_t k = 0; k < batches.size(); ++k) {
      parlab::model::MicrobatchState state = w.model.new_microbatch(mb, gbs);
      data.fill(batches[k], state);
      w.model.forward(state);
      w.model.set_weight_grads_deferrable(k + 1 < batches.size());  // as the executor says for DDP
      w.model.backward(state);
    }
    w.adamw.step(w.model.params(), w.model.grads());
  };

  // The reference: the lab's forward products as plain oneDNN calls, as many FLOPs as a step.
  const std::vector<float> ra(mb * ffn, 0.01f), rb(hidden * ffn, 0.02f);
  std::vector<float> rc(mb * ffn);
  std::vector<uint16_t> ra16(ra.size(), 0x3c00), rb16(rb.size(), 0x3c00);
  const cpu::GemmShape fc1{.M = mb, .N = ffn, .K = hidden, .trans_b = true};
  const cpu::GemmShape fc2{.M = mb, .N = hidden, .K = ffn, .trans_b = true};
  const int64_t ref_calls = std::max<int64_t>(1, static_cast<int64_t>(flops / (4.0 * mb * hidden * ffn)));
  const double ref_flops = static_cast<double>(ref_calls) * 4.0 * mb * hidden * ffn;

  Products products(shape, mb, group * mb);
  std::vector<uint16_t> w16(f32.model.params().size()), w16t(w16.size());
  std::vector<float> dbias(ffn, 0.0f);
  std::vector<Job> jobs;
  auto add = [&jobs](std::string name, std::function<void()> run) {
    jobs.push_back({std::move(name), std::move(run), {}, {}, {}});
  };
  add("oneDNN fp32 matmul alone", [&] {
    for (int64_t i = 0; i < ref_calls; ++i) {
      cpu::onednn_gemm_f32(fc1, ra.data(), rb.data(), rc.data());
      cpu::onednn_gemm_f32(fc2, ra.data(), rb.data(), rc.data());
    }
  });
  add("fp32 step", [&] { train_step(f32); });
  auto matmuls = [&](Kind kind, Worker& w, bool bf16) {
    for (int64_t m = 0; m < (kind == Kind::kDweight ? (micro + group - 1) / group : micro); ++m)
      products.run(kind, w.model, bf16 ? w16.data() : nullptr, bf16 ? w16t.data() : nullptr, m == 0 && group > 1);
  };
  add("  matmuls: forward", [&] { matmuls(Kind::kForward, f32, false); });
  add("  matmuls: input gradients", [&] { matmuls(Kind::kDinp, f32, false); });
  add("  matmuls: weight gradients", [&] { matmuls(Kind::kDweight, f32, false); });
  add("  element-wise kernels", [&] {
    for (int64_t m = 0; m < micro; ++m) products.elementwise(false, dbias.data());
  });
  add("  data fill", [&] {
    for (const auto& idx : batches) {
      parlab::model::MicrobatchState state = f32.model.new_microbatch(mb, gbs);
      data.fill(idx, state);
    }
  });
  add("  gradient clear", [&] { f32.model.zero_grads(); });
  // The spans once: grads() after the "gradient clear" job would first zero the block weights'
  // gradients (zero_grads leaves them to the first product), which the step's AdamW never does.
  const std::span<const float> f32_grads = f32.model.grads();
  add("  AdamW", [&] { f32.adamw.step(f32.model.params(), f32_grads); });
  if (mixed) {
    add("oneDNN bf16 matmul alone", [&] {
      for (int64_t i = 0; i < ref_calls; ++i) {
        cpu::onednn_gemm_bf16(fc1, ra16.data(), rb16.data(), rc.data());
        cpu::onednn_gemm_bf16(fc2, ra16.data(), rb16.data(), rc.data());
      }
    });
    add("mixed step", [&] { train_step(*mix); });
    add("  matmuls: forward", [&] { matmuls(Kind::kForward, *mix, true); });
    add("  matmuls: input gradients", [&] { matmuls(Kind::kDinp, *mix, true); });
    add("  matmuls: weight gradients", [&] { matmuls(Kind::kDweight, *mix, true); });
    add("  element-wise kernels", [&] {
      for (int64_t m = 0; m < micro; ++m) products.elementwise(true, dbias.data());
    });
    add("  data fill", [&] { jobs[6].run(); });
    add("  bf16 weight copies", [&] {  // the blocks' weights, both products' copies in one pass, as the model
      const float* p = std::as_const(mix->model).params().data();
      for (const auto& t : mix->model.layout().tensors()) {
        if (t.layer >= blocks || t.shape.size() != 2) continue;
        cpu::prepare_weight_bf16_pair(w16.data() + t.offset, w16t.data() + t.offset, p + t.offset, t.shape[0],
                                      t.shape[1]);
      }
    });
    add("  gradient clear", [&] { mix->model.zero_grads(); });
    const std::span<const float> mix_grads = mix->model.grads();
    add("  AdamW", [&] { mix->adamw.step(mix->model.params(), mix_grads); });
  }

  for (Job& job : jobs) job.run();  // warm-up: primitives built, buffers touched
  for (int r = 0; r < rounds; ++r)
    for (Job& job : jobs) {
      const int64_t f0 = minor_faults();
      const double c0 = cpu_seconds(), w0 = wall_seconds();
      job.run();
      job.cpu.push_back(cpu_seconds() - c0);
      job.wall.push_back(wall_seconds() - w0);
      job.faults.push_back(static_cast<double>(minor_faults() - f0));
    }

  std::printf(
      "bench_model: lab-mlp h%lld f%lld L%lld C%lld, 1 worker, gbs %lld in microbatches of %lld, weight "
      "gradients in groups of %d microbatches, AdamW; one thread; %s; load %s\n",
      (long long)hidden, (long long)ffn, (long long)blocks, (long long)classes, (long long)gbs, (long long)mb, group,
      std::string(cpu::matmul_backend_name()).c_str(), bench::load_average().c_str());
  std::printf("step matmul FLOPs %.1f GFLOP; process CPU seconds per step, median [min..max] of %d rounds\n\n",
              flops / 1e9, rounds);
  std::printf("%-38s %24s %9s %9s %8s\n", "job", "cpu s", "wall s", "GFLOP/s", "faults");
  auto print = [&](const Job& job, double job_flops) {
    const bench::Range c = job.cpu_range();
    char cell[64];
    std::snprintf(cell, sizeof cell, "%.4f [%.4f..%.4f]", c.median, c.lo, c.hi);
    std::printf("%-38s %24s %9.4f", job.name.c_str(), cell, parlab::median(job.wall));
    if (job_flops > 0)
      std::printf(" %9.1f", job_flops / c.median / 1e9);
    else
      std::printf(" %9s", "");
    std::printf(" %8.0f\n", parlab::median(job.faults));
  };
  auto section = [&](size_t first, size_t parts_begin, size_t parts_end) {
    print(jobs[first], ref_flops);
    print(jobs[first + 1], flops);
    double parts = 0;
    for (size_t j = parts_begin; j < parts_end; ++j) {
      print(jobs[j], j < parts_begin + 3 ? flops / 3 : 0);
      parts += jobs[j].cpu_range().median;
    }
    std::printf("%-38s %24.4f\n", "  other (step - the parts above)", jobs[first + 1].cpu_range().median - parts);
  };
  // Per round: numerator job's rate or time over the denominator's, both of that round.
  auto per_round = [&](size_t num, size_t den, double scale) {
    std::vector<double> r;
    for (int i = 0; i < rounds; ++i) r.push_back(scale * jobs[num].cpu[i] / jobs[den].cpu[i]);
    return bench::range_of(r);
  };
  section(0, 2, 9);
  const double ref_rate = ref_flops / jobs[0].cpu_range().median;
  // The step's rate over the reference's: (flops / step) / (ref_flops / ref).
  const bench::Range share = per_round(0, 1, flops / ref_flops);
  std::printf(
      "\nfp32: the step runs at %.1f%% [%.1f..%.1f] of oneDNN's fp32 matmul rate (%.1f GFLOP/s) (goal >= 85%%): %s\n",
      100.0 * share.median, 100.0 * share.lo, 100.0 * share.hi, ref_rate / 1e9,
      share.median >= 0.85 ? "met" : "NOT met");
  if (mixed) {
    std::printf("\n");
    section(9, 11, 19);
    const double bf16_rate = ref_flops / jobs[9].cpu_range().median;
    const bench::Range bf16_share = per_round(9, 10, flops / ref_flops);
    std::printf("\nmixed: the step runs at %.1f%% [%.1f..%.1f] of oneDNN's bf16 matmul rate (%.1f GFLOP/s)\n",
                100.0 * bf16_share.median, 100.0 * bf16_share.lo, 100.0 * bf16_share.hi, bf16_rate / 1e9);
    const bench::Range speedup = per_round(1, 10, 1.0);
    std::printf("mixed step %.2fx [%.2f..%.2f] faster than fp32 (goal >= 1.8x): %s\n", speedup.median, speedup.lo,
                speedup.hi, speedup.median >= 1.8 ? "met" : "NOT met");
  }
  return 0;
}
