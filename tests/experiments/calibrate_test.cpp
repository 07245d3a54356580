// Calibration: the alpha-beta fit recovers a known latency and bandwidth from synthetic points,
// the GEMM-rate grid interpolates a known rate law, a calibration made under deliberate load is
// flagged and not cached, and a trusted one writes a cpu-local cluster the cost model loads.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "experiments/lib/calibrate.h"
#include "experiments/lib/calibrate_measure.h"
#include "experiments/lib/calibrate_profile.h"
#include "experiments/lib/measure.h"
#include "runtime/compute/cpu/matmul.h"
#include "strategy/cost_model.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

// Ring all-reduce of S bytes on n ranks, written out from its derivation (2(n-1) steps of a,
// 2(n-1)/n S bytes per link): the synthetic machine the fit must recover.
double ring_allreduce(int n, double bytes, double a, double bw) {
  return 2.0 * (n - 1) * a + 2.0 * (n - 1) / n * bytes / bw;
}

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

// Each all-reduce size is measured as DDP issues its buckets: a burst of back-to-back calls of
// about 32 MB in all (1 to 64 calls), and the time per call.
TEST(AllReduceSeries, MeasuresEachSizeAsABurstOfBucketCalls) {
  EXPECT_EQ(measure::calls_per_burst(1e6), 32);
  EXPECT_EQ(measure::calls_per_burst(4e6), 8);
  EXPECT_EQ(measure::calls_per_burst(16e6), 2);
  EXPECT_EQ(measure::calls_per_burst(64e6), 1);
  EXPECT_EQ(measure::calls_per_burst(64e3), 64);  // capped: a burst of tiny calls stays short
  // Real Gloo on loopback, ranks as threads: each burst and each size returns its time.
  EXPECT_GT(measure::burst_seconds(2, 1e6, 4, 2), 0);
  const std::vector<double> per_call = measure::allreduce_seconds(2, {1e6}, 2);
  ASSERT_EQ(per_call.size(), 1u);
  EXPECT_GT(per_call[0], 0);
  // ZeRO's uneven reduce-scatter and all-gather, the same way.
  for (auto op : {strategy::CollectiveOp::kReduceScatter, strategy::CollectiveOp::kAllGather}) {
    const auto t = measure::sharded_seconds(op, 3, {1e6, 64e3}, 2);
    ASSERT_EQ(t.size(), 2u);
    EXPECT_GT(t[0], 0);
    EXPECT_GT(t[1], 0);
  }
  EXPECT_THROW(measure::sharded_seconds(strategy::CollectiveOp::kAllReduce, 2, {1e6}, 1), ConfigError);
  // Its chunks: the whole buffer, rank 0's about 3/2 of each other's.
  EXPECT_EQ(measure::sharded_counts(3, 4e6), (std::vector<int64_t>{428572, 285714, 285714}));
}

TEST(RateGrid, InterpolatesAPowerLawExactlyAndClampsAtTheEdges) {
  // rate = 1e9 x b^0.5 x w^0.25 with w = sqrt(h f): log-linear, so bilinear interpolation in
  // log space reproduces it between grid points.
  auto law = [](double b, double h, double f) { return 1e9 * std::pow(b, 0.5) * std::pow(std::sqrt(h * f), 0.25); };
  RateGrid g;
  for (auto [h, f] : std::vector<std::pair<int64_t, int64_t>>{{256, 1024}, {1024, 4096}})
    for (int64_t b : {8, 32, 128}) g.points.push_back({b, h, f, law(double(b), double(h), double(f)), 0});
  EXPECT_NEAR(g.flops_per_s(32, 1024, 4096), law(32, 1024, 4096), 1e-6 * law(32, 1024, 4096));  // a grid point
  EXPECT_NEAR(g.flops_per_s(16, 512, 2048), law(16, 512, 2048), 1e-6 * law(16, 512, 2048));     // between
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
  // The workload's rate replaces the cluster's grid: the cost model must not scale it again.
  c.device.gemm_rates = g.device_points();
  EXPECT_TRUE(cluster_for_workload(c, g, 8, 128, 512).device.gemm_rates.empty());
  c.calibrated = false;  // the placeholder preset keeps its own figures
  EXPECT_EQ(cluster_for_workload(c, g, 8, 128, 512).device.peak_flops_fp32, c.device.peak_flops_fp32);
}

// ZeRO's reduce-scatter and all-gather fitted on their own, from points generated by a known
// a and B per rank count: each count's fit recovers them, the points get their fitted times, the
// "all counts" fit exists for the TOML, and a world takes the largest count up to it.
TEST(CalibrationFit, ShardedCollectivesGetFitsOfTheirOwn) {
  std::vector<ShardedPoint> pts;
  const std::map<int, std::pair<double, double>> truth = {{2, {20e-6, 2e9}}, {4, {60e-6, 1e9}}};
  for (const auto& [n, ab] : truth)
    for (double bytes : {1e6, 4e6, 16e6}) {
      ShardedPoint p;
      p.op = "all-gather", p.ranks = n, p.bytes = bytes, p.min_chunk_bytes = bytes / (n + 1);
      p.seconds = (n - 1) * ab.first + (n - 1.0) / n * bytes / ab.second;  // the whole message, however cut
      pts.push_back(p);
    }
  const std::vector<ShardedFit> fits = fit_sharded(pts);
  ASSERT_EQ(fits.size(), 3u);  // counts 0 (all), 2, 4
  for (const ShardedFit& f : fits) {
    EXPECT_EQ(f.op, "all-gather");
    if (f.ranks == 0) continue;
    EXPECT_NEAR(f.latency_seconds, truth.at(f.ranks).first, 1e-9) << f.ranks;
    EXPECT_NEAR(f.link_bytes_per_s, truth.at(f.ranks).second, 1e-3 * truth.at(f.ranks).second) << f.ranks;
    EXPECT_LT(f.weighted_error, 1e-6);
  }
  for (const ShardedPoint& p : pts) EXPECT_NEAR(p.fitted_error(), 0, 1e-6) << p.ranks << " " << p.bytes;
  strategy::LinkSpec link;
  apply_sharded_fits(link, fits, 3);  // 3 workers: the fit of 2
  double a = 0, b = 0;
  ASSERT_TRUE(link.op_fit(strategy::CollectiveOp::kAllGather, a, b));
  EXPECT_NEAR(b, 2e9, 2e6);
  EXPECT_FALSE(link.op_fit(strategy::CollectiveOp::kReduceScatter, a, b));  // none measured
  apply_sharded_fits(link, fits, 8);
  ASSERT_TRUE(link.op_fit(strategy::CollectiveOp::kAllGather, a, b));
  EXPECT_NEAR(b, 1e9, 1e6);
}

TEST(CalibrationWarnings, NameEachReasonNotToTrustACalibration) {
  Calibration c;
  c.hardware_threads = 2;
  c.cluster.cores_per_node = 2;
  c.flops_spread = 0.02;
  c.concurrency = {{1, 10e9, 10e9, 10e9}, {2, 9.5e9, 19e9, 20e9}};
  c.ring_fits = {{2, 50e-6, 1e9, 0.05, 0.04}, {3, 500e-6, 0.8e9, 0.08, 0.10}};
  EXPECT_TRUE(calibration_warnings(c).empty());

  auto with = [&](auto change) {
    Calibration d = c;
    change(d);
    return calibration_warnings(d);
  };
  EXPECT_EQ(with([](Calibration& d) { d.flops_spread = 0.2; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.load.others_busy_cores = 1.0; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.concurrency[1].aggregate_flops_per_s = 11e9; }).size(),
            1u);  // one core's worth
  EXPECT_EQ(with([](Calibration& d) { d.ring_fits[1].weighted_error = 0.3; }).size(), 1u);
  EXPECT_EQ(with([](Calibration& d) { d.ring_fits[0].weighted_spread = 0.4; }).size(), 1u);
}

// What a quiet 2-core machine measured (a busy small message, a fast link at bucket sizes): the
// judgement weights each size by its share of the time, so a 4 kB message that varies +-291%
// and sits 5x off the fit says nothing about DDP buckets of megabytes, while the same
// disagreement at 16 MB does.
TEST(FitRings, JudgesBySharesOfTimeOverTheSizesPredictionsUse) {
  const double a = 60e-6, bw = 1.2e9;
  auto series = [&](int n) {
    std::vector<AllReducePoint> pts;
    for (double s : {4e3, 64e3, 256e3, 1e6, 4e6, 16e6, 64e6})
      pts.push_back({n, s, ring_allreduce(n, s, a, bw), 0.05, 0, 3});
    return pts;
  };
  auto pts = series(2);
  pts[0].seconds *= 5, pts[0].spread = 2.91;  // 4 kB: scheduler noise
  pts[1].seconds *= 3, pts[1].spread = 0.5;   // 64 kB
  auto fits = fit_rings(pts);
  ASSERT_EQ(fits.size(), 1u);
  EXPECT_NEAR(fits[0].latency_seconds, a, 1e-9);  // the unjudged sizes stay out of the fit
  EXPECT_NEAR(fits[0].link_bytes_per_s, bw, 1e-3 * bw);
  EXPECT_LT(fits[0].weighted_error, 1e-9);
  EXPECT_NEAR(fits[0].weighted_spread, 0.05, 1e-12);
  Calibration c;
  c.ring_fits = fits;
  EXPECT_TRUE(calibration_warnings(c).empty());
  EXPECT_NEAR(pts[0].fitted_seconds, ring_allreduce(2, 4e3, a, bw), 1e-12);  // still shown beside its fit

  // The same disagreement where the time is: a 16 MB all-reduce twice as slow and noisy.
  auto bad = series(2);
  bad[5].seconds *= 2, bad[5].spread = 0.6;
  const auto f = fit_rings(bad);
  // By hand: the 16 MB point holds most of the judged time, so its 60% spread dominates.
  double total = 0, spread = 0;
  for (size_t i = 2; i < bad.size(); ++i) total += bad[i].seconds, spread += bad[i].seconds * bad[i].spread;
  EXPECT_NEAR(f[0].weighted_spread, spread / total, 1e-12);
  c.ring_fits = f;
  const auto w = calibration_warnings(c);
  ASSERT_EQ(w.size(), 2u) << "spread and fit error";
  EXPECT_NE(w[0].find("on 2 ranks vary"), std::string::npos) << w[0];
  EXPECT_NE(w[1].find("fit on 2 ranks is off"), std::string::npos) << w[1];
}

TEST(FitRings, FitsEachRankCountOnItsOwnAndPredictsWWorkersWithWRanks) {
  std::vector<AllReducePoint> pts;
  const std::vector<std::pair<double, double>> truth = {{40e-6, 2e9}, {400e-6, 1e9}, {900e-6, 0.6e9}};  // 2, 3, 4 ranks
  for (int n = 2; n <= 4; ++n)
    for (double s : {256e3, 1e6, 16e6})
      pts.push_back({n, s, ring_allreduce(n, s, truth[n - 2].first, truth[n - 2].second), 0, 0, 3});
  const auto fits = fit_rings(pts);
  ASSERT_EQ(fits.size(), 3u);
  for (int n = 2; n <= 4; ++n) {
    EXPECT_EQ(fits[n - 2].ranks, n);
    EXPECT_NEAR(fits[n - 2].latency_seconds, truth[n - 2].first, 1e-9);
    EXPECT_NEAR(fits[n - 2].link_bytes_per_s, truth[n - 2].second, 1e-3 * truth[n - 2].second);
  }
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  EXPECT_NEAR(cluster_for_world(c, fits, 3).intra.latency_seconds, 400e-6, 1e-12);
  EXPECT_NEAR(cluster_for_world(c, fits, 3).inter.bytes_per_s, 1e9, 1e-3);
  EXPECT_NEAR(cluster_for_world(c, fits, 8).intra.latency_seconds, 900e-6, 1e-12);  // beyond: the largest count
  EXPECT_NEAR(cluster_for_world(c, fits, 2).intra.bytes_per_s, 2e9, 1e-3);
  c.calibrated = false;
  EXPECT_EQ(cluster_for_world(c, fits, 3).intra.latency_seconds,
            strategy::load_cluster("cpu-local").intra.latency_seconds);
}

// A busy loop on one core all through calibration: the calibration must say so and must not be
// taken as cached.

// A virtual machine's steal (the hypervisor running someone else on our cores) is time taken from
// the job: /proc/stat's eighth number counts as busy, like another process's time, so a VM that
// slows for a minute shows as load beside the measurement instead of as a model error.
TEST(CalibrateLoad, StealCountsAsTimeTakenFromTheJob) {
  using measure::busy_seconds_of_proc_stat;
  // user nice system idle iowait irq softirq steal guest guest_nice, at 100 ticks a second
  EXPECT_DOUBLE_EQ(busy_seconds_of_proc_stat("cpu  100 0 50 900 10 0 5 0 0 0", 100), 1.55);
  EXPECT_DOUBLE_EQ(busy_seconds_of_proc_stat("cpu  100 0 50 900 10 0 5 45 0 0", 100), 2.0);
  EXPECT_DOUBLE_EQ(busy_seconds_of_proc_stat("cpu  100 0 50 900 10 0 5", 100), 1.55);  // no steal column
  EXPECT_EQ(busy_seconds_of_proc_stat("cpu0 100 0 50 900 10 0 5 45", 100), 0);         // one core's line
  EXPECT_EQ(busy_seconds_of_proc_stat("", 100), 0);
  // Between two samples, the steal is in what others took: 0.45 s of steal over 1 s of wall.
  measure::CpuSample before{0, busy_seconds_of_proc_stat("cpu  100 0 50 900 10 0 5 0", 100), 0};
  measure::CpuSample after{1, busy_seconds_of_proc_stat("cpu  100 0 50 990 10 0 5 45", 100), 0};
  EXPECT_NEAR(measure::others_busy_cores(before, after), 0.45, 1e-12);
}

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
  EXPECT_FALSE(calibrated_here(r.dir));                            // but not cached
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

// A calibration cached before the kernels changed (single rate 26 GFLOP/s where the machine now
// runs 73) passes every other test; one probe of its own compute step says it is stale.
TEST(Calibrate, IfNeededProbesTheComputeRateOfTheCachedCalibration) {
  StoredCalibration s;
  s.model = std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml";
  s.created_at = "2026-01-01T00:00:00Z";
  s.flops_per_s = 1e3;  // far slower than any core runs it: the kernels got faster since
  std::string why = compute_probe_disagrees(s);
  EXPECT_NE(why.find("stale"), std::string::npos) << why;
  EXPECT_NE(why.find("2026-01-01T00:00:00Z"), std::string::npos) << why;
  s.flops_per_s = 1e15;  // far faster than any core: the machine got slower (or is busy)
  EXPECT_NE(compute_probe_disagrees(s).find("stale"), std::string::npos);
  s.flops_per_s = 0;  // nothing to check against: measure again
  EXPECT_FALSE(compute_probe_disagrees(s).empty());
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
  ASSERT_EQ(c.grid.points.size(), 6u);  // quick: 3 microbatches (1, 8, 32) x 2 widths
  // ZeRO's collectives measured beside the all-reduce fit's prediction: one size, both ops, the
  // fit of their own rank count (2 ranks: (n-1) = 1 step of a + S/(2B)).
  ASSERT_EQ(c.sharded.size(), 2u);
  EXPECT_EQ(c.sharded[0].op, "reduce-scatter");
  EXPECT_EQ(c.sharded[1].op, "all-gather");
  for (const auto& p : c.sharded) {
    EXPECT_EQ(p.ranks, 2);
    EXPECT_GT(p.seconds, 0);
    const RingFit& f = c.ring_fits.front();
    EXPECT_NEAR(p.predicted_seconds, f.latency_seconds + p.bytes / 2 / f.link_bytes_per_s, 1e-12);
    // Priced by the bench's smallest chunk (rank 1's 2/5 of S): the link into rank 1 carries
    // rank 0's 3/5.
    const std::vector<int64_t> counts = measure::sharded_counts(2, p.bytes);
    EXPECT_EQ(p.min_chunk_bytes, 4.0 * double(counts[1]));
    EXPECT_NEAR(p.uneven_predicted_seconds, f.latency_seconds + (p.bytes - p.min_chunk_bytes) / f.link_bytes_per_s,
                1e-12);
    EXPECT_GT(p.uneven_predicted_seconds, p.predicted_seconds);
  }
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
  // The calibrated cluster carries the grid, microbatch 1 included (a pipeline of one-sample
  // microbatches), so the planner prices each plan at its own shape's rate.
  bool has_one = false;
  for (const auto& p : c.grid.points) has_one = has_one || p.microbatch == 1;
  EXPECT_TRUE(has_one);
  ASSERT_EQ(loaded.device.gemm_rates.size(), c.grid.points.size());
  EXPECT_NEAR(strategy::gemm_rate_at(loaded.device.gemm_rates, 1, 256, 1024), c.grid.flops_per_s(1, 256, 1024),
              1e-6 * c.grid.flops_per_s(1, 256, 1024));
  // With each point's forward alone (a third of the step's FLOPs, in less than the step's time),
  // stored and carried by the cluster, so the weight-gradient products can be told apart.
  for (size_t i = 0; i < c.grid.points.size(); ++i) {
    const ShapePoint& p = c.grid.points[i];
    EXPECT_GT(p.forward_flops_per_s, p.flops_per_s / 3) << p.microbatch << " x " << p.hidden;
    EXPECT_DOUBLE_EQ(stored->grid.points[i].forward_flops_per_s, p.forward_flops_per_s);
    EXPECT_NEAR(loaded.device.gemm_rates[i].forward_flops_per_s, p.forward_flops_per_s, 1e-6 * p.forward_flops_per_s);
  }
}

// The workload profile's rates, worked out by hand for the tiny MLP: a block's forward is two
// GEMMs (2 h f FLOPs per sample each), the head 2 h C; the backward twice the forward.
TEST(WorkloadProfile, GivesTheClusterThePlansFlopsOverTheProfiledTimes) {
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  WorkloadProfile p;
  p.microbatch = 8;
  p.parameters = m.layers * (2 * m.hidden * m.ffn + m.ffn + m.hidden) + m.hidden * m.classes + m.classes;
  p.fwdbwd_seconds = 3e-3, p.data_seconds = 1e-3, p.optimizer_seconds = 2e-3;
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  strategy::Plan plan = strategy::resolve(strategy::parse_plan("gbs=32,mb=8"), m, 1);
  const auto r = cluster_for_profile(c, m, plan, p);
  const double per_sample = 3.0 * (double(m.layers) * 4 * m.hidden * m.ffn + 2.0 * m.hidden * m.classes);
  EXPECT_NEAR(r.device.peak_flops_fp32, 8 * per_sample / 4e-3, 1e-6 * r.device.peak_flops_fp32);
  EXPECT_NEAR(r.device.achieved_memory_bytes_per_s(), double(p.parameters) * 28 / 2e-3,
              1e-6);  // AdamW: 28 bytes per parameter
  // And the cost model charges exactly the profiled times for one worker: 4 microbatches of
  // 4 ms (forward + backward + data) and one update, after the gradient clear: 4 bytes written
  // per parameter, each written line first read (8 bytes of traffic), at the update's rate; the
  // blocks' weights are not cleared (the four microbatches' weight gradients are one group, whose
  // product writes them).
  const auto e = strategy::estimate_step(m, plan, strategy::with_world(r, 1));
  const double cleared = double(p.parameters - m.layers * 2 * m.hidden * m.ffn);
  const double clear = 8.0 * cleared / (double(p.parameters) * 28 / 2e-3);
  EXPECT_NEAR(e.step_seconds, clear + 4 * 4e-3 + 2e-3, 1e-9);
  // A calibrated cluster's rate grid goes: the profile measured this workload's own rate.
  c.device.gemm_rates = {{1, 64, 256, 1e9}, {8, 64, 256, 8e9}};
  EXPECT_TRUE(cluster_for_profile(c, m, plan, p).device.gemm_rates.empty());
  EXPECT_NEAR(
      strategy::estimate_step(m, plan, strategy::with_world(cluster_for_profile(c, m, plan, p), 1)).step_seconds,
      e.step_seconds, 1e-12);
  c.calibrated = false;  // the placeholder preset keeps its own figures
  EXPECT_EQ(cluster_for_profile(c, m, plan, p).device.peak_flops_fp32, c.device.peak_flops_fp32);
}

TEST(WorkloadProfile, MeasuresTheWorkloadsOwnShape) {
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  const WorkloadProfile p = profile_workload(m, 4, 3);
  EXPECT_EQ(p.microbatch, 4);
  // fc1 and fc2 weights and biases per block, then the head.
  EXPECT_EQ(p.parameters, m.layers * (2 * m.hidden * m.ffn + m.ffn + m.hidden) + m.hidden * m.classes + m.classes);
  EXPECT_GT(p.fwdbwd_seconds, 0);
  EXPECT_GT(p.data_seconds, 0);
  EXPECT_GT(p.optimizer_seconds, 0);
  EXPECT_GT(p.first_touch_bytes_per_s, 0);  // new memory made and zeroed: ZeRO-2/3's buckets
  EXPECT_GE(p.repeats, 3);
  EXPECT_LE(p.repeats, 12);
  EXPECT_THROW(profile_workload(m, 0, 3), ConfigError);
}

// A split's profile runs the rank's own shape (its TP slice of the FFN, its pipeline stage's blocks)
// in as many processes as the plan has workers, started together; a failing count is refused.
TEST(WorkloadProfile, RunsTheRanksShapeInLockstepProcesses) {
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  strategy::Plan plan = strategy::resolve(strategy::parse_plan("tp=2,pp=2,gbs=16,mb=4"), m, 4);
  const WorkloadProfile p = profile_workload(m, plan, 2, 2);
  EXPECT_EQ(p.processes, 2);
  EXPECT_EQ(p.microbatch, 4);
  EXPECT_EQ(p.hidden, m.hidden);
  EXPECT_EQ(p.ffn, m.ffn / 2);
  EXPECT_EQ(p.blocks, (m.layers + 1) / 2);
  EXPECT_EQ(p.parameters, p.blocks * (2 * m.hidden * p.ffn + p.ffn + m.hidden) + m.hidden * m.classes + m.classes);
  EXPECT_GT(p.fwdbwd_seconds, 0);
  EXPECT_GT(p.optimizer_seconds, 0);
  // Each step is also timed to the barrier after it, where the last process arrives: no process's
  // microbatches (nor its update) took longer than that.
  EXPECT_GE(p.microbatch_makespan_seconds, 0.99 * p.microbatch_seconds());
  EXPECT_GE(p.optimizer_makespan_seconds, 0.99 * p.optimizer_seconds);
  // And by the CPU time the work took: some, and (one thread each) no more than the makespan.
  EXPECT_GT(p.microbatch_cpu_seconds, 0);
  EXPECT_GT(p.optimizer_cpu_seconds, 0);
  EXPECT_LE(p.microbatch_cpu_seconds, 1.01 * p.microbatch_makespan_seconds);
  EXPECT_GE(p.repeats, 2);
  // A step's microbatches back to back, as the trainer runs them (gbs 16 / mb 4 / dp 1 = 4).
  EXPECT_EQ(p.microbatches_per_step, plan.microbatches);
  EXPECT_EQ(p.microbatches_per_step, 4);
  // Capped at 8 (the rate is reached by then), or at one weight-gradient group where that is more.
  strategy::Plan many = strategy::resolve(strategy::parse_plan("gbs=2560,mb=64"), m, 1);
  ASSERT_EQ(many.microbatches, 40);
  ASSERT_EQ(strategy::weight_grad_group(many), 8);
  EXPECT_EQ(profile_workload(m, many, 1, 2).microbatches_per_step, 8);
  strategy::Plan small = strategy::resolve(strategy::parse_plan("gbs=160,mb=4"), m, 1);
  ASSERT_EQ(strategy::weight_grad_group(small), 40);
  EXPECT_EQ(profile_workload(m, small, 1, 2).microbatches_per_step, 40) << "one group: its rows' rate";
  EXPECT_THROW(profile_workload(m, plan, 0, 2), ConfigError);
  EXPECT_THROW(profile_workload(m, plan, 65, 2), ConfigError);
}

// A pipeline stage holds microbatches between their forward and backward (1F1B and interleaving:
// pp of them on the first stage; GPipe: every one), so its profile runs them in that order and
// says so; with tensor parallelism too, each group still meets after every block, both ways.
TEST(WorkloadProfile, PipelineStagesRunTheirMicrobatchesInTheStagesOrder) {
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  const auto plan = [&](const std::string& text, int world) {
    return strategy::resolve(strategy::parse_plan(text), m, world);
  };
  EXPECT_EQ(microbatches_in_flight(plan("gbs=16,mb=4", 1), 4), 1);
  EXPECT_EQ(microbatches_in_flight(plan("pp=2,schedule=1f1b,gbs=16,mb=4", 2), 4), 2);
  EXPECT_EQ(microbatches_in_flight(plan("pp=2,schedule=gpipe,gbs=16,mb=4", 2), 4), 4);
  EXPECT_EQ(microbatches_in_flight(plan("pp=4,schedule=1f1b,gbs=8,mb=4", 4), 2), 2) << "no more than a step has";
  const strategy::Plan tp_pp = plan("tp=2,pp=2,schedule=1f1b,gbs=16,mb=4", 4);
  const WorkloadProfile p = profile_workload(m, tp_pp, 4, 2);
  EXPECT_EQ(p.microbatches_in_flight, 2);
  EXPECT_EQ(p.microbatches_per_step, 4);
  EXPECT_EQ(p.tp_meetings_per_microbatch, 2 * ((m.layers + 1) / 2)) << "after each of the stage's blocks, both ways";
  EXPECT_GT(p.fwdbwd_seconds, 0);
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  EXPECT_NE(describe(p, c, tp_pp).find("in a pipeline stage's order (2 in flight)"), std::string::npos);
  const WorkloadProfile flat = profile_workload(m, plan("gbs=16,mb=4", 1), 1, 2);
  EXPECT_EQ(flat.microbatches_in_flight, 1);
  EXPECT_NE(describe(flat, c, strategy::Plan{}).find("back to back"), std::string::npos);
}

// A tensor-parallel plan's profile makes each TP group meet after every block's forward and
// backward, as its all-reduces do (the waits for the group's slowest member are part of its
// microbatch); it says so in its description. One process, or no TP, meets only per step.
TEST(WorkloadProfile, TensorParallelGroupsMeetAfterEveryBlock) {
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  const strategy::Plan tp = strategy::resolve(strategy::parse_plan("tp=2,gbs=8,mb=4"), m, 2);
  const WorkloadProfile synced = profile_workload(m, tp, 2, 2);
  EXPECT_EQ(synced.tp_meetings_per_microbatch, 2 * m.layers) << "after each block, both ways";
  EXPECT_GT(synced.fwdbwd_seconds, 0);
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  EXPECT_NE(describe(synced, c, strategy::Plan{}).find("each tensor-parallel group meeting after every block"),
            std::string::npos);
  EXPECT_EQ(profile_workload(m, tp, 1, 2).tp_meetings_per_microbatch, 0) << "one process has no group to meet";
  const strategy::Plan ddp = strategy::resolve(strategy::parse_plan("gbs=8,mb=4"), m, 2);
  const WorkloadProfile plain = profile_workload(m, ddp, 2, 2);
  EXPECT_EQ(plain.tp_meetings_per_microbatch, 0);
  EXPECT_EQ(describe(plain, c, strategy::Plan{}).find("tensor-parallel"), std::string::npos);
}

// ZeRO-3 under mixed precision converts each gathered layer to bf16 for every pass, where any other
// plan converts once a step: its profile runs the conversions as the rank does (each block weight
// twice a microbatch: its forward's copy and its input gradient's), and says so; DDP's converts
// them twice a step, so a quarter as often at 4 microbatches a step.
TEST(WorkloadProfile, MixedZero3ConvertsItsBf16CopiesEveryPass) {
  if (!compute::cpu::bf16_supported()) GTEST_SKIP() << compute::cpu::bf16_unsupported_reason();
  const strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  const strategy::Plan z3 = strategy::resolve(strategy::parse_plan("zero=3,precision=mixed,gbs=32,mb=4"), m, 2);
  const strategy::Plan ddp = strategy::resolve(strategy::parse_plan("precision=mixed,gbs=32,mb=4"), m, 2);
  ASSERT_EQ(z3.microbatches, 4);
  EXPECT_TRUE(bf16_copies_per_pass(z3));
  EXPECT_FALSE(bf16_copies_per_pass(ddp));
  EXPECT_FALSE(bf16_copies_per_pass(strategy::resolve(strategy::parse_plan("zero=3,gbs=32,mb=4"), m, 2))) << "fp32";
  EXPECT_FALSE(
      bf16_copies_per_pass(strategy::resolve(strategy::parse_plan("zero=3,precision=mixed,gbs=32,mb=4"), m, 1)))
      << "one rank gathers nothing";
  const double weights = 2.0 * double(m.layers);  // fc1 and fc2 of every block (the head stays fp32)
  const WorkloadProfile per_pass = profile_workload(m, z3, 2, 2);
  EXPECT_TRUE(per_pass.bf16_copies_per_pass);
  EXPECT_DOUBLE_EQ(per_pass.bf16_copies_per_microbatch, 2 * weights);
  const WorkloadProfile per_step = profile_workload(m, ddp, 2, 2);
  EXPECT_FALSE(per_step.bf16_copies_per_pass);
  EXPECT_DOUBLE_EQ(per_step.bf16_copies_per_microbatch, 2 * weights / 4);
  strategy::ClusterSpec c = strategy::load_cluster("cpu-local");
  c.calibrated = true;
  EXPECT_NE(describe(per_pass, c, strategy::Plan{}).find("bf16 weight copies made every pass"), std::string::npos);
  EXPECT_EQ(describe(per_step, c, strategy::Plan{}).find("bf16 weight copies"), std::string::npos);
}

// A calibrated cpu-local of two cores, and a hand-made profile of the tiny MLP's whole shape run by
// `processes` processes: 3 ms forward + backward and 1 ms data a microbatch of 8, 2 ms the update.
struct SharedCoreCase {
  strategy::ModelSpec m =
      strategy::load_model(std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml");
  strategy::ClusterSpec c;
  WorkloadProfile p;
  explicit SharedCoreCase(int processes) {
    c = strategy::load_cluster("cpu-local");
    c.calibrated = true;
    c.cores_per_node = 2;
    p.processes = processes;
    p.hidden = m.hidden, p.ffn = m.ffn, p.blocks = m.layers, p.classes = m.classes;
    p.microbatch = 8;
    p.parameters = m.layers * (2 * m.hidden * m.ffn + m.ffn + m.hidden) + m.hidden * m.classes + m.classes;
    p.fwdbwd_seconds = 3e-3, p.data_seconds = 1e-3, p.optimizer_seconds = 2e-3;
  }
  // Forward + backward FLOPs of one sample through the whole model (the step program's count).
  double per_sample() const { return 3.0 * (double(m.layers) * 4 * m.hidden * m.ffn + 2.0 * m.hidden * m.classes); }
};

// Four processes on two cores each measured a shared core: the cluster gets rates per core (x 4/2),
// so that the cost model, which shares the two cores among four ranks, charges each rank exactly
// the profiled times; and a tensor-parallel profile is rated by the slice's FLOPs.
TEST(WorkloadProfile, RatesPerCoreWhereProcessesExceedCores) {
  SharedCoreCase k(4);
  const strategy::ModelSpec& m = k.m;
  const strategy::ClusterSpec& c = k.c;
  WorkloadProfile& p = k.p;
  const strategy::Plan plan = strategy::resolve(strategy::parse_plan("gbs=32,mb=8"), m, 1);
  const double per_sample = k.per_sample();
  const auto r = cluster_for_profile(c, m, plan, p);
  EXPECT_NEAR(r.device.peak_flops_fp32, 2 * 8 * per_sample / 4e-3, 1e-6 * r.device.peak_flops_fp32);
  EXPECT_NEAR(r.device.achieved_memory_bytes_per_s(), 2 * double(p.parameters) * 28 / 2e-3, 1e-6);
  EXPECT_EQ(r.device.first_touch_bytes_per_s, 0);  // not profiled: the cluster's own
  p.first_touch_bytes_per_s = 3e9;
  EXPECT_NEAR(cluster_for_profile(c, m, plan, p).device.first_touch_bytes_per_s, 2 * 3e9, 1e-3);
  p.processes = 2;  // as many as cores: each had its own
  EXPECT_NEAR(cluster_for_profile(c, m, plan, p).device.peak_flops_fp32, 8 * per_sample / 4e-3,
              1e-6 * r.device.peak_flops_fp32);
  p.ffn = m.ffn / 2;  // a tp=2 slice: half of each block's GEMM FLOPs in the same time
  const double slice = 3.0 * (double(m.layers) * 4 * m.hidden * p.ffn + 2.0 * m.hidden * m.classes);
  EXPECT_NEAR(cluster_for_profile(c, m, plan, p).device.peak_flops_fp32, 8 * slice / 4e-3,
              1e-6 * r.device.peak_flops_fp32);
}

// The profile ran the trainer's kernels, which do not recompute: its rate is that of the forward
// and backward alone, whatever the plan, and a plan that recomputes pays its extra forwards on top.
TEST(WorkloadProfile, ARecomputingPlanPaysItsForwardsAgainAtTheProfilesRate) {
  SharedCoreCase k(2);
  const strategy::Plan plain = strategy::resolve(strategy::parse_plan("gbs=32,mb=8"), k.m, 1);
  const strategy::Plan full = strategy::resolve(strategy::parse_plan("gbs=32,mb=8,recompute=full"), k.m, 1);
  const auto a = cluster_for_profile(k.c, k.m, plain, k.p), b = cluster_for_profile(k.c, k.m, full, k.p);
  EXPECT_DOUBLE_EQ(a.device.peak_flops_fp32, b.device.peak_flops_fp32);
  EXPECT_GT(strategy::estimate_step(k.m, full, strategy::with_world(b, 1)).step_seconds,
            1.1 * strategy::estimate_step(k.m, plain, strategy::with_world(a, 1)).step_seconds);
}

// Three processes on two cores: one core ran one of them, which finished its microbatches early,
// so the mean of the processes' own times (4 ms) is faster than what the cores did in a step. The
// rates come from the steps' makespans (5 ms a microbatch, 3 ms the update), shared out again per
// core (x 3/2); with a core per process each rank's own time is its price, as before.
TEST(WorkloadProfile, RatesFromTheMakespanWhereProcessesShareCores) {
  SharedCoreCase k(3);
  const strategy::ModelSpec& m = k.m;
  const strategy::ClusterSpec& c = k.c;
  WorkloadProfile& p = k.p;
  p.microbatch_makespan_seconds = 5e-3, p.optimizer_makespan_seconds = 3e-3;
  const strategy::Plan plan = strategy::resolve(strategy::parse_plan("gbs=32,mb=8"), m, 1);
  const double per_sample = k.per_sample();
  const auto r = cluster_for_profile(c, m, plan, p);
  EXPECT_NEAR(r.device.peak_flops_fp32, 1.5 * 8 * per_sample / 5e-3, 1e-6 * r.device.peak_flops_fp32);
  EXPECT_NEAR(r.device.achieved_memory_bytes_per_s(), 1.5 * double(p.parameters) * 28 / 3e-3, 1e-6);
  EXPECT_NE(describe(p, r, plan)
                .find("3 processes on 2 cores: priced on the steps' makespans, 5.00 ms a microbatch and "
                      "3.00 ms the update"),
            std::string::npos)
      << describe(p, r, plan);
  p.processes = 2;  // a core each: the rank's own times
  const auto own = cluster_for_profile(c, m, plan, p);
  EXPECT_NEAR(own.device.peak_flops_fp32, 8 * per_sample / 4e-3, 1e-6 * own.device.peak_flops_fp32);
  EXPECT_NEAR(own.device.achieved_memory_bytes_per_s(), double(p.parameters) * 28 / 2e-3, 1e-6);
  EXPECT_EQ(describe(p, own, plan).find("makespan"), std::string::npos);
}

}  // namespace parlab::experiments

namespace parlab::experiments {
namespace {

// Two ranks keep a 100 ms cadence, but finish each step up to 30 ms apart (whoever the scheduler
// ran first): each rank's own step time swings between 70 and 130 ms. The measured step time is
// the cadence, 100 ms with no spread; the slowest rank's step time would say 130 ms.
TEST(MeasuredStepTime, IsTheJobsCadenceNotTheSlowestRanksOwnStep) {
  std::vector<launch::StepSummary> steps;
  for (int s = 0; s <= 6; ++s) {
    launch::StepSummary x;
    x.step = s;
    x.end_seconds = 10.0 + 0.1 * s;
    x.step_seconds = s == 0 ? 0.5 : 0.13;  // the warm-up is slow and left out
    steps.push_back(x);
  }
  std::swap(steps[2], steps[5]);  // records arrive in any order
  const parlab::Spread m = measured_step_seconds(steps);
  EXPECT_EQ(m.n, 6);
  EXPECT_NEAR(m.median, 0.1, 1e-9);
  EXPECT_NEAR(m.half_iqr, 0, 1e-9);
  // Without end times (or a missing predecessor) a step counts its slowest rank's time.
  for (auto& x : steps) x.end_seconds = 0;
  EXPECT_NEAR(measured_step_seconds(steps).median, 0.13, 1e-12);
}

}  // namespace
// Where the processes outnumber the cores, a plan whose ranks meet once a step (DDP, ZeRO-1/2) is
// priced on the profile's CPU time, a core's already (no x processes / cores); one whose ranks meet
// inside the step (tensor and pipeline parallelism, ZeRO-3's gathers) on the makespans.
TEST(WorkloadProfile, DataParallelPlansArePricedOnCpuTimeOthersOnMakespans) {
  SharedCoreCase k(4);
  const strategy::ModelSpec& m = k.m;
  const strategy::ClusterSpec& c = k.c;
  WorkloadProfile& p = k.p;
  p.microbatch_makespan_seconds = 5e-3, p.optimizer_makespan_seconds = 3e-3;
  p.microbatch_cpu_seconds = 2.5e-3, p.optimizer_cpu_seconds = 1.25e-3;
  const double per_sample = k.per_sample();
  for (const char* text : {"gbs=32,mb=8", "zero=1,gbs=32,mb=8", "zero=2,gbs=32,mb=8"}) {
    const strategy::Plan plan = strategy::resolve(strategy::parse_plan(text), m, 4);
    EXPECT_EQ(shared_core_pricing(c, plan, p), SharedCorePricing::kCpuTime) << text;
    const auto r = cluster_for_profile(c, m, plan, p);
    EXPECT_NEAR(r.device.peak_flops_fp32, 8 * per_sample / 2.5e-3, 1e-6 * r.device.peak_flops_fp32) << text;
    EXPECT_NEAR(r.device.achieved_memory_bytes_per_s(), double(p.parameters) * 28 / 1.25e-3, 1e-6) << text;
    EXPECT_NE(describe(p, r, plan).find("priced on their CPU time (the ranks meet once a step), 2.50 ms a microbatch"),
              std::string::npos)
        << describe(p, r, plan);
  }
  for (const char* text : {"zero=3,gbs=32,mb=8", "tp=2,gbs=32,mb=8", "pp=2,gbs=32,mb=8"}) {
    const strategy::Plan plan = strategy::resolve(strategy::parse_plan(text), m, 4);
    EXPECT_EQ(shared_core_pricing(c, plan, p), SharedCorePricing::kMakespan) << text;
    const auto r = cluster_for_profile(c, m, plan, p);
    EXPECT_NEAR(r.device.peak_flops_fp32, 2 * 8 * per_sample / 5e-3, 1e-6 * r.device.peak_flops_fp32) << text;
  }
  // Within the cores, the processes' own times whatever the plan.
  p.processes = 2;
  const strategy::Plan ddp = strategy::resolve(strategy::parse_plan("gbs=32,mb=8"), m, 2);
  EXPECT_EQ(shared_core_pricing(c, ddp, p), SharedCorePricing::kOwnTimes);
  EXPECT_NEAR(cluster_for_profile(c, m, ddp, p).device.peak_flops_fp32, 8 * per_sample / 4e-3,
              1e-6 * 8 * per_sample / 4e-3);
}

}  // namespace parlab::experiments
