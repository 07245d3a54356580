// A short end-to-end batch on a tiny model, 1 and 2 real worker processes: the expected rows
// land in the database (measured, simulated and analytic runs with per-rank timings, a proof)
// and `compare` reads them back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include <unistd.h>

#include "experiments/lib/calibrate.h"
#include "experiments/lib/compare.h"
#include "experiments/lib/fidelity.h"
#include "experiments/lib/kind_splits.h"
#include "experiments/lib/predict_cluster.h"
#include "experiments/lib/runner.h"
#include "strategy/io.h"
#include "strategy/measures.h"
#include "base/stats.h"
#include "tests/support/subprocess.h"
#include "parlab/source_dir.h"
#include "rubric/check_util.h"

namespace parlab::experiments {
namespace fs = std::filesystem;
namespace {

struct Scratch {
  fs::path dir = fs::path(::testing::TempDir()) / ("batch-" + std::to_string(::getpid()));
  Scratch() { fs::create_directories(dir); }
  ~Scratch() { fs::remove_all(dir); }
};

RunnerOptions options(const Scratch& s) {
  RunnerOptions o;
  o.parlab_bin = testing::parlab_bin();
  o.work_dir = s.dir / "runs";
  o.progress = [](const std::string&) {};
  return o;
}

// The trace file a run recorded (empty path when none: file_size then throws and fails the test).
fs::path trace_of(db::ResultsStore& store, db::RunId id) {
  for (const auto& [k, v] : store.run_params(id))
    if (k == "trace") return v;
  ADD_FAILURE() << "run " << id << " recorded no trace";
  return {};
}

const std::string kModel = std::string(PARLAB_SOURCE_DIR) + "/tests/experiments/data/tiny-mlp.toml";

// A splits experiment on the tiny MLP: `body` is the [splits] table's keys after model.
ExperimentSpec splits_spec(const Scratch& s, const std::string& name, const std::string& body) {
  return parse_experiment("name = \"" + name + "\"\nkind = \"splits\"\n[splits]\nmodel = \"" + kModel + "\"\n" + body,
                          (s.dir / (name + ".toml")).string());
}

// The measured step of a run, recomputed here from its per-rank rows: a step ends when its last
// rank finishes it, and lasts from the end of the step before (the job's cadence); steps after
// the warm-up step 0, five of them: the middle one, and half the distance between the second and
// fourth as the spread.
std::pair<double, double> median_and_spread_of_rows(db::ResultsStore& store, db::RunId id) {
  std::map<int64_t, double> last_end;
  for (const auto& t : store.step_timings(id)) {
    EXPECT_TRUE(t.end_seconds.has_value()) << "run " << id << " step " << t.step << " rank " << t.rank;
    last_end[t.step] = std::max(last_end[t.step], t.end_seconds.value_or(0));
  }
  std::vector<double> v;
  for (const auto& [step, end] : last_end)
    if (step > 0) v.push_back(end - last_end.at(step - 1));
  EXPECT_EQ(v.size(), 5u);
  if (v.size() != 5u) return {0, 0};
  std::sort(v.begin(), v.end());
  return {v[2], (v[3] - v[1]) / 2};
}

}  // namespace

// A scaling experiment in rounds predicts every worker count afresh in each round, beside that
// round's measurement: each round runs the worker counts in its order (1, 2 then 2, 1), each
// measured, simulated and analytic in turn (the order of the sources listed); every source's
// figure is the median of its rounds, recorded on its last run, and each error is paired by round.
TEST(BatchEndToEnd, ScalingWithMeasuredSimulatedAndAnalyticLandsItsRows) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "r.db");
  // steps = 3 asks for fewer than a median needs: five are measured anyway.
  const auto spec = parse_experiment("name = \"tiny_scaling\"\nkind = \"scaling\"\n[scaling]\nmodel = \"" + kModel +
                                         "\"\ncluster = \"cpu-local\"\nplan = \"gbs=16\"\nworkers = [1, 2]\nsteps = 3\n"
                                         "rounds = 2\nsources = [\"measured\", \"simulated\", \"analytic\"]\n",
                                     (s.dir / "tiny_scaling.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.runs.size(), 12u);  // 2 rounds x 2 worker counts x (measured + simulated + analytic)
  // Per worker count and source, each round's step in the order run (a prediction once per round).
  std::map<db::RunKind, std::map<int, std::vector<double>>> per_round;
  std::map<db::RunKind, std::map<int, db::RunId>> last;
  std::vector<std::pair<int, db::RunKind>> order;  // (workers, source) of each run, in order
  for (db::RunId id : out.runs) {
    const auto run = store.get_run(id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status, db::RunStatus::kCompleted) << id;
    EXPECT_EQ(run->plan["gbs"], 16);
    const auto metrics = store.run_metrics(id);
    const auto timings = store.step_timings(id);
    double step = metrics.at("step_seconds");
    switch (run->kind) {
      case db::RunKind::kMeasured: {
        EXPECT_GT(fs::file_size(trace_of(store, id)), 100u);
        EXPECT_EQ(int(timings.size()), 6 * run->world_size) << "1 warm-up + 5 measured steps, one row per rank";
        const auto [median, spread] = median_and_spread_of_rows(store, id);
        EXPECT_DOUBLE_EQ(step, median) << "run " << id;
        EXPECT_DOUBLE_EQ(metrics.at("step_seconds_spread"), spread) << "run " << id;
        EXPECT_GE(metrics.at("machine.others_busy_cores"), 0);
        break;
      }
      case db::RunKind::kSimulated:
        EXPECT_EQ(int(timings.size()), run->world_size);  // every simulated rank, one step
        EXPECT_GT(fs::file_size(trace_of(store, id)), 100u);
        break;
      case db::RunKind::kAnalytic:
        EXPECT_EQ(timings.size(), 1u);  // one representative rank per stage
        break;
    }
    per_round[run->kind][run->world_size].push_back(step);
    last[run->kind][run->world_size] = id;
    order.emplace_back(run->world_size, run->kind);
  }
  // Rounds alternate the order, 1, 2 then 2, 1; each worker count predicted beside its measurement.
  std::vector<std::pair<int, db::RunKind>> want;
  for (int w : {1, 2, 2, 1})
    for (db::RunKind k : {db::RunKind::kMeasured, db::RunKind::kSimulated, db::RunKind::kAnalytic})
      want.emplace_back(w, k);
  EXPECT_EQ(order, want);
  const auto& measured = per_round[db::RunKind::kMeasured];
  const auto& simulated = per_round[db::RunKind::kSimulated];
  const auto& analytic = per_round[db::RunKind::kAnalytic];
  for (int w : {1, 2}) {
    // Each measured run carries the analytic prediction of its own round (calibrate --if-needed).
    EXPECT_DOUBLE_EQ(store.run_metrics(last[db::RunKind::kMeasured][w]).at("predicted_step_seconds"),
                     analytic.at(w).back());
    // Every source's rounds on its last run: the median over them, each round's step to pair.
    for (const auto& [kind, steps] : per_round) {
      ASSERT_EQ(steps.at(w).size(), 2u);
      const auto metrics = store.run_metrics(last[kind][w]);
      EXPECT_EQ(metrics.at("rounds"), 2);
      EXPECT_EQ(strategy::round_steps(metrics), steps.at(w));
      EXPECT_DOUBLE_EQ(metrics.at("rounds.step_seconds"), parlab::median(steps.at(w)));
    }
  }

  // compare reads back exactly these figures: over both rounds the median of two is their mean,
  // the speedup the median (mean) of the two rounds' paired ratios, each error the median of the
  // paired per-round errors.
  const Comparison c = compare_experiment(store, "tiny_scaling");
  ASSERT_EQ(c.rows.size(), 2u);
  double worst = 0;
  for (const CompareRow& r : c.rows) {
    const std::vector<double>& meas = measured.at(r.world);
    ASSERT_TRUE(r.measured && r.simulated && r.analytic && r.measured_spread);
    EXPECT_DOUBLE_EQ(*r.measured, (meas[0] + meas[1]) / 2) << r.world;
    EXPECT_DOUBLE_EQ(*r.simulated, parlab::median(simulated.at(r.world)));
    EXPECT_DOUBLE_EQ(*r.analytic, parlab::median(analytic.at(r.world)));
    EXPECT_GE(*r.measured_spread, std::fabs(meas[0] - meas[1]) / 2 * 0.999);
    const double sim_error = strategy::relative_error(simulated.at(r.world), meas).value;
    const double an_error = strategy::relative_error(analytic.at(r.world), meas).value;
    ASSERT_TRUE(r.simulated_error() && r.analytic_error());
    EXPECT_DOUBLE_EQ(*r.simulated_error(), sim_error);
    EXPECT_DOUBLE_EQ(*r.analytic_error(), an_error);
    worst = std::max({worst, std::fabs(sim_error), std::fabs(an_error)});
    // The experiment's own table prints the same paired errors.
    for (double e : {sim_error, an_error}) EXPECT_NE(out.report.find(format_relative(e)), std::string::npos) << e;
  }
  const double paired = (measured.at(1)[0] / measured.at(2)[0] + measured.at(1)[1] / measured.at(2)[1]) / 2;
  ASSERT_TRUE(c.measured_speedup(1));
  EXPECT_NEAR(*c.measured_speedup(1), paired, 1e-12 * paired);
  // Each round's step time is on the last run, in the order measured, so readers pair them.
  EXPECT_EQ(c.rows[1].measured_rounds, measured.at(2));
  EXPECT_EQ(c.rows[0].measured_rounds, measured.at(1));
  EXPECT_EQ(c.rows[1].simulated_rounds, simulated.at(2));
  ASSERT_TRUE(c.worst_simulated_error && c.worst_analytic_error);
  EXPECT_DOUBLE_EQ(std::max(*c.worst_simulated_error, *c.worst_analytic_error), worst);
  EXPECT_NE(c.table().find(" +-"), std::string::npos);  // the spread beside the measurement
  // The scaling report's proof rows carry each source's rounds, which the grader pairs.
  int reports = 0;
  for (const auto& proof : store.list_proofs()) {
    if (proof.kind != "scaling_report") continue;
    ++reports;
    for (const nlohmann::json& row : proof.evidence.at("rows"))
      EXPECT_EQ(row.at("simulated_round_step_seconds").get<std::vector<double>>(),
                simulated.at(row.at("workers").get<int>()));
  }
  EXPECT_EQ(reports, 1);
}

namespace {
// A trusted calibration of this machine in `dir` (its compute as the preset's) whose 2-rank
// all-reduce fit has the given latency and bandwidth.
void write_test_calibration(const std::filesystem::path& dir, double latency_seconds, double bytes_per_s) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  Calibration c;
  c.machine = host;
  c.created_at = "2026-01-01T00:00:00Z";
  c.cluster = strategy::load_cluster("cpu-local");
  c.cluster.calibrated = true;
  c.ring_fits = {{2, latency_seconds, bytes_per_s, 0, 0}};
  write_calibrated_cluster(c, dir);
}
}  // namespace

// On a calibrated cpu-local the scaling experiment predicts from a profile of the workload
// itself (and says so) and each worker count with its own rank count's ring fit: a fit with
// 10 ms per ring step instead of 0.1 ms adds exactly the ring's 2(n-1) steps to the one gradient
// all-reduce of 2 tiny workers, and nothing to 1 worker.
TEST(BatchEndToEnd, CalibratedScalingProfilesTheWorkloadAndUsesEachRankCountsFit) {
  Scratch s;
  auto predict = [&](double latency) {
    write_test_calibration(s.dir, latency, 1e9);
    ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
    auto store = db::ResultsStore::open(":memory:");
    const auto spec = parse_experiment("name = \"tiny_predicted\"\nkind = \"scaling\"\n[scaling]\nmodel = \"" + kModel +
                                           "\"\ncluster = \"cpu-local\"\nplan = \"gbs=16\"\nworkers = [1, 2]\n"
                                           "sources = [\"analytic\"]\n",
                                       (s.dir / "p.toml").string());
    const Outcome out = run_experiment(spec, store, options(s));
    ::unsetenv("PARLAB_RESULTS");
    EXPECT_TRUE(out.ok) << out.error;
    EXPECT_NE(
        out.report.find(
            "1 worker: compute model: a profile of this workload's rank shape (h 32, f 64, 2 blocks) on one process"),
        std::string::npos)
        << out.report;
    // Two workers are profiled as two ranks running together.
    EXPECT_NE(
        out.report.find("2 workers: compute model: a profile of this workload's rank shape (h 32, f 64, 2 blocks) on 2 "
                        "processes in lockstep"),
        std::string::npos)
        << out.report;
    EXPECT_NE(out.report.find("fitted per rank count (2 ranks a = "), std::string::npos) << out.report;
    std::map<int, double> step;
    for (db::RunId id : out.runs) step[store.get_run(id)->world_size] = store.run_metrics(id).at("step_seconds");
    return step;
  };
  const auto fast = predict(100e-6), slow = predict(10e-3);
  // Each run profiles afresh: the tiny model's compute differs by microseconds between them.
  EXPECT_NEAR(slow.at(1), fast.at(1), 2e-3);
  EXPECT_NEAR(slow.at(2) - fast.at(2), 2 * (10e-3 - 100e-6), 2e-3);
}

// A calibrated scaling experiment in rounds profiles every worker count again in each round and
// measures the links of its ranks again there, so each round's predictions are priced on the
// machine as it is beside that round's measurements: the calibration's deliberately slow link
// (10 ms a ring step, >= 20 ms for the gradient all-reduce of 2 workers) prices no prediction.
TEST(BatchEndToEnd, CalibratedScalingInRoundsProfilesAndMeasuresTheLinksEachRound) {
  Scratch s;
  write_test_calibration(s.dir, 10e-3, 1e9);
  ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
  auto store = db::ResultsStore::open(":memory:");
  std::vector<std::string> lines;
  RunnerOptions o = options(s);
  o.progress = [&lines](const std::string& line) { lines.push_back(line); };
  const auto spec = parse_experiment("name = \"tiny_rounds\"\nkind = \"scaling\"\n[scaling]\nmodel = \"" + kModel +
                                         "\"\ncluster = \"cpu-local\"\nplan = \"gbs=16\"\nworkers = [1, 2]\nsteps = 1\n"
                                         "rounds = 2\nsources = [\"analytic\", \"measured\"]\n",
                                     (s.dir / "p.toml").string());
  const Outcome out = run_experiment(spec, store, o);
  ::unsetenv("PARLAB_RESULTS");
  ASSERT_TRUE(out.ok) << out.error;
  const auto count = [&lines](const std::string& what) {
    return std::count_if(lines.begin(), lines.end(),
                         [&](const std::string& l) { return l.find(what) != std::string::npos; });
  };
  EXPECT_EQ(count("profiling the workload"), 4);  // 2 worker counts x 2 rounds
  EXPECT_EQ(count("measuring the links of 2 ranks again"), 2);
  EXPECT_EQ(count("round 2/2"), 5);  // the round's own line, then each source of each worker count
  EXPECT_NE(out.report.find("the links of 2 ranks measured again this round"), std::string::npos) << out.report;
  std::map<int, std::vector<double>> analytic;
  for (db::RunId id : out.runs)
    if (store.get_run(id)->kind == db::RunKind::kAnalytic)
      analytic[store.get_run(id)->world_size].push_back(store.run_metrics(id).at("step_seconds"));
  ASSERT_EQ(analytic[1].size(), 2u);
  ASSERT_EQ(analytic[2].size(), 2u);
  for (double t : analytic[2]) EXPECT_LT(t, 2 * 10e-3);
}

// A splits experiment predicts each split as the scaling kind predicts a worker count: from a
// profile of the split's own rank shape (a tp=2 rank's half of the FFN) on as many processes as it
// has workers, and with its rank count's ring fit (a slow fit slows the DDP all-reduce by exactly
// the ring's 2(n-1) steps).
TEST(BatchEndToEnd, CalibratedSplitsProfileEachSplitsRankShape) {
  Scratch s;
  auto predict = [&](double latency) {
    write_test_calibration(s.dir, latency, 1e9);
    ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
    auto store = db::ResultsStore::open(":memory:");
    const auto spec = splits_spec(s, "tiny_splits",
                                  "cluster = \"cpu-local\"\nworkers = 2\nplans = [\"zero=0\", \"tp=2\"]\n"
                                  "sources = [\"analytic\"]\n");
    const Outcome out = run_experiment(spec, store, options(s));
    ::unsetenv("PARLAB_RESULTS");
    EXPECT_TRUE(out.ok) << out.error;
    EXPECT_NE(out.report.find("rank shape (h 32, f 64, 2 blocks) on 2 processes in lockstep"), std::string::npos)
        << out.report;
    EXPECT_NE(out.report.find("rank shape (h 32, f 32, 2 blocks) on 2 processes in lockstep"), std::string::npos)
        << out.report;
    std::map<int, double> step;  // tp -> analytic step
    for (db::RunId id : out.runs)
      step[store.get_run(id)->plan.value("tp", 1)] = store.run_metrics(id).at("step_seconds");
    return step;
  };
  const auto fast = predict(100e-6), slow = predict(10e-3);
  ASSERT_EQ(fast.size(), 2u);
  EXPECT_NEAR(slow.at(1) - fast.at(1), 2 * (10e-3 - 100e-6), 2e-3);
}

// A split the model cannot take (tp = 3 does not divide the tiny MLP's ffn of 64), listed after
// one that can, fails the experiment before anything is profiled, predicted or measured.
TEST(BatchEndToEnd, ASplitThatCannotRunFailsBeforeAnyOtherIsMeasured) {
  Scratch s;
  auto store = db::ResultsStore::open(":memory:");
  const auto spec = splits_spec(s, "tiny_bad_split",
                                "workers = 3\nplans = [\"zero=0,gbs=24\", \"tp=3,gbs=24\"]\n"
                                "sources = [\"analytic\", \"measured\"]\n");
  const Outcome out = run_experiment(spec, store, options(s));
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("plan.tp = 3: must divide ffn (64)"), std::string::npos) << out.error;
  EXPECT_TRUE(out.runs.empty()) << "nothing ran before the bad plan was found";
}

// A splits experiment with rounds predicts and measures every split once per round, the order
// reversed every other round (A, B, then B, A, then A, B), and each split's figure from each source
// is the median of its rounds, recorded on its last run of that source where compare reads it.
TEST(BatchEndToEnd, SplitsMeasuredInRoundsOfAlternatingOrderReportTheirMedian) {
  Scratch s;
  auto store = db::ResultsStore::open(":memory:");
  const auto spec = splits_spec(s, "tiny_split_rounds",
                                "workers = 2\nplans = [\"zero=0,gbs=16\", \"zero=1,gbs=16\"]\n"
                                "sources = [\"analytic\", \"measured\"]\nrounds = 3\n");
  ASSERT_EQ(std::get<SplitsTask>(spec.task).rounds, 3);
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error;
  std::vector<int> order;                        // zero stage of each measured run, in order
  std::map<int, std::vector<double>> per_round;  // zero stage -> each round's median step
  std::map<int, db::RunId> last;
  std::map<int, std::vector<double>> predicted;  // zero stage -> each round's analytic step
  std::map<int, db::RunId> last_predicted;
  for (db::RunId id : out.runs) {
    const auto run = store.get_run(id);
    const int zero = run->plan.value("zero", 0);
    if (run->kind == db::RunKind::kAnalytic) {
      predicted[zero].push_back(store.run_metrics(id).at("step_seconds"));
      last_predicted[zero] = id;
    }
    if (run->kind != db::RunKind::kMeasured) continue;
    order.push_back(zero);
    per_round[zero].push_back(store.run_metrics(id).at("step_seconds"));
    last[zero] = id;
  }
  EXPECT_EQ(order, (std::vector<int>{0, 1, 1, 0, 0, 1}));
  const Comparison c = compare_experiment(store, "tiny_split_rounds");
  ASSERT_EQ(c.rows.size(), 2u);
  for (const CompareRow& r : c.rows) {
    const std::vector<double>& v = per_round.at(r.zero);
    const auto metrics = store.run_metrics(last.at(r.zero));
    EXPECT_EQ(metrics.at("rounds"), 3);
    EXPECT_EQ(strategy::round_steps(metrics), v);
    ASSERT_TRUE(r.measured && r.measured_spread);
    EXPECT_DOUBLE_EQ(*r.measured, parlab::median(v)) << r.plan;
    // Each round predicted its split afresh beside its measurement; compare reads their median.
    ASSERT_EQ(predicted.at(r.zero).size(), 3u);
    EXPECT_EQ(store.run_metrics(last_predicted.at(r.zero)).at("rounds"), 3);
    ASSERT_TRUE(r.analytic);
    EXPECT_DOUBLE_EQ(*r.analytic, parlab::median(predicted.at(r.zero))) << r.plan;
    EXPECT_GE(*r.measured_spread, (*std::max_element(v.begin(), v.end()) - *std::min_element(v.begin(), v.end())) / 2);
  }
}

// A round of an experiment in rounds measures the links again: the stored calibration's link (a
// deliberately slow 10 ms a step) prices the plan until then, this machine's shared memory (well
// under a millisecond a step) after, and the compute model's note says so.
TEST(BatchEndToEnd, ARoundPricesItsPlansOnLinksMeasuredAgain) {
  Scratch s;
  write_test_calibration(s.dir, 10e-3, 1e9);
  ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
  const strategy::ModelSpec model = strategy::load_model(kModel);
  WorkloadRates rates(strategy::load_cluster("cpu-local"), model);
  const strategy::Plan p = split_at("zero=0,gbs=16", model, 2);
  const PredictionCluster before = rates.for_plan(p, 2);
  rates.measure_links_now(2, /*quick=*/true);
  const PredictionCluster after = rates.for_plan(p, 2);
  ::unsetenv("PARLAB_RESULTS");
  ASSERT_TRUE(rates.profiles());
  EXPECT_DOUBLE_EQ(before.cluster.intra.latency_seconds, 10e-3);
  EXPECT_LT(after.cluster.intra.latency_seconds, 1e-3);
  EXPECT_GT(after.cluster.intra.bytes_per_s, 0);
  EXPECT_EQ(before.note.find("measured again"), std::string::npos) << before.note;
  EXPECT_NE(after.note.find("the links of 2 ranks measured again this round"), std::string::npos) << after.note;
}

// A split is priced on a profile of the step its trainer runs: DDP and ZeRO-1 (a rank's four
// microbatches' weight gradients computed at once) share one, ZeRO-2 (a product every microbatch:
// no groups) gets its own, and each note says which it is.
TEST(BatchEndToEnd, ZeroTwoIsProfiledWithoutTheWeightGradientGroupsOfDdp) {
  Scratch s;
  write_test_calibration(s.dir, 10e-6, 1e9);
  ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
  const strategy::ModelSpec model = strategy::load_model(kModel);
  int profiles = 0;
  WorkloadRates rates(strategy::load_cluster("cpu-local"), model, [&](const std::string& line) {
    profiles += line.find("profiling the workload") != std::string::npos ? 1 : 0;
  });
  const PredictionCluster ddp = rates.for_plan(split_at("zero=0,gbs=32", model, 2), 2);
  const PredictionCluster zero1 = rates.for_plan(split_at("zero=1,gbs=32", model, 2), 2);
  EXPECT_EQ(profiles, 1) << "ZeRO-1 runs DDP's step: one profile";
  const PredictionCluster zero2 = rates.for_plan(split_at("zero=2,gbs=32", model, 2), 2);
  ::unsetenv("PARLAB_RESULTS");
  EXPECT_EQ(profiles, 2) << "ZeRO-2 computes every microbatch's weight gradients: its own profile";
  EXPECT_NE(ddp.note.find("weight gradients over 4 microbatches at once"), std::string::npos) << ddp.note;
  EXPECT_EQ(zero1.note, ddp.note);
  EXPECT_EQ(zero2.note.find("weight gradients over"), std::string::npos) << zero2.note;
}

// The profiled cluster is measured doubles; its proof records the cluster as TOML. The grader
// re-simulates from that record, so the prediction must have run on exactly what was recorded.
TEST(BatchEndToEnd, ProfiledSimulationsReSimulateByteForByteFromTheirRecord) {
  Scratch s;
  write_test_calibration(s.dir, 123.456789e-6, 0.987654321e9);
  ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
  auto store = db::ResultsStore::open(":memory:");
  const auto spec = parse_experiment("name = \"tiny_resimulated\"\nkind = \"scaling\"\n[scaling]\nmodel = \"" + kModel +
                                         "\"\ncluster = \"cpu-local\"\nplan = \"gbs=16\"\nworkers = [1, 2]\n"
                                         "sources = [\"simulated\"]\n",
                                     (s.dir / "p.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ::unsetenv("PARLAB_RESULTS");
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_NE(out.report.find("compute model: a profile of this workload's rank shape"), std::string::npos) << out.report;
  int checked = 0;
  for (const auto& proof : store.list_proofs()) {
    if (proof.kind != "deterministic_simulation") continue;
    EXPECT_EQ(rubric::detail::resimulate(proof.inputs), proof.evidence.at("output_digest").get<std::string>())
        << proof.inputs.dump();
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

// A splits experiment records its simulated rows the same way: each on the profiled cluster of its
// own rank shape, re-simulated byte for byte from the record.
TEST(BatchEndToEnd, SplitsSimulationsReSimulateByteForByteFromTheirRecord) {
  Scratch s;
  write_test_calibration(s.dir, 123.456789e-6, 0.987654321e9);
  ::setenv("PARLAB_RESULTS", s.dir.c_str(), 1);
  auto store = db::ResultsStore::open(":memory:");
  const auto spec =
      parse_experiment("name = \"tiny_splits_resimulated\"\nkind = \"splits\"\n[splits]\nmodel = \"" + kModel +
                           "\"\ncluster = \"cpu-local\"\nworkers = 4\n"
                           "plans = [\"gbs=16\", \"zero=2,gbs=16\", \"pp=2,gbs=16\"]\n"
                           "sources = [\"simulated\"]\n",
                       (s.dir / "p.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ::unsetenv("PARLAB_RESULTS");
  ASSERT_TRUE(out.ok) << out.error;
  std::set<std::string> plans;
  for (const auto& proof : store.list_proofs()) {
    if (proof.kind != "deterministic_simulation") continue;
    EXPECT_EQ(rubric::detail::resimulate(proof.inputs), proof.evidence.at("output_digest").get<std::string>())
        << proof.inputs.dump();
    EXPECT_NE(proof.inputs.at("cluster_toml").get<std::string>().find("calibrated = true"), std::string::npos);
    plans.insert(proof.inputs.at("plan").get<std::string>());
  }
  EXPECT_EQ(plans.size(), 3u) << "one proof per split";
}

TEST(BatchEndToEnd, EquivalenceIsRecordedAsAPassedProof) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "r.db");
  const auto spec =
      parse_experiment("name = \"tiny_equivalence\"\nkind = \"equivalence\"\n[equivalence]\nmodel = \"" + kModel +
                           "\"\nplan = \"gbs=16\"\nworkers = [1, 2]\nsteps = 5\ntolerance = 1e-4\n",
                       (s.dir / "e.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error << "\n" << out.report;
  const auto exp = store.find_experiment("tiny_equivalence");
  ASSERT_TRUE(exp);
  const auto proofs = store.proofs_of_experiment(exp->id);
  ASSERT_EQ(proofs.size(), 1u);
  EXPECT_EQ(proofs[0].kind, "equivalence");
  EXPECT_TRUE(proofs[0].passed);
  // The evidence holds the measured differences, all within the tolerance.
  const auto& ev = proofs[0].evidence.at("2");
  EXPECT_LE(ev.at("grad_relative_difference").get<double>(), 1e-4);
  EXPECT_LE(ev.at("weight_relative_difference").get<double>(), 1e-4);
}

TEST(BatchEndToEnd, EquivalenceOverAListOfPlansComparesEachWithOneWorker) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "r.db");
  const auto spec =
      parse_experiment("name = \"tiny_zero\"\nkind = \"equivalence\"\n[equivalence]\nmodel = \"" + kModel +
                           "\"\nplan = \"gbs=16\"\nplans = [\"zero=1\", \"zero=3\"]\nworkers = [1, 2]\n"
                           "steps = 3\ntolerance = 1e-4\n",
                       (s.dir / "z.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error << "\n" << out.report;
  const auto proofs = store.proofs_of_experiment(store.find_experiment("tiny_zero")->id);
  ASSERT_EQ(proofs.size(), 1u);
  EXPECT_TRUE(proofs[0].passed);
  for (const char* key : {"zero=1@2", "zero=3@2"}) {
    const auto& ev = proofs[0].evidence.at(key);
    EXPECT_LE(ev.at("grad_relative_difference").get<double>(), 1e-4) << key;
    EXPECT_LE(ev.at("weight_relative_difference").get<double>(), 1e-4) << key;
  }
}

}  // namespace parlab::experiments

namespace parlab::experiments {

// The decide experiment end to end on the tiny model and 2 workers: the planner's top plan and
// the best of each other family trained for real in two rounds, each recorded (simulated and
// measured runs, one compare row per plan, the measured step the median of the rounds), and one
// decision_utility proof whose regret and correlation are the measures of its own rows.
TEST(BatchEndToEnd, DecideMeasuresThePlannersChoiceAgainstEachFamily) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "d.db");
  const auto spec = parse_experiment("name = \"tiny_decide\"\nkind = \"decide\"\n[decide]\nmodel = \"" + kModel +
                                         "\"\nworkers = 2\ngbs = 16\ntop = 1\nsteps = 1\nrounds = 2\n",
                                     (s.dir / "tiny_decide.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error << out.report;
  EXPECT_NE(out.report.find("regret"), std::string::npos) << out.report;
  std::vector<db::ProofRecord> decisions;
  size_t simulations = 0;
  for (const db::ProofRecord& p : store.list_proofs()) {
    if (p.kind == "decision_utility") decisions.push_back(p);
    if (p.kind == "deterministic_simulation") ++simulations;
  }
  ASSERT_EQ(decisions.size(), 1u);
  const nlohmann::json rows = decisions[0].evidence.at("candidates");
  // Each candidate's prediction is a simulation on its profile, recorded so it can be re-simulated.
  EXPECT_EQ(simulations, rows.size());
  std::set<std::string> families, plans;
  std::vector<double> predicted, measured;
  for (const nlohmann::json& r : rows) {
    families.insert(r.at("family").get<std::string>());
    plans.insert(r.at("plan").get<std::string>());
    if (!r.contains("measured_step_seconds")) continue;
    predicted.push_back(r.at("predicted_step_seconds").get<double>());
    measured.push_back(r.at("measured_step_seconds").get<double>());
    const auto run = store.get_run(r.at("measured_run").get<db::RunId>());
    ASSERT_TRUE(run);
    EXPECT_EQ(run->kind, db::RunKind::kMeasured);
    EXPECT_EQ(run->plan.at("text").get<std::string>(), r.at("plan").get<std::string>());
    // Measured in two rounds: the candidate's step is the median (mean) of its rounds'.
    const auto metrics = store.run_metrics(run->id);
    EXPECT_EQ(metrics.at("rounds"), 2);
    const std::vector<double> rounds = strategy::round_steps(metrics);
    ASSERT_EQ(rounds.size(), 2u);
    EXPECT_DOUBLE_EQ(measured.back(), parlab::median(rounds));
  }
  EXPECT_EQ(rows.front().at("origin"), "top 1");
  EXPECT_EQ(families, (std::set<std::string>{"DDP", "ZeRO", "tensor", "pipeline"}));
  EXPECT_EQ(plans.size(), rows.size());  // no plan twice
  ASSERT_GE(measured.size(), 2u);
  ASSERT_TRUE(rows.front().contains("measured_step_seconds"));
  const double best = *std::min_element(measured.begin(), measured.end());
  const double regret = strategy::regret(rows.front().at("measured_step_seconds").get<double>(), best);
  char want[64];
  std::snprintf(want, sizeof want, "regret %.1f%%", 100 * regret);
  EXPECT_NE(out.headline.find(want), std::string::npos) << out.headline;
  char rho[64];
  std::snprintf(rho, sizeof rho, "Spearman %.2f over %zu candidates", strategy::spearman(predicted, measured),
                measured.size());
  EXPECT_NE(out.headline.find(rho), std::string::npos) << out.headline;
  // compare shows every candidate as its own row, with its simulated prediction beside the
  // measurement: the very simulation that ranked it.
  std::map<std::string, double> predicted_of;
  for (const nlohmann::json& r : rows)
    predicted_of[r.at("plan").get<std::string>()] = r.at("predicted_step_seconds").get<double>();
  const Comparison c = compare_experiment(store, "tiny_decide");
  EXPECT_EQ(c.rows.size(), measured.size());
  for (const CompareRow& r : c.rows) {
    ASSERT_TRUE(r.measured && r.simulated) << r.split;
    ASSERT_EQ(predicted_of.count(r.plan), 1u) << r.plan;
    EXPECT_DOUBLE_EQ(*r.simulated, predicted_of.at(r.plan)) << r.split;
  }
}

// `parlab plan` on a calibrated cpu-local prices its candidates again on profiles of their own
// rank shapes, as the decide experiment chooses: the planner's top and the best of each family it
// lacks, cheapest on its profile first, that one the choice on this machine; --no-profile keeps
// the grid's price alone; --profile without a calibration is a clear error.
TEST(BatchEndToEnd, PlanPricesItsCandidatesOnProfilesOfThisMachine) {
  Scratch s;
  write_test_calibration(s.dir, 10e-6, 1e9);
  const std::vector<std::string> env = {"PARLAB_RESULTS=" + s.dir.string(), "OPENBLAS_NUM_THREADS=1"};
  const std::vector<std::string> plan = {testing::parlab_bin(),
                                         "plan",
                                         "--model",
                                         kModel,
                                         "--cluster",
                                         "cpu-local",
                                         "--world",
                                         "4",
                                         "--gbs",
                                         "16",
                                         "--top",
                                         "2"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = plan;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::run_process(argv, env);
  };
  const auto r = with({"--profile", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("on_this_machine")) << r.out;
  const nlohmann::json& rows = j["on_this_machine"]["candidates"];
  std::set<std::string> families, plans;
  bool repriced = false;
  for (size_t i = 0; i < rows.size(); ++i) {
    families.insert(rows[i].at("family").get<std::string>());
    plans.insert(rows[i].at("plan").get<std::string>());
    const double profiled = rows[i].at("predicted_step_seconds").get<double>();
    repriced = repriced || profiled != rows[i].at("planner_step_seconds").get<double>();
    if (i > 0) {
      EXPECT_LE(rows[i - 1].at("predicted_step_seconds").get<double>(), profiled) << "cheapest first";
    }
  }
  EXPECT_EQ(families, (std::set<std::string>{"DDP", "ZeRO", "tensor", "pipeline"}));
  EXPECT_EQ(plans.size(), rows.size());
  EXPECT_TRUE(repriced) << "the profiles priced no candidate differently from the grid";
  EXPECT_EQ(j["on_this_machine"]["choice"], rows.front().at("plan"));
  EXPECT_FALSE(j["on_this_machine"]["notes"].empty());

  const auto text = with({"--profile"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Choice on this machine: " + rows.front().at("name").get<std::string>()), std::string::npos)
      << text.out;
  // Where the profiles choose another plan than the grid's first, the explanation says so.
  const bool differs = j["top"][0]["plan"]["text"] != j["on_this_machine"]["choice"];
  EXPECT_EQ(text.out.find("On this machine the profiles put") != std::string::npos, differs) << text.out;
  const auto grid = with({"--no-profile", "--json"});
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  EXPECT_FALSE(nlohmann::json::parse(grid.out).contains("on_this_machine"));

  const auto bare = testing::run_process({testing::parlab_bin(), "plan", "--model", kModel, "--cluster", "dgx-a100",
                                          "--world", "4", "--gbs", "16", "--profile"},
                                         env);
  EXPECT_NE(bare.exit_code, 0);
  EXPECT_NE(bare.err.find("--profile"), std::string::npos) << bare.err;
}

// `parlab simulate --profile` simulates on the rates the experiments predict with: a profile of
// the plan's own rank shape on this machine, not the calibration's rates; without a calibration
// it is a clear error.
TEST(BatchEndToEnd, SimulateOnAProfileOfThePlansShape) {
  Scratch s;
  write_test_calibration(s.dir, 10e-6, 1e9);
  const std::vector<std::string> env = {"PARLAB_RESULTS=" + s.dir.string(), "OPENBLAS_NUM_THREADS=1"};
  auto simulate = [&](const std::string& cluster, bool profile) {
    std::vector<std::string> argv = {
        testing::parlab_bin(), "simulate", "--model", kModel, "--cluster", cluster, "--world", "2", "--plan",
        "dp=2,gbs=16",         "--json"};
    if (profile) argv.push_back("--profile");
    return testing::run_process(argv, env);
  };
  const auto grid = simulate("cpu-local", false), profiled = simulate("cpu-local", true);
  ASSERT_EQ(grid.exit_code, 0) << grid.err;
  ASSERT_EQ(profiled.exit_code, 0) << profiled.err;
  const nlohmann::json a = nlohmann::json::parse(grid.out)["cluster"]["device"];
  const nlohmann::json b = nlohmann::json::parse(profiled.out)["cluster"]["device"];
  EXPECT_NE(a.dump(), b.dump()) << "the profile's rates are the calibration's";
  EXPECT_NE(nlohmann::json::parse(profiled.out).value("compute_model", "").find("a profile of this workload"),
            std::string::npos)
      << profiled.out;
  const auto bare = simulate("dgx-a100", true);
  EXPECT_NE(bare.exit_code, 0);
  EXPECT_NE(bare.err.find("--profile"), std::string::npos) << bare.err;
}

}  // namespace parlab::experiments
