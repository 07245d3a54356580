// Grading a results database made by real experiments: the quickstart's experiments on a tiny
// model (`parlab experiment run`, real worker processes), graded through `parlab grade` and the
// library. What must hold: >= 80% with a valid Gradescope results.json; deleting one proof
// removes exactly its criterion's points and gating holds; an edited proof row is tampered and
// earns nothing while the rest is still graded; re-simulation catches a wrong output digest.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "db/proof_chain.h"
#include "db/results_store.h"
#include "parlab/source_dir.h"
#include "rubric/class_report.h"
#include "rubric/grade.h"
#include "rubric/report.h"
#include "tests/support/scratch_dir.h"
#include "tests/support/subprocess.h"

namespace parlab::rubric {
namespace fs = std::filesystem;
using nlohmann::json;
using parlab::testing::ScratchDir;
namespace {

const fs::path kSource = PARLAB_SOURCE_DIR;
const fs::path kData = kSource / "tests/rubric/data";

// The quickstart's experiments, small: built once per parlab binary (named by its size and
// mtime) under a lock, so the test processes ctest starts share one database.
fs::path fixture_db() {
  struct stat st {};
  const std::string bin = parlab::testing::parlab_bin();
  if (::stat(bin.c_str(), &st) != 0) throw std::runtime_error("no parlab binary at " + bin);
  const fs::path dir = fs::path(PARLAB_RUBRIC_FIXTURE_DIR) /
                       ("quickstart-" + std::to_string(st.st_size) + "-" + std::to_string(st.st_mtime));
  const fs::path db = dir / "quickstart.db";
  fs::create_directories(dir);
  const int lock = ::open((dir / "lock").c_str(), O_CREAT | O_RDWR, 0644);
  ::flock(lock, LOCK_EX);
  if (!fs::exists(dir / "done")) {
    fs::remove(db);
    // Databases of earlier binaries are of no use any more.
    for (const auto& e : fs::directory_iterator(dir.parent_path()))
      if (e.is_directory() && e.path().filename().string().rfind("quickstart-", 0) == 0 && e.path() != dir)
        fs::remove_all(e.path());
    const auto r = parlab::testing::run_process(
        {bin, "experiment", "run", (kSource / "experiments/seed_budget.toml").string(),
         (kSource / "experiments/allreduce_lab.toml").string(), (kData / "scaling_small.toml").string(),
         (kData / "equivalence_small.toml").string(), (kData / "kill_resume_small.toml").string(),
         (kData / "hang_small.toml").string(), (kData / "elastic_small.toml").string(), "--db", db.string()},
        {"OPENBLAS_NUM_THREADS=1", "PARLAB_RESULTS=" + (dir / "results").string()});
    if (r.exit_code != 0) {
      ::flock(lock, LOCK_UN);
      ::close(lock);
      throw std::runtime_error("the experiments failed:\n" + r.out + r.err);
    }
    std::ofstream(dir / "done") << "ok\n";
  }
  ::flock(lock, LOCK_UN);
  ::close(lock);
  return db;
}

// A private copy of the fixture to change.
fs::path copy_of_fixture(const ScratchDir& dir, const std::string& name) {
  const fs::path to = dir / name;
  fs::copy_file(fixture_db(), to);
  return to;
}

GradeOptions cpu() {
  GradeOptions o;
  o.hardware = "cpu";  // the evidence comes from a machine without a GPU, wherever this runs
  return o;
}

// The rubric with the efficiency report's error bound opened wide: the tests here are about the
// grader, not about how well the cost model predicts a loaded machine.
Rubric loose_rubric() {
  std::string text(default_rubric_text());
  const std::string from = "max_prediction_error = 0.5\nmin_efficiency = 0\n";
  text.replace(text.find(from), from.size(), "max_prediction_error = 1000\nmin_efficiency = 0\n");
  return parse_rubric(text, "loose.toml");
}

void exec(const fs::path& db, const std::string& sql) {
  auto store = db::ResultsStore::open(db, {.sweep_stale_runs = false});
  store.connection().exec_script(sql);
}

std::int64_t proof_id(const fs::path& db, const std::string& kind) {
  auto store = db::ResultsStore::open(db, {.sweep_stale_runs = false});
  std::int64_t id = 0;
  for (const auto& p : store.list_proofs())
    if (p.kind == kind) id = p.id;
  return id;
}

const CriterionResult& get(const Report& r, const std::string& id) {
  const CriterionResult* c = r.find(id);
  if (!c) throw std::runtime_error("no criterion " + id);
  return *c;
}

}  // namespace

TEST(GradeQuickstart, ScoresAtLeastThePassMarkWithAValidGradescopeResultsJson) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "learner.db");
  const auto r = parlab::testing::run_process({parlab::testing::parlab_bin(), "grade", "--db", db.string(), "--format",
                                               "gradescope", "--hardware", "cpu", "--out", (dir / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(dir / "out/results.json");
  const json j = json::parse(in);
  // Gradescope's schema: top-level score, execution_time, output, tests[]; each test has name,
  // score, max_score, status, output, visibility.
  ASSERT_TRUE(j.at("score").is_number());
  ASSERT_TRUE(j.at("execution_time").is_number());
  ASSERT_TRUE(j.at("output").is_string());
  ASSERT_TRUE(j.at("tests").is_array());
  double sum = 0, max = 0;
  for (const json& t : j["tests"]) {
    for (const char* k : {"name", "output", "visibility", "status"})
      ASSERT_TRUE(t.at(k).is_string()) << k << " in " << t.dump();
    ASSERT_TRUE(t.at("score").is_number());
    ASSERT_TRUE(t.at("max_score").is_number());
    EXPECT_TRUE(t["status"] == "passed" || t["status"] == "failed") << t.dump();
    EXPECT_LE(t["score"].get<double>(), t["max_score"].get<double>());
    sum += t["score"].get<double>();
    max += t["max_score"].get<double>();
  }
  EXPECT_DOUBLE_EQ(sum, j["score"].get<double>());
  EXPECT_GE(sum, 0.8 * max) << j.dump(2);
  // The chapter's measures are in every report, this one included.
  for (const char* m : {"decision utility", "slice reliability", "system latency"})
    EXPECT_NE(j["output"].get<std::string>().find(m), std::string::npos) << m;

  // The same database through the library: which criteria carry it.
  const Report rep = grade_file(db, default_rubric(), cpu());
  for (const char* id : {"seed_example", "efficiency_hand_check", "deterministic_simulation", "equivalence",
                         "kill_resume", "hang_fallback", "elastic_sampling", "checkpoint_complete"})
    EXPECT_EQ(get(rep, id).status, Status::kPassed) << id << ": " << get(rep, id).detail;
  EXPECT_EQ(get(rep, "predictions_before_reveal").status, Status::kMissing);  // the desktop lab writes them
  EXPECT_EQ(get(rep, "gpu_efficiency").status, Status::kBlocked);
  EXPECT_DOUBLE_EQ(rep.blocked_points, 10);
  EXPECT_DOUBLE_EQ(rep.max_score, 100);  // blocked points are not counted
  // Without --hardware the learner's machine is read from the evidence (no CUDA run: cpu),
  // whatever the grading machine has.
  EXPECT_EQ(grade_file(db, default_rubric(), {}).hardware, "cpu");
  EXPECT_EQ(rep.tampered, 0);
  EXPECT_EQ(rep.gaps, 0);
  // The measures: slices for the proofs run, step times for 1/2/4, a restart and a detection.
  EXPECT_TRUE(rep.measures.decision.has_value());
  EXPECT_EQ(rep.measures.step_times.size(), 3u);
  EXPECT_GE(rep.measures.restarts, 2);  // two kill-resume trials at least
  EXPECT_GE(rep.measures.detections, 1);
  bool kill_resume_slice = false;
  for (const SliceRow& s : rep.measures.slices)
    if (s.proof_kind == "kill_resume_bitwise" && s.workers == 2) kill_resume_slice = s.total == 2 && s.passed == 2;
  EXPECT_TRUE(kill_resume_slice);
}

TEST(GradeQuickstart, DeletingOneProofRemovesExactlyThatCriterionsPointsAndGatingHolds) {
  ScratchDir dir;
  const Rubric rubric = loose_rubric();
  const fs::path base = copy_of_fixture(dir, "base.db");
  const Report before = grade_file(base, rubric, cpu());
  ASSERT_EQ(get(before, "efficiency_report").status, Status::kPassed) << get(before, "efficiency_report").detail;
  ASSERT_GT(get(before, "efficiency_report").points, 0);

  // One proof gone: that criterion alone loses its points; the chain shows the gap.
  const fs::path one = copy_of_fixture(dir, "no-kill-resume.db");
  exec(one, "DELETE FROM proofs WHERE id = " + std::to_string(proof_id(one, "kill_resume_bitwise")));
  const Report after = grade_file(one, rubric, cpu());
  for (const CriterionResult& c : before.criteria) {
    const CriterionResult& a = get(after, c.id);
    if (c.id == "kill_resume") {
      EXPECT_EQ(a.status, Status::kMissing);
      EXPECT_EQ(a.points, 0);
    } else {
      EXPECT_EQ(a.points, c.points) << c.id;
      EXPECT_EQ(a.status, c.status) << c.id;
    }
  }
  EXPECT_DOUBLE_EQ(before.score - after.score, get(before, "kill_resume").points);
  EXPECT_EQ(after.gaps, 1);

  // The last proof gone leaves no gap: only the report's chain head (compared with an earlier
  // report of the same database) shows it.
  const fs::path tail = copy_of_fixture(dir, "no-last.db");
  exec(tail, "DELETE FROM proofs WHERE id = (SELECT max(id) FROM proofs)");
  const Report cut = grade_file(tail, rubric, cpu());
  EXPECT_EQ(cut.gaps, 0);
  EXPECT_EQ(cut.proofs, before.proofs - 1);
  EXPECT_NE(cut.chain_head, before.chain_head);
  EXPECT_FALSE(before.chain_head.empty());

  // The gate's proof gone: the gate and the performance criterion it gates lose their points,
  // though the performance evidence itself still passes.
  const fs::path gate = copy_of_fixture(dir, "no-equivalence.db");
  exec(gate, "DELETE FROM proofs WHERE kind = 'equivalence'");
  const Report gated = grade_file(gate, rubric, cpu());
  EXPECT_EQ(get(gated, "equivalence").points, 0);
  EXPECT_EQ(get(gated, "efficiency_report").status, Status::kPassed);
  EXPECT_EQ(get(gated, "efficiency_report").gated_by, "equivalence");
  EXPECT_EQ(get(gated, "efficiency_report").points, 0);
  EXPECT_DOUBLE_EQ(before.score - gated.score,
                   get(before, "equivalence").points + get(before, "efficiency_report").points);
}

TEST(GradeQuickstart, AnEditedProofRowIsTamperedAndEarnsNothingTheRestIsGraded) {
  ScratchDir dir;
  const fs::path base = copy_of_fixture(dir, "base.db");
  const Report before = grade_file(base, default_rubric(), cpu());
  const fs::path edited = copy_of_fixture(dir, "edited.db");
  // What a learner might do in the sqlite3 shell: claim a third identical trial.
  const std::int64_t id = proof_id(edited, "kill_resume_bitwise");
  exec(edited, "UPDATE proofs SET result = replace(result, '2/2', '3/3') WHERE id = " + std::to_string(id));
  const Report after = grade_file(edited, default_rubric(), cpu());
  EXPECT_EQ(after.tampered, 1);
  const CriterionResult& kr = get(after, "kill_resume");
  EXPECT_EQ(kr.points, 0);
  EXPECT_EQ(kr.status, Status::kFailed);
  ASSERT_FALSE(kr.integrity.empty());
  EXPECT_NE(kr.integrity.front().find("is tampered"), std::string::npos) << kr.integrity.front();
  for (const CriterionResult& c : before.criteria)
    if (c.id != "kill_resume") {
      EXPECT_EQ(get(after, c.id).points, c.points) << c.id;
    }
  // Reported in every format a person reads.
  EXPECT_NE(render_text(after).find("tampered"), std::string::npos);
  EXPECT_NE(gradescope_json(after).dump().find("changed after they were written"), std::string::npos);

  // A class of two: one honest, one edited.
  fs::create_directories(dir / "class");
  fs::copy_file(base, dir / "class/ada.db");
  fs::copy_file(edited, dir / "class/bob.db");
  const ClassReport c = grade_class(dir / "class", default_rubric(), cpu());
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].learner, "ada");
  for (size_t i = 0; i < c.criteria.size(); ++i)
    if (c.criteria[i] == "kill_resume") {
      EXPECT_DOUBLE_EQ(c.pass_rates[i], 0.5);
    }
  const std::string csv = class_csv(c);
  EXPECT_NE(csv.find("\nada,"), std::string::npos) << csv;
  EXPECT_NE(csv.find("\nbob,"), std::string::npos) << csv;
}

TEST(GradeQuickstart, ReSimulationCatchesAWrongOutputDigestEvenWhenTheRowIsChained) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "forged.db");
  {
    // A writer that goes through the API (so the row is chained) but records a wrong output.
    auto store = db::ResultsStore::open(db, {.sweep_stale_runs = false});
    db::ProofRecord forged;
    for (const auto& p : store.list_proofs())
      if (p.kind == "deterministic_simulation") forged = p;
    forged.evidence["output_digest"] = "xxh3_128:00000000000000000000000000000000";
    store.add_proof(forged);
  }
  const Report r = grade_file(db, default_rubric(), cpu());
  const CriterionResult& d = get(r, "deterministic_simulation");
  EXPECT_EQ(d.status, Status::kFailed);
  bool found = false;
  for (const Part& p : d.parts) found = found || p.detail.find("re-simulated output differs") != std::string::npos;
  EXPECT_TRUE(found);
  EXPECT_EQ(r.tampered, 0);  // nothing was edited: the claim is simply false
}

// The same wrong output, but recorded (and chained) by another build of parlab: its simulator may
// have changed since, so the difference is reported and not counted; the simulations this build
// reproduces still pass the criterion.
TEST(GradeQuickstart, ASimulationAnotherBuildRecordedIsReportedNotCountedWhenItDiffers) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "other-build.db");
  {
    auto store = db::ResultsStore::open(db, {.sweep_stale_runs = false});
    db::ProofRecord other;
    for (const auto& p : store.list_proofs())
      if (p.kind == "deterministic_simulation") other = p;
    other.evidence["output_digest"] = "xxh3_128:00000000000000000000000000000000";
    const std::int64_t id = store.add_proof(other);
    // The row as another binary would have written it: its provenance, and its digest over it
    // (it is the chain's tail, so no successor points at the old digest).
    db::StoredProof row;
    for (const db::StoredProof& s : db::read_stored_proofs(store.connection()))
      if (s.id == id) row = s;
    ASSERT_EQ(row.id, id);
    row.binary_hash = "xxh3_128:0123456789abcdef0123456789abcdef";
    store.connection()
        .statement("UPDATE proofs SET binary_hash = ?, digest = ? WHERE id = ?")
        .bind_all(row.binary_hash, db::proof_digest(row), id)
        .run();
  }
  const Report r = grade_file(db, default_rubric(), cpu());
  EXPECT_EQ(r.tampered, 0);
  const CriterionResult& d = get(r, "deterministic_simulation");
  EXPECT_EQ(d.status, Status::kPassed) << d.detail;
  bool reported = false;
  for (const Part& p : d.parts) reported = reported || p.detail.find("recorded by another build") != std::string::npos;
  EXPECT_TRUE(reported);
  EXPECT_NE(d.detail.find("1 of another build differ (not judged)"), std::string::npos) << d.detail;
}

TEST(GradeQuickstart, PredictionsCountOnlyWhenMadeBeforeTheReveal) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "predictions.db");
  // As the desktop lab writes them: three committed before their reveal, one after it.
  exec(db,
       "INSERT INTO predictions(quantity, world_size, predicted, predicted_at, revealed, revealed_at) VALUES "
       "('speedup', 2, 1.8, '2026-12-01T10:00:00.000Z', 1.9, '2026-12-01T10:00:05.000Z'),"
       "('speedup', 4, 3.1, '2026-12-01T10:01:00.000Z', 1.7, '2026-12-01T10:01:09.000Z'),"
       "('step_seconds', 2, 0.1, '2026-12-01T10:02:00.000Z', 0.12, '2026-12-01T10:02:01.000Z'),"
       "('speedup', 8, 6.0, '2026-12-01T10:04:00.000Z', 5.0, '2026-12-01T10:03:00.000Z');");
  const Report r = grade_file(db, default_rubric(), cpu());
  const CriterionResult& p = get(r, "predictions_before_reveal");
  EXPECT_EQ(p.status, Status::kPassed) << p.detail;
  ASSERT_EQ(p.parts.size(), 4u);
  EXPECT_FALSE(p.parts[3].passed);  // predicted after it was revealed
  ASSERT_FALSE(p.measurements.empty());
  EXPECT_DOUBLE_EQ(p.measurements.front().value, 3);
}

TEST(GradeQuickstart, VerifyReRunsAKillResumeTrialAndTheSeedExample) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "verify.db");
  GradeOptions o = cpu();
  o.verify = true;
  o.parlab_bin = parlab::testing::parlab_bin();
  o.work_dir = dir / "runs";
  const Report r = grade_file(db, default_rubric(), o);
  for (const char* id : {"seed_example", "deterministic_simulation", "kill_resume"}) {
    const CriterionResult& c = get(r, id);
    ASSERT_TRUE(c.reproduced.has_value()) << id;
    EXPECT_TRUE(*c.reproduced) << id << ": " << (c.integrity.empty() ? "" : c.integrity.back());
    EXPECT_GT(c.points, 0) << id;
  }

  // A writer that went through the API (the row is chained) with consistent but invented hashes:
  // the check alone cannot tell; the re-run can.
  const fs::path forged = copy_of_fixture(dir, "forged.db");
  {
    auto store = db::ResultsStore::open(forged, {.sweep_stale_runs = false});
    db::ProofRecord p;
    for (const auto& x : store.list_proofs())
      if (x.kind == "kill_resume_bitwise") p = x;
    p.evidence["reference_hash"] = "0123456789abcdef";
    for (auto& t : p.evidence["trials"]) t["final_hash"] = "0123456789abcdef";
    store.add_proof(p);
  }
  EXPECT_EQ(get(grade_file(forged, default_rubric(), cpu()), "kill_resume").status, Status::kPassed);
  const Report v = grade_file(forged, default_rubric(), o);
  const CriterionResult& kr = get(v, "kill_resume");
  ASSERT_TRUE(kr.reproduced.has_value());
  EXPECT_FALSE(*kr.reproduced);
  EXPECT_EQ(kr.points, 0);
  EXPECT_NE(kr.integrity.back().find("does not reproduce"), std::string::npos) << kr.integrity.back();
}

TEST(GradeCli, HtmlHasTheChartsInlineAndABadRubricExitsTwoNamingTheField) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "learner.db");
  const auto ok = parlab::testing::run_process({parlab::testing::parlab_bin(), "grade", "--db", db.string(), "--format",
                                                "html", "--out", (dir / "html").string()});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  std::ifstream in(dir / "html/report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("aria-label=\"speedup per worker count\""), std::string::npos);
  EXPECT_NE(html.find("aria-label=\"memory ledger\""), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);

  std::ofstream(dir / "bad.toml") << "name = \"x\"\n[[criterion]]\nid = \"kr\"\npoints = 5\ncheck = \"kill_resume\"\n"
                                     "[criterion.thresholds]\nmin_trials = \"two\"\n";
  const auto bad = parlab::testing::run_process(
      {parlab::testing::parlab_bin(), "grade", "--db", db.string(), "--rubric", (dir / "bad.toml").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("criterion[0] (kr).thresholds.min_trials = 'two': must be a number"), std::string::npos)
      << bad.err;

  fs::create_directories(dir / "class");
  fs::copy_file(db, dir / "class/ada.db");
  fs::copy_file(db, dir / "class/bob.db");
  const auto cls = parlab::testing::run_process({parlab::testing::parlab_bin(), "grade", "--class",
                                                 (dir / "class").string(), "--out", (dir / "class-out").string()});
  ASSERT_EQ(cls.exit_code, 0) << cls.err;
  std::ifstream csv(dir / "class-out/class.csv");
  std::string header, line;
  std::getline(csv, header);
  EXPECT_EQ(header.rfind("learner,score,max_score,percent,passed,tampered,seed_example,", 0), 0u) << header;
  int rows = 0;
  while (std::getline(csv, line)) rows += !line.empty();
  EXPECT_EQ(rows, 3);  // two learners and the pass-rate line
  EXPECT_TRUE(fs::exists(dir / "class-out/class.html"));

  const auto missing =
      parlab::testing::run_process({parlab::testing::parlab_bin(), "grade", "--db", (dir / "nope.db").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--db = "), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir / "nope.db"));  // grading never creates a database
}

TEST(GradeQuickstart, TheLessonCriterionCreditsCompletedStepsAndSaysWhereItResumes) {
  ScratchDir dir;
  const fs::path db = copy_of_fixture(dir, "lesson.db");
  EXPECT_EQ(get(grade_file(db, default_rubric(), cpu()), "lesson").status, Status::kMissing);
  // Steps 1 and 2 answered as the Lesson view writes them (committed, then revealed).
  exec(db,
       "INSERT INTO predictions(quantity, world_size, predicted, predicted_at, revealed, revealed_at) VALUES "
       "('lesson.1.verdicts', 1, 2, '2026-12-01T10:00:00.000Z', 2, '2026-12-01T10:00:05.000Z'),"
       "('lesson.2.split.large', 1024, 6, '2026-12-01T10:01:00.000Z', 6, '2026-12-01T10:01:09.000Z'),"
       "('lesson.2.split.here', 2, 0, '2026-12-01T10:02:00.000Z', 0, '2026-12-01T10:02:01.000Z');");
  Report r = grade_file(db, default_rubric(), cpu());
  const CriterionResult& half = get(r, "lesson");
  EXPECT_EQ(half.status, Status::kFailed);
  EXPECT_EQ(half.points, 0);
  ASSERT_EQ(half.parts.size(), 5u);
  EXPECT_TRUE(half.parts[0].passed);
  EXPECT_TRUE(half.parts[1].passed);
  EXPECT_FALSE(half.parts[2].passed);
  EXPECT_NE(half.detail.find("2 of 5 lesson steps complete; it resumes at step 3"), std::string::npos) << half.detail;
  exec(db,
       "INSERT INTO predictions(quantity, world_size, predicted, predicted_at, revealed, revealed_at) VALUES "
       "('lesson.3.efficiency', 8, 0.8, '2026-12-01T10:03:00.000Z', 0.87, '2026-12-01T10:03:05.000Z'),"
       "('lesson.3.speedup', 2, 1.5, '2026-12-01T10:04:00.000Z', 1.2, '2026-12-01T10:05:00.000Z'),"
       "('lesson.4.hang', 2, 1, '2026-12-01T10:06:00.000Z', 1, '2026-12-01T10:07:00.000Z'),"
       "('lesson.5.bit_identical', 2, 1, '2026-12-01T10:08:00.000Z', 1, '2026-12-01T10:09:00.000Z');");
  r = grade_file(db, default_rubric(), cpu());
  const CriterionResult& all = get(r, "lesson");
  EXPECT_EQ(all.status, Status::kPassed) << all.detail;
  EXPECT_EQ(all.points, all.max_points);
  EXPECT_GT(all.max_points, 0);
  EXPECT_EQ(all.predictions.size(), 7u);
}

}  // namespace parlab::rubric
