#pragma once
// Helpers the check files share (not part of the library's API).
#include <fmt/core.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "rubric/checks.h"

namespace parlab::rubric::detail {

// Re-runs a recorded simulation from its proof's inputs; the digest of its JSON output. Throws
// ConfigError when the inputs cannot be rebuilt here (model file missing or changed).
std::string resimulate(const nlohmann::json& inputs);  // checks_perf.cpp
// A model reference as recorded, found beside the working directory or in the source tree.
std::string locate_model(const std::string& ref);  // checks_perf.cpp

inline double num(const nlohmann::json& j, const char* key, double fallback = NAN) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return fallback;
  return j[key].get<double>();
}
inline double flag(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) return NAN;
  if (j[key].is_boolean()) return j[key].get<bool>() ? 1 : 0;
  return num(j, key);
}

inline Measurement at_most(std::string figure, double value, double limit, std::string note) {
  return {std::move(figure), value, "<=", limit, value <= limit, std::move(note)};
}
inline Measurement at_least(std::string figure, double value, double limit, std::string note) {
  return {std::move(figure), value, ">=", limit, value >= limit, std::move(note)};
}
inline Measurement equals(std::string figure, double value, double want, std::string note) {
  return {std::move(figure), value, "==", want, value == want, std::move(note)};
}
// |value - want| <= tolerance; the note gets the tolerance.
inline Measurement within(std::string figure, double value, double want, double tolerance, std::string note) {
  return {std::move(figure),
          value,
          "==",
          want,
          std::fabs(value - want) <= tolerance,
          note + (note.empty() ? "" : "; ") + fmt::format("within {:g}", tolerance)};
}

// A model reference recorded by an experiment: a preset name, or a file path relative to where
// the experiment ran (usually the source tree). Tried as given, then under the source tree.
std::string locate_model(const std::string& ref);

inline void add_proof(CriterionResult& r, const Proof& p) {
  r.proofs.push_back(p.row.id);
  if (p.row.run_id) r.runs.push_back(*p.row.run_id);
}

// Lists the selection's untrusted proofs as integrity notes (they earn nothing).
inline void note_untrusted(const Criterion& c, const Evidence& e, CriterionResult& r) {
  for (const Proof* p : e.untrusted(c.proof, c.experiment))
    r.integrity.push_back(fmt::format("proof #{} ({}) is {}: not credited ({})", p->row.id, p->row.kind,
                                      db::to_string(p->chain),
                                      p->chain_detail.empty() ? "its JSON no longer parses" : p->chain_detail));
}

// No trusted evidence: missing, or failed when the only evidence is untrusted.
inline void set_missing(const Criterion& c, const Evidence& e, CriterionResult& r) {
  const auto bad = e.untrusted(c.proof, c.experiment);
  if (bad.empty()) {
    r.status = Status::kMissing;
    r.detail = "no " + (c.proof.empty() ? std::string("predictions") : c.proof + " evidence") +
               (c.experiment.empty() ? "" : " from experiment " + c.experiment) + " in the database";
  } else {
    r.status = Status::kFailed;
    r.detail = fmt::format("its only evidence (proof #{}) is {}: nothing credited", bad.back()->row.id,
                           db::to_string(bad.back()->chain));
  }
}

// The latest trusted proof of the criterion's selection (recorded in r), or nullptr with the
// status set to missing/failed.
inline const Proof* latest_trusted(const Criterion& c, const Evidence& e, CriterionResult& r) {
  note_untrusted(c, e, r);
  const auto v = e.trusted(c.proof, c.experiment);
  if (v.empty()) {
    set_missing(c, e, r);
    return nullptr;
  }
  add_proof(r, *v.back());
  return v.back();
}

// Passed when every measurement is within its threshold; the detail line either way.
inline void conclude(CriterionResult& r, const std::string& detail) {
  bool ok = !r.measurements.empty();
  std::string first_bad;
  for (const Measurement& m : r.measurements) {
    if (!m.ok && first_bad.empty())
      first_bad = fmt::format("{} = {:g}, needs {} {:g}", m.figure, m.value, m.op, m.threshold);
    ok = ok && m.ok;
  }
  r.status = ok ? Status::kPassed : Status::kFailed;
  r.detail = ok ? detail : detail + "; " + first_bad;
}

void judge_seed_example(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_efficiency_substitution(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_equivalence(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_kill_resume(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_hang_fallback(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_elastic(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_checkpoint(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_predictions(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_proof_passed(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);
void judge_decision(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);  // checks_decide.cpp
void judge_lesson(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&);

}  // namespace parlab::rubric::detail
