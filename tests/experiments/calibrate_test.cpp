// Calibration measures this machine and writes a cpu-local cluster the cost model then loads.
#include <gtest/gtest.h>

#include <filesystem>

#include "experiments/lib/calibrate.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {

TEST(Calibrate, MeasuresAndWritesALoadableCpuLocalCluster) {
  namespace fs = std::filesystem;
  CalibrationOptions o;
  o.nproc = 2;
  o.quick = true;
  o.model = std::string(PARLAB_SOURCE_DIR) + "/experiments/models/lab-mlp-small.toml";
  const Calibration c = calibrate(o);
  ASSERT_EQ(c.concurrency.size(), 2u);
  EXPECT_GT(c.flops_per_s, 1e8);             // any real core beats 0.1 GFLOP/s
  EXPECT_GT(c.link_bytes_per_s, 1e6);
  EXPECT_GE(c.latency_seconds, 0);
  EXPECT_TRUE(c.cluster.calibrated);
  EXPECT_DOUBLE_EQ(c.cluster.device.peak_flops_fp32, c.flops_per_s);
  EXPECT_DOUBLE_EQ(c.cluster.intra.bytes_per_s, c.link_bytes_per_s);
  // Every all-reduce point is predicted by the fit it produced.
  for (const auto& p : c.allreduce) {
    const double predicted = 2.0 * (p.ranks - 1) * c.latency_seconds + 2.0 * (p.ranks - 1) / p.ranks * p.bytes / c.link_bytes_per_s;
    EXPECT_NEAR(p.fitted_seconds, predicted, 1e-12);
  }

  const fs::path results = fs::path(::testing::TempDir()) / ("calib-" + std::to_string(::getpid()));
  EXPECT_FALSE(calibrated_here(results));
  const fs::path path = write_calibrated_cluster(c, results);
  EXPECT_TRUE(calibrated_here(results));
  ::setenv("PARLAB_RESULTS", results.c_str(), 1);
  const strategy::ClusterSpec loaded = strategy::load_cluster("cpu-local");
  ::unsetenv("PARLAB_RESULTS");
  fs::remove_all(results);
  EXPECT_TRUE(loaded.calibrated);
  EXPECT_NEAR(loaded.device.peak_flops_fp32, c.flops_per_s, 1e-6 * c.flops_per_s);
  EXPECT_NEAR(loaded.intra.bytes_per_s, c.link_bytes_per_s, 1e-6 * c.link_bytes_per_s);
  EXPECT_EQ(loaded.cores_per_node, std::min(c.hardware_threads, 2));
}

}  // namespace parlab::experiments
