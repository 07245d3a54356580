#pragma once
// The grader: a rubric and a results database in, a report out. The library behind `parlab
// grade` and the desktop lab's Progress view.
//
//   auto store = db::ResultsStore::open("results/parlab.db", {.sweep_stale_runs = false});
//   rubric::Report r = rubric::grade(store, rubric::default_rubric(), {});
//   for (const auto& c : r.criteria) show(c.title, rubric::to_string(c.status), c.points, c.max_points);
//
// Statuses: passed, failed, missing (no evidence), blocked (needs hardware the learner's machine
// lacks; its points are reported apart and left out of the total). A performance criterion earns its
// points only when its gate (a correctness criterion) passed. Evidence is only credited when its
// proof row still matches its digest: a tampered row earns nothing and is listed.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "rubric/evidence.h"
#include "rubric/measures.h"
#include "rubric/rubric.h"

namespace parlab::rubric {

enum class Status { kPassed, kFailed, kMissing, kBlocked };
const char* to_string(Status status);

// One figure beside its threshold ("efficiency_lab 0.9570 vs hand 0.9570, |diff| <= 0.01").
struct Measurement {
  std::string figure;
  double value = 0;
  std::string op;  // "<=", ">=", "==" (within the tolerance named in the line)
  double threshold = 0;
  bool ok = false;
  std::string note;  // where it came from / what it means
};

// A part of a criterion judged on its own (one split of the equivalence criterion, ...).
struct Part {
  std::string name;
  bool passed = false;
  std::string detail;
  std::vector<std::int64_t> proofs;
};

struct CriterionResult {
  std::string id, title, category;
  Status status = Status::kMissing;
  double points = 0, max_points = 0;
  std::vector<std::int64_t> proofs;       // the proof rows the verdict rests on
  std::vector<std::int64_t> runs;         // runs they refer to
  std::vector<std::int64_t> predictions;  // predictions rows (predictions_before_reveal)
  std::vector<Measurement> measurements;
  std::vector<Part> parts;
  std::string detail;                  // one line: why this status
  std::string fix;                     // one line: how to get the points (empty when passed)
  std::string gated_by;                // set when its gate did not pass: no points
  std::vector<std::string> integrity;  // tampered / unchained / not reproduced rows it ignored
  std::optional<bool> reproduced;      // --verify: the re-run agreed (nullopt: not re-run)
};

struct GradeOptions {
  bool accept_unchained = false;  // credit proofs written before schema v4 (no digest)
  // Hardware of the machine the evidence comes from; empty: read from the evidence ("gpu" when a
  // measured run trained on a CUDA device, else "cpu"), not from the grading machine, whose GPU
  // says nothing about the learner's.
  std::string hardware;                              // "cpu" | "gpu"
  bool verify = false;                               // re-run the cheap checks (verify.h)
  std::string parlab_bin;                            // --verify's kill-resume trial starts workers of this binary
  std::filesystem::path work_dir;                    // --verify's run directories (default: a temporary folder)
  std::function<void(const std::string&)> progress;  // --verify's progress lines
};

struct Report {
  std::string rubric_name, rubric_title, rubric_source;
  std::string db_path;
  std::string graded_at;       // UTC ISO-8601
  std::string grader_version;  // parlab::kVersion
  std::string grader_binary;   // this grader's binary hash
  std::string grader_host;     // where it was graded
  std::string db_digest;       // xxh3_128 of the database file as graded
  std::string hardware;
  std::vector<CriterionResult> criteria;
  double score = 0, max_score = 0;  // max excludes blocked criteria
  double blocked_points = 0;
  double pass_mark = 0.8;
  bool passed = false;
  // The proofs chain as found: counts and one line per problem.
  int proofs = 0, tampered = 0, unchained = 0, gaps = 0;
  std::vector<std::string> chain_findings;
  // The last proof's digest: a later report of the same database with another head (or fewer
  // proofs) means proofs were removed from its end, which the chain alone cannot show.
  std::string chain_head;
  std::string software_versions, machines;  // of the proofs' writers
  Measures measures;
  double execution_seconds = 0;

  double percent() const { return max_score > 0 ? 100.0 * score / max_score : 0; }
  const CriterionResult* find(const std::string& id) const;
};

// Grades the store's evidence against the rubric. Never throws for missing or bad evidence
// (that is a status); throws DbError for an unreadable database.
Report grade(db::ResultsStore& store, const Rubric& rubric, const GradeOptions& options = {});
// Opens `db_path` (without sweeping or migrating anything it does not need) and grades it.
Report grade_file(const std::filesystem::path& db_path, const Rubric& rubric, const GradeOptions& options = {});

// "gpu" when a measured run of the evidence trained on a CUDA device (run param device=cuda).
std::string evidence_hardware(const Evidence& evidence);

}  // namespace parlab::rubric
