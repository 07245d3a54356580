#include "rubric/grade.h"

#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>

#include "db/process_identity.h"
#include "db/proof_chain.h"
#include "parlab/version.h"
#include "rubric/checks.h"
#include "rubric/verify.h"
#include "base/errors.h"

namespace parlab::rubric {
namespace {

std::string utc_now() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char b[32];
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return b;
}

std::string file_digest(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return db::content_digest(bytes);
}

CriterionResult judge(const Criterion& c, const Evidence& e, const GradeOptions& o, const std::string& hardware) {
  CriterionResult r;
  r.id = c.id;
  r.title = c.title;
  r.category = c.category;
  r.max_points = c.points;
  find_check(c.check)->judge(c, e, o, r);
  for (auto* ids : {&r.proofs, &r.runs}) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  // No evidence, and the machine it is expected from cannot make it: blocked, not missing.
  if (r.status == Status::kMissing && c.requires_hardware == "gpu" && hardware != "gpu") {
    r.status = Status::kBlocked;
    r.detail = "needs a GPU, and the evidence comes from a machine without one: reported apart, not counted";
  }
  return r;
}

void apply_gates_and_points(const Rubric& rubric, Report& report) {
  for (size_t i = 0; i < rubric.criteria.size(); ++i) {
    const Criterion& c = rubric.criteria[i];
    CriterionResult& r = report.criteria[i];
    const bool credited = r.status == Status::kPassed && r.reproduced.value_or(true);
    r.points = credited ? c.points : 0;
    if (!c.gate.empty()) {
      const CriterionResult* g = report.find(c.gate);
      if (!g || g->status != Status::kPassed || !g->reproduced.value_or(true)) {
        r.gated_by = c.gate;
        r.points = 0;
      }
    }
    if (r.status != Status::kPassed || r.points == 0) r.fix = c.fix;
    if (!r.gated_by.empty()) r.fix = "Pass '" + c.gate + "' first: performance counts only on a correct run. " + c.fix;
    if (r.status == Status::kBlocked) {
      report.blocked_points += c.points;
      continue;
    }
    report.max_score += c.points;
    report.score += r.points;
  }
}

void summarize_chain(const Evidence& e, Report& report) {
  report.proofs = static_cast<int>(e.proofs.size());
  report.tampered = e.chain.count(db::ChainStatus::kTampered);
  report.unchained = e.chain.count(db::ChainStatus::kUnchained);
  report.gaps = e.chain.count(db::ChainStatus::kGap);
  if (!e.proofs.empty()) report.chain_head = e.proofs.back().row.digest.value_or("");
  for (const Proof& p : e.proofs)
    if (p.chain != db::ChainStatus::kIntact)
      report.chain_findings.push_back(
          fmt::format("proof #{} ({}): {}: {}", p.row.id, p.row.kind, db::to_string(p.chain), p.chain_detail));
}

}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::kPassed:
      return "passed";
    case Status::kFailed:
      return "failed";
    case Status::kMissing:
      return "missing";
    case Status::kBlocked:
      return "blocked";
  }
  return "?";
}

const CriterionResult* Report::find(const std::string& id) const {
  for (const CriterionResult& c : criteria)
    if (c.id == id) return &c;
  return nullptr;
}

std::string evidence_hardware(const Evidence& e) {
  for (const db::RunRecord& r : e.runs) {
    if (r.kind != db::RunKind::kMeasured || !e.params.count(r.id)) continue;
    const auto& p = e.params.at(r.id);
    if (p.count("device") && p.at("device") == "cuda") return "gpu";
  }
  return "cpu";
}

Report grade(db::ResultsStore& store, const Rubric& rubric, const GradeOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Report report;
  report.rubric_name = rubric.name;
  report.rubric_title = rubric.title;
  report.rubric_source = rubric.source;
  report.db_path = store.path().string();
  report.graded_at = utc_now();
  report.grader_version = kVersion;
  report.grader_binary = db::this_process_provenance().binary_hash;
  report.grader_host = db::host_name();
  report.pass_mark = rubric.pass_mark;
  const Evidence e = read_evidence(store, o.accept_unchained);
  report.hardware = o.hardware.empty() ? evidence_hardware(e) : o.hardware;
  report.software_versions = e.software_versions;
  report.machines = e.machines;
  summarize_chain(e, report);
  for (const Criterion& c : rubric.criteria) report.criteria.push_back(judge(c, e, o, report.hardware));
  if (o.verify) verify_report(rubric, e, o, report);
  apply_gates_and_points(rubric, report);
  report.passed = report.max_score > 0 && report.score >= rubric.pass_mark * report.max_score - 1e-9;
  report.measures = compute_measures(e);
  report.execution_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

Report grade_file(const std::filesystem::path& db_path, const Rubric& rubric, const GradeOptions& o) {
  if (!std::filesystem::is_regular_file(db_path))
    throw ConfigError("--db", db_path.string(), "no such results database (run `parlab experiment run ...` first)");
  const std::string digest = file_digest(db_path.string());
  auto store = db::ResultsStore::open(db_path, {.sweep_stale_runs = false});
  Report r = grade(store, rubric, o);
  r.db_digest = digest;
  return r;
}

}  // namespace parlab::rubric
