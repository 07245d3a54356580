// A short end-to-end batch on a tiny model, 1 and 2 real worker processes: the expected rows
// land in the database (measured, simulated and analytic runs with per-rank timings, a proof)
// and `compare` reads them back.
#include <gtest/gtest.h>

#include <filesystem>

#include "experiments/lib/compare.h"
#include "experiments/lib/runner.h"
#include "tests/support/subprocess.h"
#include "parlab/source_dir.h"

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

}  // namespace

TEST(BatchEndToEnd, ScalingWithMeasuredSimulatedAndAnalyticLandsItsRows) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "r.db");
  const auto spec = parse_experiment("name = \"tiny_scaling\"\nkind = \"scaling\"\n[scaling]\nmodel = \"" + kModel +
                                         "\"\ncluster = \"cpu-local\"\nplan = \"gbs=16\"\nworkers = [1, 2]\nsteps = 3\n"
                                         "sources = [\"measured\", \"simulated\", \"analytic\"]\n",
                                     (s.dir / "tiny_scaling.toml").string());
  const Outcome out = run_experiment(spec, store, options(s));
  ASSERT_TRUE(out.ok) << out.error;
  ASSERT_EQ(out.runs.size(), 6u);  // 2 worker counts x 3 sources
  int measured = 0, simulated = 0, analytic = 0;
  for (db::RunId id : out.runs) {
    const auto run = store.get_run(id);
    ASSERT_TRUE(run);
    EXPECT_EQ(run->status, db::RunStatus::kCompleted) << id;
    EXPECT_EQ(run->plan["gbs"], 16);
    const auto timings = store.step_timings(id);
    EXPECT_GT(store.run_metrics(id).at("step_seconds"), 0);
    switch (run->kind) {
      case db::RunKind::kMeasured:
        ++measured;
        // The measured timeline was written where the run says (Chrome trace JSON).
        EXPECT_GT(fs::file_size(trace_of(store, id)), 100u);
        // 1 warm-up + 3 measured steps, one row per rank and step.
        EXPECT_EQ(int(timings.size()), 4 * run->world_size) << "run " << id;
        for (const auto& t : timings) EXPECT_TRUE(t.loss.has_value());
        break;
      case db::RunKind::kSimulated:
        ++simulated;
        EXPECT_GT(fs::file_size(trace_of(store, id)), 100u);
        EXPECT_EQ(int(timings.size()), run->world_size);  // every simulated rank, one step
        break;
      case db::RunKind::kAnalytic:
        ++analytic;
        EXPECT_EQ(timings.size(), 1u);  // one representative rank per stage
        break;
    }
  }
  EXPECT_EQ(measured, 2);
  EXPECT_EQ(simulated, 2);
  EXPECT_EQ(analytic, 2);
  const Comparison c = compare_experiment(store, "tiny_scaling");
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_TRUE(c.rows[1].measured && c.rows[1].simulated && c.rows[1].analytic);
  EXPECT_TRUE(c.worst_simulated_error.has_value());
}

TEST(BatchEndToEnd, EquivalenceIsRecordedAsAPassedProof) {
  Scratch s;
  auto store = db::ResultsStore::open(s.dir / "r.db");
  const auto spec = parse_experiment("name = \"tiny_equivalence\"\nkind = \"equivalence\"\n[equivalence]\nmodel = \"" + kModel +
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
  const auto spec = parse_experiment("name = \"tiny_zero\"\nkind = \"equivalence\"\n[equivalence]\nmodel = \"" + kModel +
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
