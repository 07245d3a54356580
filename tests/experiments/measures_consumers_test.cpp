// Run-level measures have one home (strategy/measures.h) and every consumer reads a database's
// rows through it: `parlab compare`, the grader's efficiency report and the decision check. On
// noisy rows -- rounds where the paired speedup and the ratio of medians disagree -- they must
// give one answer. And compare keeps one row per plan: a splits experiment's four splits on one
// worker count are four rows, each with its own error and spread, and a later run replaces only
// its own plan's row. The decide experiment's arithmetic (family, regret, correlation) is checked
// on known candidates. Rows are written in memory in the shape the experiments record.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/lib/compare.h"
#include "experiments/lib/cpu_validation.h"
#include "experiments/lib/decide.h"
#include "parlab/source_dir.h"
#include "rubric/checks.h"
#include "rubric/evidence.h"
#include "rubric/grade.h"
#include "rubric/measures.h"
#include "strategy/io.h"
#include "strategy/measures.h"

namespace parlab::experiments {
namespace {

struct Db {
  db::ResultsStore store = db::ResultsStore::open(":memory:");
  db::ExperimentId exp;
  explicit Db(const std::string& name) : exp(store.upsert_experiment({name, name + ".toml", ""})) {}

  db::RunId run(db::RunKind kind, const strategy::Plan& plan, double step, std::map<std::string, double> extra = {}) {
    db::NewRun nr;
    nr.experiment = exp;
    nr.kind = kind;
    nr.model = "lab-mlp";
    nr.cluster = "cpu-local";
    nr.plan = strategy::to_json(plan);
    nr.world_size = plan.world();
    const db::RunId id = store.begin_run(nr);
    store.set_run_metric(id, "step_seconds", step);
    for (const auto& [k, v] : extra) store.set_run_metric(id, k, v);
    store.mark_run_status(id, db::RunStatus::kCompleted);
    return id;
  }
};

strategy::Plan plan_at(const std::string& text, int workers) {
  const strategy::ModelSpec model = strategy::load_model("lab-mlp");
  strategy::Plan p = strategy::parse_plan(text);
  if (!p.was_given("dp")) p.given.push_back("dp");
  p.dp = workers / (p.tp * p.pp);
  return strategy::resolve(p, model, workers);
}

// Three rounds at 1 and 2 workers, round 1 loud: paired median 2.0, ratio of medians 1.82.
const std::vector<double> kOne = {1.0, 1.2, 1.0}, kTwo = {0.5, 0.6, 0.55};

std::map<std::string, double> rounds_metrics(const std::vector<double>& v) {
  std::map<std::string, double> m = {
      {"rounds", double(v.size())}, {"rounds.step_seconds", parlab::median(v)}, {"rounds.step_seconds_spread", 0.05}};
  for (size_t r = 0; r < v.size(); ++r) m[strategy::round_step_metric(int(r))] = v[r];
  return m;
}

TEST(OneEstimator, CompareAndTheGraderGiveTheOneSpeedupOnNoisyRounds) {
  const double want = strategy::speedup(kOne, kTwo, 64, 64).value;
  ASSERT_DOUBLE_EQ(want, 2.0);
  ASSERT_GT(std::fabs(want - parlab::median(kOne) / parlab::median(kTwo)), 0.15);

  Db d("noisy_scaling");
  const strategy::Plan p1 = plan_at("gbs=128", 1), p2 = plan_at("gbs=128", 2);
  const db::RunId m1 = d.run(db::RunKind::kMeasured, p1, 1.0, rounds_metrics(kOne));
  const db::RunId m2 = d.run(db::RunKind::kMeasured, p2, 0.55, rounds_metrics(kTwo));
  d.run(db::RunKind::kSimulated, p1, 0.9);
  d.run(db::RunKind::kSimulated, p2, 0.5);
  const Comparison c = compare_experiment(d.store, "noisy_scaling");
  ASSERT_EQ(c.rows.size(), 2u);
  ASSERT_TRUE(c.measured_speedup(1));
  EXPECT_DOUBLE_EQ(*c.measured_speedup(1), want);
  EXPECT_NE(c.table().find("2.00x"), std::string::npos) << c.table();

  // The scaling report's rows as kind_scaling records them; the grader's efficiency at 2 workers.
  db::ProofRecord proof;
  proof.experiment = d.exp;
  proof.kind = "scaling_report";
  proof.evidence = {{"rows",
                     {{{"workers", 1},
                       {"global_batch", 128},
                       {"measured_step_seconds", parlab::median(kOne)},
                       {"measured_run", m1},
                       {"measured_round_step_seconds", kOne}},
                      {{"workers", 2},
                       {"global_batch", 128},
                       {"measured_step_seconds", parlab::median(kTwo)},
                       {"measured_run", m2},
                       {"measured_round_step_seconds", kTwo}}}}};
  d.store.add_proof(proof);
  const rubric::Evidence e = rubric::read_evidence(d.store);
  const rubric::Rubric r = rubric::parse_rubric(
      "[[criterion]]\nid = \"eff\"\npoints = 1\ncheck = \"efficiency_report\"\nworkers = [\"1\", \"2\"]\n", "t.toml");
  rubric::CriterionResult out;
  rubric::find_check("efficiency_report")->judge(r.criteria[0], e, rubric::GradeOptions{}, out);
  bool found = false;
  for (const rubric::Measurement& m : out.measurements)
    if (m.figure == "efficiency at 2 workers") {
      found = true;
      EXPECT_DOUBLE_EQ(m.value, strategy::efficiency(want, 2, 1));
    }
  EXPECT_TRUE(found);
}

// A split predicted afresh in each round beside its measurement: compare's error (and the CPU
// table's, from the same row) is the median of the paired per-round errors, not the medians'.
TEST(OneEstimator, CompareErrorsPairPredictionsWithTheirRoundsMeasurements) {
  const std::vector<double> pred = {0.9, 0.5, 1.2}, meas = {1.0, 1.0, 2.0};
  const double want = strategy::relative_error(pred, meas).value;  // -40%
  ASSERT_GT(std::fabs(want - strategy::relative_error(parlab::median(pred), parlab::median(meas))), 0.25);
  Db d("split_rounds");
  const strategy::Plan p = plan_at("zero=3,gbs=128", 2);
  d.run(db::RunKind::kSimulated, p, pred.back(), rounds_metrics(pred));
  d.run(db::RunKind::kAnalytic, p, pred.back());  // one prediction: the medians' error
  d.run(db::RunKind::kMeasured, p, meas.back(), rounds_metrics(meas));
  const Comparison c = compare_experiment(d.store, "split_rounds");
  ASSERT_EQ(c.rows.size(), 1u);
  ASSERT_TRUE(c.rows[0].simulated_error() && c.rows[0].analytic_error());
  EXPECT_DOUBLE_EQ(*c.rows[0].simulated_error(), want);
  EXPECT_DOUBLE_EQ(*c.rows[0].analytic_error(), pred.back() / parlab::median(meas) - 1);
  EXPECT_DOUBLE_EQ(*c.worst_simulated_error, std::fabs(want));
  EXPECT_NE(c.table().find("-40.0%"), std::string::npos) << c.table();
}

// A scaling experiment in rounds predicts every worker count afresh beside each round's
// measurement: compare's predicted speedup and error, and the grader's error from the scaling
// report's rows, pair the rounds (not the medians, which give 1.90x and -9.1% here).
TEST(OneEstimator, ScalingPredictionsInRoundsArePairedByCompareAndTheGrader) {
  const std::vector<double> sim1 = {0.9, 1.1, 0.95}, sim2 = {0.4, 0.5, 0.6};
  const double want_speedup = strategy::speedup(sim1, sim2, 128, 128).value;  // 2.20x
  const double want_error = strategy::relative_error(sim2, kTwo).value;       // -16.7%
  ASSERT_GT(std::fabs(want_speedup - parlab::median(sim1) / parlab::median(sim2)), 0.25);
  ASSERT_GT(std::fabs(want_error - strategy::relative_error(parlab::median(sim2), parlab::median(kTwo))), 0.05);
  Db d("scaling_rounds");
  const strategy::Plan p1 = plan_at("gbs=128", 1), p2 = plan_at("gbs=128", 2);
  const db::RunId m1 = d.run(db::RunKind::kMeasured, p1, kOne.back(), rounds_metrics(kOne));
  const db::RunId m2 = d.run(db::RunKind::kMeasured, p2, kTwo.back(), rounds_metrics(kTwo));
  d.run(db::RunKind::kSimulated, p1, sim1.back(), rounds_metrics(sim1));
  d.run(db::RunKind::kSimulated, p2, sim2.back(), rounds_metrics(sim2));
  const Comparison c = compare_experiment(d.store, "scaling_rounds");
  ASSERT_EQ(c.rows.size(), 2u);
  ASSERT_TRUE(c.rows[1].simulated_error());
  EXPECT_DOUBLE_EQ(*c.rows[1].simulated_error(), want_error);
  EXPECT_NE(c.table().find("2.20x"), std::string::npos) << c.table();
  EXPECT_EQ(c.table().find("1.90x"), std::string::npos) << c.table();

  // The report's rows as kind_scaling records them: each source's median and its rounds.
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& [w, run, meas, sim] : {std::tuple{1, m1, kOne, sim1}, std::tuple{2, m2, kTwo, sim2}})
    rows.push_back({{"workers", w},
                    {"global_batch", 128},
                    {"measured_step_seconds", parlab::median(meas)},
                    {"measured_run", run},
                    {"measured_round_step_seconds", meas},
                    {"simulated_step_seconds", parlab::median(sim)},
                    {"simulated_round_step_seconds", sim}});
  db::ProofRecord proof;
  proof.experiment = d.exp;
  proof.kind = "scaling_report";
  proof.evidence = {{"rows", rows}};
  d.store.add_proof(proof);
  const rubric::Rubric r = rubric::parse_rubric(
      "[[criterion]]\nid = \"eff\"\npoints = 1\ncheck = \"efficiency_report\"\nworkers = [\"1\", \"2\"]\n", "t.toml");
  rubric::CriterionResult out;
  rubric::find_check("efficiency_report")
      ->judge(r.criteria[0], rubric::read_evidence(d.store), rubric::GradeOptions{}, out);
  std::map<std::string, double> got;
  for (const rubric::Measurement& m : out.measurements) got[m.figure] = m.value;
  EXPECT_DOUBLE_EQ(got.at("simulated error at 2 workers"), std::fabs(want_error));
  EXPECT_DOUBLE_EQ(got.at("simulated error at 1 workers"), std::fabs(strategy::relative_error(sim1, kOne).value));
}

TEST(OneRowPerSplit, CompareKeysRowsByTheWholePlan) {
  Db d("splits_2w");
  const std::vector<std::string> texts = {"zero=0", "zero=3", "tp=2", "pp=2,schedule=1f1b,microbatches=4"};
  std::map<std::string, double> sim;
  for (size_t i = 0; i < texts.size(); ++i) {
    const strategy::Plan p = plan_at(texts[i], 2);
    d.run(db::RunKind::kAnalytic, p, 0.10 + 0.01 * double(i));
    d.run(db::RunKind::kSimulated, p, 0.20 + 0.01 * double(i));
    d.run(db::RunKind::kMeasured, p, 0.25 + 0.02 * double(i), {{"step_seconds_spread", 0.001 * double(i + 1)}});
  }
  Comparison c = compare_experiment(d.store, "splits_2w");
  ASSERT_EQ(c.rows.size(), 4u) << c.table();
  for (size_t i = 0; i < texts.size(); ++i) {
    const CompareRow& r = c.rows[i];
    EXPECT_EQ(r.plan, plan_at(texts[i], 2).to_string());  // in the order first run
    ASSERT_TRUE(r.measured && r.simulated && r.analytic && r.measured_spread);
    EXPECT_DOUBLE_EQ(*r.measured, 0.25 + 0.02 * double(i));
    EXPECT_DOUBLE_EQ(*r.simulated, 0.20 + 0.01 * double(i));
    EXPECT_DOUBLE_EQ(*r.measured_spread, 0.001 * double(i + 1));
    EXPECT_NE(c.table().find(r.split), std::string::npos) << r.split;
  }
  // Labels tell every split apart, pipelines by their schedule and microbatches.
  EXPECT_EQ(c.rows[0].split, "DDP x2");
  EXPECT_EQ(c.rows[1].split, "ZeRO-3 x2");
  EXPECT_EQ(c.rows[2].split, "TP 2");
  EXPECT_EQ(c.rows[3].split, "PP 2 1f1b m4");
  EXPECT_NEAR(*c.worst_simulated_error, std::fabs(0.23 / 0.31 - 1), 1e-12);

  // A later measured run of one split replaces that split's row alone.
  d.run(db::RunKind::kMeasured, plan_at("zero=3", 2), 0.5, {{"step_seconds_spread", 0.01}});
  c = compare_experiment(d.store, "splits_2w");
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_DOUBLE_EQ(*c.rows[1].measured, 0.5);
  EXPECT_DOUBLE_EQ(*c.rows[0].measured, 0.25);
  EXPECT_DOUBLE_EQ(*c.rows[2].measured, 0.29);
  // A pipeline of another schedule is another row, not an overwrite; so is recomputation.
  d.run(db::RunKind::kMeasured, plan_at("pp=2,schedule=gpipe,microbatches=4", 2), 0.4);
  d.run(db::RunKind::kMeasured, plan_at("pp=2,schedule=1f1b,microbatches=4,recompute=full", 2), 0.45);
  c = compare_experiment(d.store, "splits_2w");
  ASSERT_EQ(c.rows.size(), 6u);
  EXPECT_EQ(c.rows[4].split, "PP 2 gpipe m4");
  EXPECT_EQ(c.rows[5].split, "PP 2 1f1b m4 recompute full");
  // Two plans the label cannot tell apart (bucket size) are each named by what sets them apart.
  d.run(db::RunKind::kMeasured, plan_at("zero=0,bucket_mb=1", 2), 0.3);
  c = compare_experiment(d.store, "splits_2w");
  ASSERT_EQ(c.rows.size(), 7u);
  EXPECT_EQ(c.rows[0].split, "DDP x2 (bucket_mb=25)");
  EXPECT_EQ(c.rows[6].split, "DDP x2 (bucket_mb=1)");
  // Mixed precision is part of the split's name: ZeRO-3 in both precisions are two rows.
  d.run(db::RunKind::kMeasured, plan_at("zero=3,precision=mixed", 2), 0.35);
  c = compare_experiment(d.store, "splits_2w");
  ASSERT_EQ(c.rows.size(), 8u);
  EXPECT_EQ(c.rows[1].split, "ZeRO-3 x2");
  EXPECT_EQ(c.rows[7].split, "ZeRO-3 x2 mixed");
}

DecideCandidate cand(const std::string& name, const std::string& family, double predicted,
                     std::optional<double> measured) {
  DecideCandidate c;
  c.name = c.plan = name;
  c.family = family;
  c.predicted_step_seconds = predicted;
  c.global_batch = 64;
  c.measured_step_seconds = measured;
  if (!measured) c.not_run = "refused";
  return c;
}

TEST(DecideArithmetic, RegretAgainstTheFastestAndTheRankCorrelation) {
  EXPECT_EQ(plan_family(plan_at("zero=0", 4)), "DDP");
  EXPECT_EQ(plan_family(plan_at("zero=2", 4)), "ZeRO");
  EXPECT_EQ(plan_family(plan_at("tp=2", 4)), "tensor");
  EXPECT_EQ(plan_family(plan_at("tp=2,pp=2", 4)), "pipeline");

  // The planner put PP first at 0.12 s; it ran 0.40 s, DDP 0.30 s (the fastest), ZeRO 0.35 s;
  // tensor was refused. Regret = 1 - 0.30 / 0.40 = 25%. Predicted order PP < TP < DDP < ZeRO,
  // measured (of the three) DDP < ZeRO < PP: ranks (1 2 3) against (3 1 2): rho = -0.5.
  const std::vector<DecideCandidate> c = {cand("PP 4", "pipeline", 0.12, 0.40),
                                          cand("TP 2", "tensor", 0.13, std::nullopt), cand("DDP x4", "DDP", 0.20, 0.30),
                                          cand("ZeRO-1 x4", "ZeRO", 0.21, 0.35)};
  const Decision d = decide(c);
  EXPECT_EQ(d.measured, 3);
  ASSERT_TRUE(d.fastest && d.regret && d.spearman);
  EXPECT_EQ(*d.fastest, 2u);
  EXPECT_DOUBLE_EQ(*d.regret, 0.25);
  EXPECT_NEAR(*d.spearman, -0.5, 1e-12);
  // A first choice that was not measured has no regret.
  std::vector<DecideCandidate> unmeasured = c;
  unmeasured[0].measured_step_seconds.reset();
  EXPECT_FALSE(decide(unmeasured).regret);

  // The grader recomputes the same from the recorded rows, and judges them by its thresholds.
  rubric::Evidence e;
  rubric::Proof p;
  p.row.id = 7;
  p.row.kind = "decision_utility";
  p.trusted = true;
  p.inputs = {{"workers", 4}};
  nlohmann::json rows = nlohmann::json::array();
  for (const DecideCandidate& x : c) rows.push_back(to_json(x));
  p.evidence = {{"candidates", rows}, {"chosen", 0}};
  e.proofs.push_back(p);
  auto judge = [&](const std::string& thresholds) {
    const rubric::Rubric r = rubric::parse_rubric(
        "[[criterion]]\nid = \"du\"\npoints = 1\ncheck = \"decision_utility\"\n[criterion.thresholds]\n" + thresholds,
        "t.toml");
    rubric::CriterionResult out;
    rubric::find_check("decision_utility")->judge(r.criteria[0], e, rubric::GradeOptions{}, out);
    return out;
  };
  const rubric::CriterionResult strict = judge("");
  EXPECT_EQ(strict.status, rubric::Status::kFailed);
  std::map<std::string, double> got;
  for (const rubric::Measurement& m : strict.measurements) got[m.figure] = m.value;
  EXPECT_DOUBLE_EQ(got.at("regret of the first choice"), 0.25);
  EXPECT_NEAR(got.at("Spearman rank correlation, predicted vs measured"), -0.5, 1e-12);
  EXPECT_DOUBLE_EQ(got.at("measured candidates"), 3);
  EXPECT_DOUBLE_EQ(got.at("families measured (DDP, ZeRO, tensor, pipeline)"), 3);
  ASSERT_EQ(strict.parts.size(), 4u);
  EXPECT_FALSE(strict.parts[1].passed);  // the refused one, named
  EXPECT_NE(strict.parts[1].detail.find("refused"), std::string::npos);
  EXPECT_EQ(judge("max_regret = 0.3\nmin_spearman = -0.6\nmin_families = 3\n").status, rubric::Status::kPassed);
  // The chapter's measure reads the same proof.
  const rubric::Measures m = rubric::compute_measures(e);
  ASSERT_TRUE(m.decision);
  EXPECT_EQ(m.decision->chosen, "PP 4");
  EXPECT_EQ(m.decision->best, "DDP x4");
  EXPECT_DOUBLE_EQ(m.decision->regret_percent, 25);
  EXPECT_EQ(m.decision->candidates, 3);
}

// docs/validation.md's CPU table: one line per split and worker count with a prediction and a
// measurement, from the database `parlab validate --db` is given; without one, a fixed note.
TEST(CpuValidation, TableFromAFidelityDatabaseAndAPlaceholderWithoutOne) {
  const std::string none = cpu_validation_markdown(nullptr);
  EXPECT_EQ(none.rfind(kCpuSectionBegin, 0), 0u);
  EXPECT_NE(none.find("No fidelity run is in this build of the document"), std::string::npos);
  EXPECT_EQ(none, cpu_validation_markdown(nullptr));  // deterministic

  Db d("fidelity_splits_2w");
  d.run(db::RunKind::kSimulated, plan_at("zero=3", 2), 0.22);
  d.run(db::RunKind::kMeasured, plan_at("zero=3", 2), 0.20,
        {{"step_seconds_spread", 0.004}, {"machine.others_busy_cores", 0.05}});
  d.run(db::RunKind::kAnalytic, plan_at("tp=2", 2), 0.15);  // no simulation: the analytic walk, said so
  d.run(db::RunKind::kMeasured, plan_at("tp=2", 2), 0.30);
  d.run(db::RunKind::kSimulated, plan_at("pp=2,schedule=1f1b,microbatches=4", 2), 0.3);  // never measured: no line
  const std::string t = cpu_validation_markdown(&d.store);
  EXPECT_NE(t.find("| experiment | split | workers | predicted | measured | error | machine | load |"),
            std::string::npos)
      << t;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_NE(t.find("| fidelity_splits_2w | ZeRO-3 x2 | 2 | 220.0 ms | 200.0 ms +-2.0% | +10.0% | " + std::string(host) +
                   " | 0.05 cores |"),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("| fidelity_splits_2w | TP 2 | 2 | 150.0 ms (analytic) | 300.0 ms +-0.0% | -50.0% | " +
                   std::string(host) + " | - |"),
            std::string::npos)
      << t;
  EXPECT_EQ(t.find("1f1b"), std::string::npos) << t;
  EXPECT_NE(t.find("2 splits; the largest error is 50.0%."), std::string::npos) << t;
  EXPECT_EQ(t.substr(t.size() - std::string(kCpuSectionEnd).size() - 1), std::string(kCpuSectionEnd) + "\n");

  // A document with the section, and without it.
  EXPECT_EQ(without_cpu_section("gpu\n\n" + t), "gpu\n\n");
  EXPECT_EQ(without_cpu_section("gpu only\n"), "gpu only\n");
}

// The committed document's CPU section is what `parlab validate` writes: the note (no database
// given) or a table generated from one (its measurements cannot be regenerated here).
TEST(CpuValidation, CommittedDocumentCarriesTheGeneratedSection) {
  std::ifstream in(std::filesystem::path(PARLAB_SOURCE_DIR) / "docs" / "validation.md");
  ASSERT_TRUE(in);
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  const size_t b = text.find(kCpuSectionBegin);
  ASSERT_NE(b, std::string::npos) << "parlab validate [--db fidelity.db] > docs/validation.md";
  const std::string section = text.substr(b);
  const std::string none = cpu_validation_markdown(nullptr);
  const bool placeholder = section == none;
  const bool table =
      section.find("| experiment | split | workers | predicted | measured | error | machine | load |") !=
          std::string::npos &&
      section.rfind(std::string(kCpuSectionEnd) + "\n") == section.size() - std::string(kCpuSectionEnd).size() - 1;
  EXPECT_TRUE(placeholder || table) << section;
}

}  // namespace
}  // namespace parlab::experiments
