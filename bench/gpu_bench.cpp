// bench_gpu: the lab-mlp on one GPU (runtime/compute/cuda) against what the device can do.
//
// Figures (each printed with its goal; the bench never fails on timing):
//   step      DeviceMlp forward+backward of one microbatch (64 and 1024) at the lab-mlp preset.
//             FLOPs are counted, not measured: 3 x [2 B (h f + f h) L + 2 B h C]; achieved FLOP/s
//             is that over the median step time, compared with the device's fp32 peak
//             (SMs x fp32 lanes x 2 x boost clock; fp32 without tensor cores, as the model runs).
//   sgemm     the step's 6 L + 3 cuBLAS sgemm calls alone (same M, N, K, transposes, beta = 1,
//             distinct operands per call like the per-layer weights): the ceiling for the step.
//             step / sgemm-alone shows what the non-GEMM kernels and launches cost.
//   gemm      one large cuBLAS sgemm (8192^3, fp32, default math: no TF32): the fp32 GEMM rate
//             this GPU reaches in this run, the denominator of the MFU figures below.
//   train     the whole training step of `parlab train --device cuda` (Trainer on a CudaModel,
//             NCCL world of one, lab-mlp preset, one microbatch of B), AdamW ON THE DEVICE as
//             the trainer runs it (state resident, no host copy in the step): wall-clock median
//             of steps after warm-up. MFU = step matmul FLOPs / step time / the gemm rate above
//             (goal >= 50%); the forward+backward alone gets the same ratio. Beside it the same
//             step with AdamW on host copies (gradients down, weights up), the path it replaced,
//             as a ratio measured in the same run.
//   memcpy    device-to-device copy of 1 GiB (read + write = 2 x bytes moved) against the peak
//             DRAM bandwidth; host<->device over pinned memory.
// Times come from CUDA events on the model's stream (device time, no host jitter); each figure
// is the median of --reps repetitions. --json writes everything for scripts/gpu-check.sh.
// Without a device: prints "no CUDA device: <reason>" and exits 0.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "runtime/comm/rendezvous.h"
#include "runtime/compute/counter_rng.h"
#include "runtime/gpu/device.h"
#include "runtime/model/cuda/device_mlp.h"
#include "runtime/compute/cuda/kernels.h"
#include "runtime/device/device.h"
#include "runtime/model/param_layout.h"
#include "runtime/train/trainer.h"
#include "strategy/io.h"
#include "base/stats.h"

namespace {

namespace cuda = parlab::compute::cuda;
using parlab::model::MlpShape;
using json = nlohmann::json;

// Median device seconds of one call of `body` over `reps` timed repetitions of `inner` calls
// each, after one untimed warm-up repetition.
double median_seconds(cudaStream_t stream, int reps, int inner, const std::function<void()>& body) {
  for (int i = 0; i < inner; ++i) body();
  std::vector<double> samples;
  for (int r = 0; r < reps; ++r) {
    cuda::Event start, end;
    start.record(stream);
    for (int i = 0; i < inner; ++i) body();
    end.record(stream);
    end.synchronize();
    samples.push_back(end.seconds_since(start) / inner);
  }
  return parlab::median(std::move(samples));
}

// One sgemm of the step in cuBLAS's column-major terms (see runtime/compute/cuda/linear.cpp).
struct Gemm {
  cublasOperation_t ta, tb;
  int m, n, k, lda, ldb, ldc;
};

// The calls DeviceMlp makes for one microbatch of B (linear.cpp: forward = 1 sgemm, backward =
// dinp + dweight).
std::vector<Gemm> step_gemms(const MlpShape& s, int B) {
  std::vector<Gemm> gemms;
  auto forward = [&](int in, int out) { gemms.push_back({CUBLAS_OP_T, CUBLAS_OP_N, out, B, in, in, in, out}); };
  auto backward = [&](int in, int out) {
    gemms.push_back({CUBLAS_OP_N, CUBLAS_OP_N, in, B, out, in, out, in});  // dinp
    gemms.push_back({CUBLAS_OP_N, CUBLAS_OP_T, in, out, B, in, out, in});  // dweight
  };
  const int h = static_cast<int>(s.hidden), f = static_cast<int>(s.ffn), C = static_cast<int>(s.classes);
  for (int l = 0; l < s.blocks; ++l) {
    forward(h, f);
    forward(f, h);
  }
  forward(h, C);
  backward(h, C);
  for (int l = 0; l < s.blocks; ++l) {
    backward(f, h);
    backward(h, f);
  }
  return gemms;
}

// Column-major operand sizes of a gemm: op(A) is m x k, op(B) is k x n, C is m x n.
std::size_t a_elems(const Gemm& g) { return static_cast<std::size_t>(g.lda) * (g.ta == CUBLAS_OP_N ? g.k : g.m); }
std::size_t b_elems(const Gemm& g) { return static_cast<std::size_t>(g.ldb) * (g.tb == CUBLAS_OP_N ? g.n : g.k); }
std::size_t c_elems(const Gemm& g) { return static_cast<std::size_t>(g.ldc) * g.n; }

const char* verdict(bool met) { return met ? "met" : "NOT met"; }

json bench_model(const cuda::DeviceInfo& dev, const MlpShape& shape, int64_t B, int reps) {
  cuda::DeviceGuard guard(dev.index);  // events and operand buffers on the model's device
  cuda::DeviceMlp model = cuda::DeviceMlp::from_seed(shape, 1, B, dev.index);
  const parlab::compute::CounterRng rng(2, parlab::compute::RngStream::kDataInput);
  std::vector<float> x(static_cast<size_t>(B * shape.hidden));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(rng.normal(i));
  std::vector<int32_t> labels(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) labels[b] = static_cast<int32_t>(b % shape.classes);
  model.set_microbatch(x, labels, B);
  const cudaStream_t stream = model.stream();
  const double flops = cuda::DeviceMlp::step_matmul_flops(shape, B);
  const int inner = B >= 512 ? 5 : 20;
  const double step = median_seconds(stream, reps, inner, [&] {
    model.forward();
    model.backward();
  });

  // The same sgemm calls alone, on the model's handle and stream.
  const std::vector<Gemm> gemms = step_gemms(shape, static_cast<int>(B));
  std::vector<cuda::DeviceBuffer<float>> as, bs, cs;
  for (const Gemm& g : gemms) {
    as.emplace_back(a_elems(g));
    bs.emplace_back(b_elems(g));
    cs.emplace_back(c_elems(g));
    as.back().zero(stream);
    bs.back().zero(stream);
    cs.back().zero(stream);
  }
  const float one = 1.0f;
  const double sgemm = median_seconds(stream, reps, inner, [&] {
    for (size_t i = 0; i < gemms.size(); ++i) {
      const Gemm& g = gemms[i];
      PARLAB_CUBLAS_CHECK(cublasSgemm(model.blas().get(), g.ta, g.tb, g.m, g.n, g.k, &one, as[i].data(), g.lda,
                                      bs[i].data(), g.ldb, &one, cs[i].data(), g.ldc));
    }
  });

  const double peak = dev.fp32_peak_flops_per_s();
  const double step_rate = flops / step, sgemm_rate = flops / sgemm;
  const double step_vs_sgemm = sgemm / step;
  // Goals: at 1024 the GEMMs are large enough to fill the GPU (sgemm >= 60% of fp32 peak) and
  // the rest of the step is small next to them (>= 90% of the sgemm-alone rate); at 64 each
  // sgemm is ~0.5 GFLOP, so launch latency and low occupancy dominate (>= 25% of peak, >= 70%).
  const bool large = B >= 512;
  const double sgemm_goal = large ? 0.60 : 0.25, ratio_goal = large ? 0.90 : 0.70;
  std::printf("\nlab-mlp h%lld f%lld L%lld C%lld, microbatch %lld: %.2f GFLOP per step\n", (long long)shape.hidden,
              (long long)shape.ffn, (long long)shape.blocks, (long long)shape.classes, (long long)B, flops / 1e9);
  std::printf("  forward+backward step  %9.3f ms  %7.2f TFLOP/s  %5.1f%% of fp32 peak\n", step * 1e3, step_rate / 1e12,
              peak > 0 ? 100 * step_rate / peak : 0.0);
  std::printf(
      "  sgemm alone (%zu calls) %9.3f ms  %7.2f TFLOP/s  %5.1f%% of fp32 peak "
      "(goal >= %.0f%%): %s\n",
      gemms.size(), sgemm * 1e3, sgemm_rate / 1e12, peak > 0 ? 100 * sgemm_rate / peak : 0.0, 100 * sgemm_goal,
      peak > 0 ? verdict(sgemm_rate >= sgemm_goal * peak) : "peak unknown");
  std::printf("  step reaches %.1f%% of the sgemm-alone rate (goal >= %.0f%%): %s\n", 100 * step_vs_sgemm,
              100 * ratio_goal, verdict(step_vs_sgemm >= ratio_goal));
  return {{"batch", B},
          {"step_flops", flops},
          {"step_seconds", step},
          {"step_flops_per_s", step_rate},
          {"step_fraction_of_peak", peak > 0 ? step_rate / peak : 0.0},
          {"sgemm_calls", gemms.size()},
          {"sgemm_seconds", sgemm},
          {"sgemm_flops_per_s", sgemm_rate},
          {"sgemm_fraction_of_peak", peak > 0 ? sgemm_rate / peak : 0.0},
          {"step_vs_sgemm", step_vs_sgemm}};
}

// The fp32 GEMM rate of this device in this run: one square sgemm large enough to fill it.
double bench_gemm_rate(const cuda::DeviceInfo& dev, int reps) {
  cuda::DeviceGuard guard(dev.index);
  cuda::Stream stream;
  cuda::CublasHandle blas(stream.get());
  const int n = 8192;
  const std::size_t elems = static_cast<std::size_t>(n) * n;
  cuda::DeviceBuffer<float> a(elems), b(elems), c(elems);
  a.zero(stream.get());
  b.zero(stream.get());
  c.zero(stream.get());
  const float one = 1.0f, zero = 0.0f;
  const double seconds = median_seconds(stream.get(), reps, 2, [&] {
    PARLAB_CUBLAS_CHECK(
        cublasSgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, a.data(), n, b.data(), n, &zero, c.data(), n));
  });
  const double rate = 2.0 * n * double(n) * n / seconds;
  const double peak = dev.fp32_peak_flops_per_s();
  std::printf("\ncuBLAS sgemm %d^3 (fp32, no TF32)  %8.3f ms  %7.2f TFLOP/s  %5.1f%% of fp32 peak\n", n, seconds * 1e3,
              rate / 1e12, peak > 0 ? 100 * rate / peak : 0.0);
  return rate;
}

// The training step of `parlab train --device cuda` on one GPU, its MFU against `gemm_rate`.
json bench_train_step(const cuda::DeviceInfo& dev, int64_t B, int steps, double gemm_rate, bool device_optimizer) {
  namespace train = parlab::train;
  train::TrainConfig config;
  config.model = parlab::strategy::load_model("lab-mlp");
  const std::string plan = "gbs=" + std::to_string(B) + ",mb=" + std::to_string(B);
  config.plan = train::resolve_train_plan(config.model, plan, 1, parlab::strategy::load_cluster("cpu-local"));
  config.optimizer = train::AdamWConfig{.lr = 2e-4};
  config.data_size = 4 * B;
  config.seed = 1;
  auto store = parlab::comm::make_in_process_store();
  auto world = parlab::comm::make_gloo_communicator(store, 0, 1, parlab::comm::GlooOptions{});
  parlab::device::CudaRankOptions o;
  parlab::device::CudaRank gpu = parlab::device::open_cuda_rank(store, 0, 1, dev.index, o);
  train::TrainerOptions to;
  to.record_events = false;
  to.collectives = gpu.world.get();
  to.make_device_model = gpu.make_model;
  if (device_optimizer) to.make_device_optimizer = gpu.make_optimizer;
  train::Trainer trainer(config, *world, to);
  for (int i = 0; i < 2; ++i) trainer.step();  // warm-up: cuBLAS heuristics, NCCL setup, page faults
  std::vector<double> total, optimizer;
  for (int i = 0; i < steps; ++i) {
    const train::StepRecord r = trainer.step();
    total.push_back(r.times.step_seconds);
    optimizer.push_back(r.times.optimizer_seconds);
  }
  std::ranges::sort(total);
  std::ranges::sort(optimizer);
  const double step = total[total.size() / 2], opt = optimizer[optimizer.size() / 2];
  const double flops = cuda::DeviceMlp::step_matmul_flops(parlab::model::lab_mlp_preset(), B);
  const double mfu = flops / step / gemm_rate;
  std::printf("\ntraining step on the GPU (parlab train --device cuda, lab-mlp, 1 GPU, microbatch %lld, AdamW %s)\n",
              (long long)B, device_optimizer ? "on the device" : "on host copies");
  std::printf("  step %8.3f ms (median of %d; range %.3f .. %.3f ms)  %7.2f TFLOP/s\n", step * 1e3, steps,
              total.front() * 1e3, total.back() * 1e3, flops / step / 1e12);
  if (device_optimizer)
    std::printf("  MFU vs this run's cuBLAS sgemm rate: %5.1f%% (goal >= 50%%): %s\n", 100 * mfu, verdict(mfu >= 0.5));
  else
    std::printf("  MFU vs this run's cuBLAS sgemm rate: %5.1f%% (the path the device optimizer replaced)\n", 100 * mfu);
  std::printf(
      "  of which the optimizer op (%s): %.3f ms\n",
      device_optimizer ? "fused AdamW kernel on the device" : "gradients to the host, AdamW there, weights back",
      opt * 1e3);
  return {{"batch", B},
          {"steps", steps},
          {"step_seconds", step},
          {"step_seconds_min", total.front()},
          {"step_seconds_max", total.back()},
          {"optimizer_seconds", opt},
          {"step_flops", flops},
          {"mfu_vs_cublas", mfu},
          {"optimizer_on_device", device_optimizer}};
}

json bench_memcpy(const cuda::DeviceInfo& dev, int reps) {
  cuda::DeviceGuard guard(dev.index);
  cuda::Stream stream;
  const std::size_t bytes = std::size_t{1} << 30;
  cuda::DeviceAllocation a(bytes), b(bytes);
  cuda::zero_on_device(a.get(), bytes, stream.get());
  const double d2d =
      median_seconds(stream.get(), reps, 3, [&] { cuda::copy_on_device(b.get(), a.get(), bytes, stream.get()); });
  // Host side: 256 MiB of pinned memory (pageable copies measure the driver's staging instead).
  const std::size_t host_bytes = std::size_t{256} << 20;
  void* pinned = nullptr;
  PARLAB_CUDA_CHECK(cudaMallocHost(&pinned, host_bytes));
  const double h2d =
      median_seconds(stream.get(), reps, 3, [&] { cuda::copy_to_device(a.get(), pinned, host_bytes, stream.get()); });
  const double d2h = median_seconds(stream.get(), reps, 3, [&] {
    PARLAB_CUDA_CHECK(cudaMemcpyAsync(pinned, a.get(), host_bytes, cudaMemcpyDeviceToHost, stream.get()));
  });
  cudaFreeHost(pinned);
  const double peak = dev.memory_peak_bytes_per_s();
  const double d2d_rate = 2.0 * bytes / d2d;
  const double h2d_rate = host_bytes / h2d, d2h_rate = host_bytes / d2h;
  std::printf("\nmemory\n");
  std::printf(
      "  device-to-device 1 GiB   %8.1f GB/s (read+write)  %5.1f%% of peak %.0f GB/s "
      "(goal >= 75%%): %s\n",
      d2d_rate / 1e9, peak > 0 ? 100 * d2d_rate / peak : 0.0, peak / 1e9,
      peak > 0 ? verdict(d2d_rate >= 0.75 * peak) : "peak unknown");
  // PCIe Gen5 x16 moves ~64 GB/s raw, ~50 GB/s in practice; Gen4 half that.
  std::printf("  host-to-device 256 MiB   %8.1f GB/s (pinned; goal >= 20 GB/s): %s\n", h2d_rate / 1e9,
              verdict(h2d_rate >= 20e9));
  std::printf("  device-to-host 256 MiB   %8.1f GB/s (pinned; goal >= 20 GB/s): %s\n", d2h_rate / 1e9,
              verdict(d2h_rate >= 20e9));
  return {{"d2d_bytes", bytes},
          {"d2d_bytes_per_s", d2d_rate},
          {"d2d_fraction_of_peak", peak > 0 ? d2d_rate / peak : 0.0},
          {"h2d_bytes_per_s", h2d_rate},
          {"d2h_bytes_per_s", d2h_rate}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"lab-mlp forward+backward, sgemm and memcpy on one GPU vs the device's peaks"};
  int device = 0, reps = 5, train_steps = 10;
  std::vector<int64_t> batches{64, 1024};
  std::string json_path;
  app.add_option("--device", device, "CUDA device ordinal");
  app.add_option("--batch", batches, "microbatch sizes")->expected(1, 8);
  app.add_option("--reps", reps, "timed repetitions per figure (median reported)");
  app.add_option("--train-steps", train_steps, "timed training steps per microbatch size (median reported)");
  app.add_option("--json", json_path, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);

  const cuda::DeviceList list = cuda::cuda_devices();
  if (list.devices.empty()) {
    std::printf("no CUDA device: %s\n", list.reason.c_str());
    return 0;
  }
  if (device < 0 || device >= static_cast<int>(list.devices.size())) {
    std::fprintf(stderr, "--device %d: this machine has devices 0..%zu\n", device, list.devices.size() - 1);
    return 2;
  }
  try {
    const cuda::DeviceInfo& dev = list.devices[static_cast<size_t>(device)];
    std::printf(
        "device %d: %s\n  fp32 peak %.1f TFLOP/s (%d SMs x %d lanes x 2 x %.2f GHz), "
        "DRAM peak %.0f GB/s\n",
        dev.index, dev.describe().c_str(), dev.fp32_peak_flops_per_s() / 1e12, dev.sm_count, dev.fp32_lanes_per_sm(),
        dev.clock_hz / 1e9, dev.memory_peak_bytes_per_s() / 1e9);
    json out = {{"device",
                 {{"index", dev.index},
                  {"name", dev.name},
                  {"sm_count", dev.sm_count},
                  {"compute_capability", std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor)},
                  {"memory_bytes", dev.memory_bytes},
                  {"fp32_peak_flops_per_s", dev.fp32_peak_flops_per_s()},
                  {"memory_peak_bytes_per_s", dev.memory_peak_bytes_per_s()}}}};
    const MlpShape shape = parlab::model::lab_mlp_preset();
    const double gemm_rate = bench_gemm_rate(dev, reps);
    out["cublas_sgemm_flops_per_s"] = gemm_rate;
    for (int64_t B : batches) {
      json m = bench_model(dev, shape, B, reps);
      const double mfu = m["step_flops_per_s"].get<double>() / gemm_rate;
      std::printf("  forward+backward MFU vs this run's cuBLAS sgemm rate: %5.1f%% (goal >= 50%%): %s\n", 100 * mfu,
                  verdict(mfu >= 0.5));
      m["mfu_vs_cublas"] = mfu;
      out["lab_mlp"].push_back(m);
    }
    for (int64_t B : batches) {
      json pair = json::object();
      for (const bool on_device : {true, false}) {
        try {
          json r = bench_train_step(dev, B, train_steps, gemm_rate, on_device);
          pair[on_device ? "device" : "host"] = r["step_seconds"];
          (on_device ? out["train_step"] : out["train_step_host_optimizer"]).push_back(std::move(r));
        } catch (const std::exception& e) {  // the other figures still count
          std::printf("\ntraining step at microbatch %lld FAILED: %s\n", (long long)B, e.what());
          (on_device ? out["train_step"] : out["train_step_host_optimizer"])
              .push_back({{"batch", B}, {"error", e.what()}});
        }
      }
      if (pair.contains("device") && pair.contains("host"))
        std::printf("  step with AdamW on host copies / on the device: %.2fx\n",
                    pair["host"].get<double>() / pair["device"].get<double>());
    }
    out["memcpy"] = bench_memcpy(dev, reps);
    if (!json_path.empty()) {
      std::ofstream(json_path) << out.dump(2) << "\n";
      std::printf("\nwrote %s\n", json_path.c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gpu: %s\n", e.what());
    return 1;
  }
  return 0;
}
