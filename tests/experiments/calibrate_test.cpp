// Calibration: the alpha-beta fit recovers a known latency and bandwidth from synthetic points,
// the GEMM-rate grid interpolates a known rate law, a calibration made under deliberate load is
// flagged and not cached, and a trusted one writes a cpu-local cluster the cost model loads.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "experiments/lib/calibrate.h"
#include "runtime/compute/cpu/matmul.h"
#include "strategy/cost_model.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

// Ring all-reduce of S bytes on n ranks, written out from its derivation (2(n-1) steps of a,
// 2(n-1)/n S bytes per link): the synthetic machine the fit must recover.
double ring_allreduce(int n, double bytes, double a, double bw) { return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * bytes / bw; }

std::vector<AllReducePoint> synthetic(double a, double bw, double noise) {
  std::vector<AllReducePoint> pts;
  int k = 0;
  for (int n = 2; n <= 4; ++n)
    for (double s : {4e3, 64e3, 1e6, 16e6, 64e6}) {
      // A deterministic +-noise pattern (alternating sign, varying size).
      const double wiggle = noise * ((k % 2) ? 1 : -1) * (0.5 + 0.5 * ((k * 7) % 5) / 4.0);
      ++k;
      pts.push_back({n, s, ring_allreduce(n, s, a, bw) * (1 + wiggle), 0, 0});
    }
  return pts;
}

struct Results {
  fs::path dir = fs::path(::testing::TempDir()) / ("calib-" + std::to_string(::getpid()));
  ~Results() { fs::remove_all(dir); }
};

}  // namespace

TEST(FitAlphaBeta, RecoversAKnownLatencyAndBandwidthExactly) {
  const auto [a, beta] = fit_alpha_beta(synthetic(40e-6, 1.5e9, 0));
  EXPECT_NEAR(a, 40e-6, 1e-12);
  EXPECT_NEAR(1 / beta, 1.5e9, 1e-3);
}

TEST(FitAlphaBeta, StaysCloseUnderFivePercentNoise) {
  const auto [a, beta] = fit_alpha_beta(synthetic(100e-6, 0.8e9, 0.05));
  EXPECT_NEAR(a, 100e-6, 0.1 * 100e-6);
  EXPECT_NEAR(1 / beta, 0.8e9, 0.1 * 0.8e9);
}

TEST(FitAlphaBeta, NoLatencyFitsTheBandwidthAlone) {
  auto pts = synthetic(0, 2e9, 0);
  for (auto& p : pts) p.seconds *= p.bytes < 1e5 ? 0.5 : 1.0;  // small messages "faster": a would be < 0
  const auto [a, beta] = fit_alpha_beta(pts);
  EXPECT_EQ(a, 0);
  EXPECT_GT(1 / beta, 1e9);
  EXPECT_LT(1 / beta, 4e9);
}

TEST(FitAlphaBeta, OneSizeOneWorldCannotSeparateLatencyFromBandwidth) {
  const std::vector<AllReducePoint> one = {{2, 1e6, 1e-3, 0, 0}, {2, 1e6, 1.1e-3, 0, 0}};
  EXPECT_THROW(fit_alpha_beta(one), RuntimeError);
}

TEST(RateGrid, InterpolatesAPowerLawExactlyAndClampsAtTheEdges) {
  // rate = 1e9 x b^0.5 x w^0.25 with w = sqrt(h f): log-linear, so bilinear interpolation in
  // log space reproduces it between grid points.
  auto law = [](double b, double h, double f) { return 1e9 * std::pow(b, 0.5) * std::pow(std::sqrt(h * f), 0.25); };
  RateGrid g;
  for (auto [h, f] : std::vector<std::pair<int64_t, int64_t>>{{256, 1024}, {1024, 4096}})
    for (int64_t b : {8, 32, 128}) g.points.push_back({b, h, f, law(double(b), double(h), double(f)), 0});
  EXPECT_NEAR(g.flops_per_s(32, 1024, 4096), law(32, 1024, 4096), 1e-6 * law(32, 1024, 4096));  // a grid point
  EXPECT_NEAR(g.flops_per_s(16, 512, 2048), law(16, 512, 2048), 1e-6 * law(16, 512, 2048));      // between
  EXPECT_NEAR(g.flops_per_s(64, 700, 1500), law(64, 700, 1500), 1e-6 * law(64, 700, 1500));
  // Outside the grid: the edge's rate, not an extrapolation.
  EXPECT_NEAR(g.flops_per_s(1024, 1024, 4096), law(128, 1024, 4096), 1e-6 * law(128, 1024, 4096));
  EXPECT_NEAR(g.flops_per_s(2, 64, 64), law(8, 256, 1024), 1e-6 * law(8, 256, 1024));
}

TEST(RateGrid, SetsTheWorkloadsRateOnACalibratedCpuLocalOnly) {
  RateGrid g;
  for (int64_t b : {8, 64}) g.points.push_back({b, 128, 512, 1e9 * double(b), 0});
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  EXPECT_NEAR(cluster_for_workload(c, g, 8, 128, 512).device.peak_flops_fp32, 8e9, 1);
  EXPECT_NEAR(cluster_for_workload(c, g, 64, 128, 512).device.peak_flops_fp32, 64e9, 1);
  // The grid is fp32's; the bf16 rate keeps the calibrated bf16 / fp32 ratio.
  c.device.peak_flops_fp32 = 10e9;
  c.device.peak_flops_bf16 = 25e9;
  EXPECT_NEAR(cluster_for_workload(c, g, 8, 128, 512).device.peak_flops_bf16, 2.5 * 8e9, 1);
  c.calibrated = false;  // the placeholder preset keeps its own figures
  EXPECT_EQ(cluster_for_workload(c, g, 8, 128, 512).device.peak_flops_fp32, c.device.peak_flops_fp32);
}

TEST(CalibrationWarnings, NameEachReasonNotToTrustACalibration) {
  Calibration c;
  c.hardware_threads = 2;
  c.cluster.cores_per_node = 2;
  c.flops_spread = 0.02;
  c.concurrency = {{1, 10e9, 10e9, 10e9}, {2, 9.5e9, 19e9, 20e9}};
  c.allreduce = {{2, 16e6, 10e-3, 0.02, 10.5e-3}, {2, 64e3, 200e-6, 0.05, 190e-6}};
  c.fit_median_relative_error = 0.05;
  EXPECT_TRUE(calibration_warnings(c).empty());

  auto with = [&](auto change) {
    Calibration d = c;
    change(d);
    return calibration_warnings(d);
  };
  EXPECT_EQ(with([](Calibration& d) { d.flops_spread = 0.2; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.load.others_busy_cores = 1.0; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.concurrency[1].aggregate_flops_per_s = 11e9; }).size(), 1u);  // one core's worth
  EXPECT_EQ(with([](Calibration& d) { d.allreduce[0].fitted_seconds = 15e-3; }).size(), 1u);        // 50% off at 16 MB
  EXPECT_EQ(with([](Calibration& d) { d.fit_median_relative_error = 0.4; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.allreduce[1].spread = 0.6; }).size(), 1u);
}

// A busy loop on one core all through calibration: the calibration must say so and must not be
// taken as cached.
TEST(Calibrate, UnderDeliberateLoadIsFlaggedAndNotCached) {
  const pid_t busy = ::fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {
    volatile unsigned long x = 0;
    for (;;) x = x + 1;
  }
  CalibrationOptions o;
  o.nproc = 2;
  o.quick = true;
  o.attempts = 1;
  o.model = std::string(PARLAB_SOURCE_DIR) + "/experiments/models/lab-mlp-small.toml";
  Calibration c;
  try {
    c = calibrate(o);
  } catch (...) {
    ::kill(busy, SIGKILL);
    ::waitpid(busy, nullptr, 0);
    throw;
  }
  ::kill(busy, SIGKILL);
  ::waitpid(busy, nullptr, 0);
  EXPECT_FALSE(c.trusted());
  EXPECT_GT(c.load.others_busy_cores, 0.5) << "the busy loop ran all along";
  bool names_load = false;
  for (const auto& w : c.warnings) names_load = names_load || w.find("other processes used") != std::string::npos;
  EXPECT_TRUE(names_load);
  Results r;
  write_calibrated_cluster(c, r.dir);
  EXPECT_TRUE(fs::exists(r.dir / "clusters" / "cpu-local.toml"));  // written for inspection
  EXPECT_FALSE(calibrated_here(r.dir));                              // but not cached
  const auto stored = load_stored_calibration(r.dir);
  ASSERT_TRUE(stored);
  EXPECT_FALSE(stored->trusted);
  EXPECT_EQ(stored->warnings, c.warnings);
}

// --if-needed: measure again with no calibration, a flagged one, or a stale one (its last
// 1-worker measurement is more than 15% from the prediction made with it), and say why.
TEST(Calibrate, IfNeededSaysWhyItMeasuresAgain) {
  Results r;
  EXPECT_NE(why_recalibrate(r.dir, nullptr).find("no calibration"), std::string::npos);
  Calibration c;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  c.machine = host;
  c.created_at = "2026-01-01T00:00:00Z";
  c.cluster = strategy::load_cluster("cpu-local");
  c.cluster.calibrated = true;
  c.warnings = {"compute step times vary +-30% (limit 10%)"};
  write_calibrated_cluster(c, r.dir);
  EXPECT_NE(why_recalibrate(r.dir, nullptr).find("flagged: compute step times vary"), std::string::npos);
  c.warnings.clear();
  write_calibrated_cluster(c, r.dir);
  EXPECT_EQ(why_recalibrate(r.dir, nullptr), "");

  auto store = db::ResultsStore::open(":memory:");
  auto measured = [&](double step, double predicted, const std::string& calibrated_at) {
    const db::RunId id = store.begin_run({.kind = db::RunKind::kMeasured, .model = "lab-mlp", .cluster = "cpu-local"});
    store.set_run_metric(id, "step_seconds", step);
    store.set_run_metric(id, "predicted_step_seconds", predicted);
    store.set_run_param(id, "calibrated_at", calibrated_at);
    store.mark_run_status(id, db::RunStatus::kCompleted);
  };
  EXPECT_EQ(why_recalibrate(r.dir, &store), "");  // nothing measured yet
  measured(1.0, 0.9, c.created_at);               // 10% off: within 15%
  measured(1.0, 0.2, "2025-06-01T00:00:00Z");     // newer, but under an older calibration: says nothing of this one
  EXPECT_EQ(why_recalibrate(r.dir, &store), "");
  measured(1.0, 0.8, c.created_at);  // the newest: 20% off
  const std::string why = why_recalibrate(r.dir, &store);
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  EXPECT_NE(why.find("-20.0%"), std::string::npos) << why;
}

TEST(Calibrate, MeasuresAndWritesALoadableCpuLocalCluster) {
  CalibrationOptions o;
  o.nproc = 2;
  o.quick = true;
  o.attempts = 1;
  o.model = std::string(PARLAB_SOURCE_DIR) + "/experiments/models/lab-mlp-small.toml";
  Calibration c = calibrate(o);
  ASSERT_EQ(c.concurrency.size(), 2u);
  // Physical bounds: a core of the last fifteen years runs a 256-wide fp32 GEMM at more than
  // 1 GFLOP/s and no core reaches 1 TFLOP/s; loopback TCP moves between 10 MB/s and 100 GB/s.
  EXPECT_GT(c.flops_per_s, 1e9);
  EXPECT_LT(c.flops_per_s, 1e12);
  EXPECT_GT(c.link_bytes_per_s, 1e7);
  EXPECT_LT(c.link_bytes_per_s, 1e11);
  EXPECT_LT(c.latency_seconds, 10e-3);
  ASSERT_EQ(c.grid.points.size(), 4u);  // quick: 2 microbatches x 2 widths
  // A bigger microbatch of the same width never runs GEMMs at under half the rate of a smaller.
  EXPECT_GT(c.grid.flops_per_s(32, 256, 1024), 0.5 * c.grid.flops_per_s(8, 256, 1024));
  EXPECT_GT(c.load.loadavg_after, 0);

  Results r;
  c.warnings.clear();  // the caching rule for a trusted calibration, whatever this machine's load
  EXPECT_FALSE(calibrated_here(r.dir));
  write_calibrated_cluster(c, r.dir);
  EXPECT_TRUE(calibrated_here(r.dir));
  ::setenv("PARLAB_RESULTS", r.dir.c_str(), 1);
  const strategy::ClusterSpec loaded = strategy::load_cluster("cpu-local");
  ::unsetenv("PARLAB_RESULTS");
  EXPECT_TRUE(loaded.calibrated);
  EXPECT_NEAR(loaded.device.peak_flops_fp32, c.flops_per_s, 1e-6 * c.flops_per_s);
  // precision=mixed has its own measured rate where the CPU has bf16 matmuls (else fp32's).
  if (compute::cpu::bf16_supported()) {
    EXPECT_GT(c.flops_per_s_bf16, 1e9);
    EXPECT_LT(c.flops_per_s_bf16, 1e13);
    EXPECT_NEAR(loaded.device.peak_flops_bf16, c.flops_per_s_bf16, 1e-6 * c.flops_per_s_bf16);
  } else {
    EXPECT_EQ(c.flops_per_s_bf16, 0);
    EXPECT_NEAR(loaded.device.peak_flops_bf16, c.flops_per_s, 1e-6 * c.flops_per_s);
  }
  EXPECT_NEAR(loaded.intra.bytes_per_s, c.link_bytes_per_s, 1e-6 * c.link_bytes_per_s);
  EXPECT_EQ(loaded.cores_per_node, std::min(c.hardware_threads, 2));
  const auto stored = load_stored_calibration(r.dir);
  ASSERT_TRUE(stored);
  EXPECT_EQ(stored->grid.points.size(), c.grid.points.size());
  EXPECT_DOUBLE_EQ(stored->grid.flops_per_s(16, 128, 512), c.grid.flops_per_s(16, 128, 512));
}

}  // namespace parlab::experiments
