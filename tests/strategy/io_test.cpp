// Preset loading and TOML error reporting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/errors.h"
#include "strategy/host_cpu.h"
#include "strategy/io.h"
#include "strategy/plan.h"
#include "base/units.h"

namespace parlab::strategy {

TEST(Presets, EveryShippedPresetLoads) {
  const auto models = model_preset_names();
  for (const char* want : {"gpt-22b", "gpt-175b", "gpt-530b", "gpt-1t", "llama2-7b", "llama2-70b", "lab-mlp"})
    EXPECT_NE(std::find(models.begin(), models.end(), want), models.end()) << want;
  for (const auto& n : models) EXPECT_NO_THROW(load_model(n)) << n;
  const auto clusters = cluster_preset_names();
  for (const char* want : {"dgx-a100", "dgx-h100", "h200", "ideal", "cpu-local"})
    EXPECT_NE(std::find(clusters.begin(), clusters.end(), want), clusters.end()) << want;
  for (const auto& n : clusters) EXPECT_NO_THROW(load_cluster(n)) << n;
}

TEST(Presets, ClusterFiguresFromTheirUnits) {
  const ClusterSpec a = load_cluster("dgx-a100");
  EXPECT_DOUBLE_EQ(a.device.memory_bytes, 80 * units::kGiB);
  EXPECT_DOUBLE_EQ(a.inter.bytes_per_s, 25e9);  // 200 Gb/s HDR
  EXPECT_EQ(a.nics_per_node, 8);
  // What NCCL achieves of the node's 8 x 25 GB/s: 0.94 of it (the preset's protocol_efficiency).
  EXPECT_DOUBLE_EQ(a.node_network_bytes_per_s(), 200e9 * 0.94);
  EXPECT_DOUBLE_EQ(a.intra.bytes_per_s, 300e9);
  EXPECT_DOUBLE_EQ(a.intra.achieved_bytes_per_s(), 300e9 * 0.80);
  EXPECT_DOUBLE_EQ(a.intra.latency_seconds, 0.6e-6);  // latency_us = 0.6 (NCCL LL step)
  EXPECT_DOUBLE_EQ(a.device_flops_per_s(Precision::kMixed), 312e12 * 0.859);
  EXPECT_DOUBLE_EQ(a.device.achieved_memory_bytes_per_s(), 2039e9 * 0.88);
  EXPECT_DOUBLE_EQ(load_cluster("h200").device.memory_bytes, 141e9);
  const ClusterSpec ideal = load_cluster("ideal");
  EXPECT_TRUE(std::isinf(ideal.intra.bytes_per_s));
  EXPECT_EQ(ideal.inter.latency_seconds, 0);
  const ClusterSpec cpu = load_cluster("cpu-local");
  EXPECT_EQ(cpu.cores_per_node, 2);
  EXPECT_TRUE(cpu.shares_cores());
}

TEST(Presets, UnknownNameListsTheAvailableOnes) {
  try {
    load_model("gpt-9000");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "--model");
    EXPECT_NE(e.allowed().find("gpt-175b"), std::string::npos);
  }
  EXPECT_THROW(load_cluster("dgx-z"), ConfigError);
  EXPECT_THROW(load_model("does/not/exist.toml"), ConfigError);
}

// An MLP trains on the CPU, whose mixed precision needs bf16 products: one whose TOML names no
// precision trains mixed where the CPU has them and fp32 where it does not (PARLAB_CPU_BF16=off
// stands in for such a CPU), not refused. A named precision, and a transformer's default, stay.
TEST(Toml, AnMlpNamingNoPrecisionTrainsFp32WithoutBf16Products) {
  const std::string mlp = "kind = \"mlp\"\nlayers = 2\nhidden = 8\nffn = 16\nclasses = 4\n";
  ::setenv("PARLAB_CPU_BF16", "off", 1);
  EXPECT_FALSE(host_multiplies_bf16());
  EXPECT_EQ(parse_model_toml(mlp, "a.toml").default_precision, Precision::kFp32);
  EXPECT_EQ(parse_model_toml(mlp + "precision = \"mixed\"\n", "a.toml").default_precision, Precision::kMixed);
  EXPECT_EQ(resolve(parse_plan("dp=2"), parse_model_toml(mlp, "a.toml"), 2).precision, Precision::kFp32);
  EXPECT_EQ(load_model("gpt-175b").default_precision, Precision::kMixed);
  ::unsetenv("PARLAB_CPU_BF16");
  EXPECT_EQ(parse_model_toml(mlp, "a.toml").default_precision,
            host_multiplies_bf16() ? Precision::kMixed : Precision::kFp32);
  EXPECT_EQ(parse_model_toml(mlp + "precision = \"fp32\"\n", "a.toml").default_precision, Precision::kFp32);
}

TEST(Toml, UnknownKeyIsRejectedNotIgnored) {
  try {
    parse_model_toml("name = \"x\"\nkind = \"mlp\"\nlayers = 2\nhidden = 8\nffn = 16\nclasses = 4\nhiden = 3\n",
                     "x.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "x.toml: hiden");
  }
  try {
    parse_cluster_toml(
        "name = \"c\"\n[device]\nmemory_gb = 8\npeak_tflops_fp32 = 1\npeak_tflops_bf16 = 1\n"
        "memory_bandwidth_gb_per_s = 1\nflux = 2\n[intra]\nbandwidth_gb_per_s = 1\n[inter]\nbandwidth_gb_per_s = 1\n",
        "c.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "c.toml: device.flux");
  }
}

TEST(Toml, WrongTypesAndBadValuesNameTheKey) {
  auto field_of = [](const std::string& text) {
    try {
      parse_model_toml(text, "m.toml");
    } catch (const ConfigError& e) {
      return e.field();
    }
    return std::string("(accepted)");
  };
  const std::string base = "kind = \"mlp\"\nhidden = 8\nffn = 16\nclasses = 4\n";
  EXPECT_EQ(field_of(base + "layers = 2\n"), "(accepted)");
  EXPECT_EQ(field_of(base + "layers = \"two\"\n"), "m.toml: layers");
  EXPECT_EQ(field_of(base + "layers = -2\n"), "m.toml: layers");
  // Sizes whose products would overflow, and numbers that are not finite.
  EXPECT_EQ(field_of("kind = \"mlp\"\nlayers = 2\nhidden = 9223372036854775807\nffn = 16\nclasses = 4\n"),
            "m.toml: hidden");
  EXPECT_EQ(field_of(base + "layers = 2\nlr = nan\n"), "m.toml: lr");
  EXPECT_EQ(field_of(base + "layers = 2\nlr = inf\n"), "m.toml: lr");
  EXPECT_EQ(field_of(base + "layers = 2\n[extra]\nx = 1\n"), "m.toml: [extra]");
  EXPECT_EQ(field_of(base + "layers = 2\nkind = \"cnn\"\n").substr(0, 6), "m.toml");  // duplicate key: TOML error
  EXPECT_EQ(field_of("kind = \"cnn\"\n"), "m.toml: kind");
  EXPECT_EQ(field_of(base + "layers = 2\nprecision = \"fp8\"\n"), "m.toml: precision");
}

// Cluster values are checked where they are read, so an error names the key as the file spells it
// (not the field it becomes: intra.bandwidth in bytes/s, device.peak_flops_fp32 in FLOP/s).
TEST(Toml, ClusterErrorsNameTheFilesKeysAndUnknownTables) {
  const std::string good =
      "name = \"c\"\n[device]\nmemory_gb = 8\npeak_tflops_fp32 = 1\npeak_tflops_bf16 = 1\n"
      "memory_bandwidth_gb_per_s = 1\n[intra]\nbandwidth_gb_per_s = 1\n[inter]\nbandwidth_gb_per_s = inf\n";
  auto error_of = [](const std::string& text) {
    try {
      parse_cluster_toml(text, "c.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    t.replace(t.find(from), from.size(), to);
    return t;
  };
  EXPECT_EQ(error_of(good), "(accepted)");  // inf link bandwidth: the ideal cluster
  EXPECT_EQ(error_of(with("[intra]\nbandwidth_gb_per_s = 1", "[intra]\nbandwidth_gb_per_s = -2")),
            "c.toml: intra.bandwidth_gb_per_s = -2: must be a number > 0 and <= 1e+09 (or inf)");
  EXPECT_EQ(error_of(with("peak_tflops_fp32 = 1", "peak_tflops_fp32 = inf")),
            "c.toml: device.peak_tflops_fp32 = inf: must be a finite number");
  EXPECT_EQ(error_of(with("peak_tflops_fp32 = 1\n", "")),
            "c.toml: device.peak_tflops_fp32 = (missing): required: a number > 0");
  EXPECT_EQ(error_of(with("[device]", "[devise]")),
            "c.toml: [devise] = (table): unknown table; allowed: [device], [intra], [inter]");
  EXPECT_EQ(error_of(with("name = \"c\"", "nodes = 99999999999")),
            "c.toml: nodes = 99999999999: must be an integer from 1 to 1048576");
}

// The measured nccl-tests curves of a link: errors name the key (and the element), and a written
// cluster reads back with its curves.
TEST(Toml, MeasuredCurvesAreCheckedAndReadBack) {
  const std::string head =
      "name = \"c\"\n[device]\nmemory_gb = 8\npeak_tflops_fp32 = 1\npeak_tflops_bf16 = 1\n"
      "memory_bandwidth_gb_per_s = 1\n[inter]\nbandwidth_gb_per_s = 1\n[intra]\nkind = \"nvlink3\"\n"
      "bandwidth_gb_per_s = 300\n";
  auto error_of = [&](const std::string& intra) {
    try {
      parse_cluster_toml(head + intra, "c.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_EQ(error_of("measured_sizes_mib = [1, 2]\nmeasured_all_reduce_busbw_gb_per_s = [20, 40]\n"), "(accepted)");
  EXPECT_EQ(error_of("measured_sizes_mib = [1, 2]\nmeasured_all_reduce_busbw_gb_per_s = [20]\n"),
            "c.toml: intra.measured_all_reduce_busbw_gb_per_s = 1 values: one per size of measured_sizes_mib (2)");
  EXPECT_EQ(error_of("measured_sizes_mib = [2, 1]\nmeasured_all_reduce_busbw_gb_per_s = [20, 40]\n"),
            "c.toml: intra.measured_sizes_mib[1] = 1.000000: sizes must ascend");
  EXPECT_EQ(error_of("measured_sizes_mib = [1, 2]\nmeasured_all_reduce_busbw_gb_per_s = [20, -4]\n"),
            "c.toml: intra.measured_all_reduce_busbw_gb_per_s[1] = -4: must be a number > 0 and <= 1e+09");
  EXPECT_EQ(
      error_of("measured_all_gather_busbw_gb_per_s = [20, 40]\n"),
      "c.toml: intra.measured_all_gather_busbw_gb_per_s = (array): needs measured_sizes_mib, the message sizes it "
      "was measured at");
  EXPECT_EQ(error_of("measured_sizes_mib = [1, 2]\n"),
            "c.toml: intra.measured_all_reduce_busbw_gb_per_s = (missing): measured_sizes_mib needs at least the "
            "all-reduce curve");
  const ClusterSpec a100 = load_cluster("dgx-a100");
  ASSERT_TRUE(a100.intra.has_measured_ring());
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(a100, "copy"), "copy.toml");
  EXPECT_EQ(back.intra.measured_sizes_bytes, a100.intra.measured_sizes_bytes);
  ASSERT_EQ(back.intra.measured_all_gather_busbw.size(), a100.intra.measured_all_gather_busbw.size());
  for (size_t i = 0; i < back.intra.measured_all_gather_busbw.size(); ++i)
    EXPECT_NEAR(back.intra.measured_all_gather_busbw[i], a100.intra.measured_all_gather_busbw[i], 1e-3);
}

TEST(Toml, SyntaxErrorsSayWhere) {
  try {
    parse_model_toml("layers = = 3\n", "broken.toml");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field().rfind("broken.toml:1:", 0), 0u) << e.field();
  }
}

TEST(Toml, ClusterWrittenByCalibrationReadsBack) {
  ClusterSpec c = load_cluster("cpu-local");
  c.device.peak_flops_fp32 = 61.25e9;
  c.intra.bytes_per_s = 3.5e9;
  c.intra.latency_seconds = 42e-6;
  c.calibrated = true;
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(c, "calibrated\nby a test"), "cal.toml");
  EXPECT_DOUBLE_EQ(back.device.peak_flops_fp32, c.device.peak_flops_fp32);
  EXPECT_DOUBLE_EQ(back.intra.bytes_per_s, c.intra.bytes_per_s);
  EXPECT_NEAR(back.intra.latency_seconds, c.intra.latency_seconds, 1e-15);
  EXPECT_DOUBLE_EQ(back.device.memory_bytes, c.device.memory_bytes);
  EXPECT_TRUE(back.calibrated);
  EXPECT_EQ(back.cores_per_node, 2);
  EXPECT_EQ(back.device.first_touch_bytes_per_s, 0);  // not measured: not written, read as 0
  c.device.first_touch_bytes_per_s = 1.75e9;
  EXPECT_DOUBLE_EQ(parse_cluster_toml(cluster_to_toml(c, "x"), "cal.toml").device.first_touch_bytes_per_s, 1.75e9);
  // Reduce-scatter's and all-gather's own fits (LinkSpec::op_fit) read back; absent, none.
  double a = 0, b = 0;
  EXPECT_FALSE(back.intra.op_fit(CollectiveOp::kReduceScatter, a, b));
  c.intra.reduce_scatter_latency_seconds = 25e-6, c.intra.reduce_scatter_bytes_per_s = 2.5e9;
  c.intra.all_gather_latency_seconds = 15e-6, c.intra.all_gather_bytes_per_s = 1.5e9;
  const ClusterSpec fits = parse_cluster_toml(cluster_to_toml(c, "x"), "cal.toml");
  ASSERT_TRUE(fits.intra.op_fit(CollectiveOp::kReduceScatter, a, b));
  EXPECT_NEAR(a, 25e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b, 2.5e9);
  ASSERT_TRUE(fits.intra.op_fit(CollectiveOp::kAllGather, a, b));
  EXPECT_NEAR(a, 15e-6, 1e-15);
  EXPECT_DOUBLE_EQ(b, 1.5e9);
  EXPECT_FALSE(fits.intra.op_fit(CollectiveOp::kAllReduce, a, b));
}

// The calibrated CPU's GEMM-rate grid (DeviceSpec::gemm_rates): four arrays, one entry per point,
// read back as written; a partial grid, arrays of different lengths or a missing array are
// refused with the key named.
TEST(Toml, GemmRateGridReadsBackAndMustBeFull) {
  ClusterSpec c = load_cluster("cpu-local");
  c.device.gemm_rates = {
      {1, 256, 1024, 4.5e9}, {32, 256, 1024, 61.25e9}, {1, 1024, 4096, 3.25e9}, {32, 1024, 4096, 80.5e9}};
  const ClusterSpec back = parse_cluster_toml(cluster_to_toml(c, "x"), "cal.toml");
  ASSERT_EQ(back.device.gemm_rates.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(back.device.gemm_rates[i].microbatch, c.device.gemm_rates[i].microbatch);
    EXPECT_EQ(back.device.gemm_rates[i].hidden, c.device.gemm_rates[i].hidden);
    EXPECT_EQ(back.device.gemm_rates[i].ffn, c.device.gemm_rates[i].ffn);
    EXPECT_DOUBLE_EQ(back.device.gemm_rates[i].flops_per_s, c.device.gemm_rates[i].flops_per_s);
  }
  EXPECT_TRUE(parse_cluster_toml(cluster_to_toml(load_cluster("cpu-local"), "x"), "p.toml").device.gemm_rates.empty());
  // The forward rates, where every point has one, travel too; one per point.
  {
    ClusterSpec f = c;
    for (size_t i = 0; i < 4; ++i) f.device.gemm_rates[i].forward_flops_per_s = (i + 1) * 1.5e9;
    const std::string text = cluster_to_toml(f, "");
    const ClusterSpec fb = parse_cluster_toml(text, "f.toml");
    for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(fb.device.gemm_rates[i].forward_flops_per_s, (i + 1) * 1.5e9);
    std::string short_list = text;
    const std::string from = "gemm_rate_forward_gflops = [1.5, 3.0, 4.5, 6.0]";
    ASSERT_NE(short_list.find(from), std::string::npos) << text;
    short_list.replace(short_list.find(from), from.size(), "gemm_rate_forward_gflops = [1.5, 3]");
    EXPECT_THROW(parse_cluster_toml(short_list, "f.toml"), ConfigError);
    EXPECT_EQ(cluster_to_toml(c, "").find("gemm_rate_forward_gflops"), std::string::npos) << "none measured";
  }
  EXPECT_EQ(to_json(back)["device"]["gemm_rates"].size(), 4u);
  auto error_of = [](const std::string& text) {
    try {
      parse_cluster_toml(text, "bad.toml");
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string good = cluster_to_toml(c, "");
  auto with = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  // Three of four points: not every microbatch with every width.
  std::string three = with("gemm_rate_microbatch = [1, 32, 1, 32]", "gemm_rate_microbatch = [1, 32, 1]");
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"gemm_rate_hidden = [256, 256, 1024, 1024]",
                                            "gemm_rate_hidden = [256, 256, 1024]"},
        {"gemm_rate_ffn = [1024, 1024, 4096, 4096]", "gemm_rate_ffn = [1024, 1024, 4096]"},
        {"gemm_rate_gflops = [4.5, 61.25, 3.25, 80.5]", "gemm_rate_gflops = [4.5, 61.25, 3.25]"}}) {
    const size_t at = three.find(from);
    ASSERT_NE(at, std::string::npos) << from << " in\n" << three;
    three.replace(at, from.size(), to);
  }
  EXPECT_NE(error_of(three).find("full grid"), std::string::npos) << error_of(three);
  // Arrays of different lengths.
  const std::string uneven = with("gemm_rate_microbatch = [1, 32, 1, 32]", "gemm_rate_microbatch = [1, 32, 1]");
  EXPECT_NE(error_of(uneven).find("one per point"), std::string::npos) << error_of(uneven);
  // A point given twice.
  const std::string twice = with("gemm_rate_microbatch = [1, 32, 1, 32]", "gemm_rate_microbatch = [1, 1, 1, 32]");
  EXPECT_NE(error_of(twice).find("once"), std::string::npos) << error_of(twice);
  // One of the four arrays missing.
  const std::string missing = with("gemm_rate_ffn = [1024, 1024, 4096, 4096]\n", "");
  EXPECT_NE(error_of(missing).find("all four"), std::string::npos) << error_of(missing);
}

TEST(Presets, UserFileUnderResultsTakesPrecedence) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("parlab-io-test-" + std::to_string(::getpid()));
  fs::create_directories(dir / "clusters");
  ClusterSpec c = load_cluster("cpu-local");
  c.device.peak_flops_fp32 = 77e9;
  std::ofstream(dir / "clusters" / "cpu-local.toml") << cluster_to_toml(c, "test");
  ::setenv("PARLAB_RESULTS", dir.c_str(), 1);
  const ClusterSpec loaded = load_cluster("cpu-local");
  ::unsetenv("PARLAB_RESULTS");
  fs::remove_all(dir);
  EXPECT_DOUBLE_EQ(loaded.device.peak_flops_fp32, 77e9);
}

}  // namespace parlab::strategy
