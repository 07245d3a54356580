// Text and Markdown reports: the same sections (summary, criteria, measures, integrity), one
// written for a terminal, one for a README or an LMS comment.
#include <fmt/core.h>

#include "rubric/report.h"
#include "base/text_table.h"

namespace parlab::rubric {
namespace {

std::string status_cell(const CriterionResult& c) {
  std::string s = to_string(c.status);
  if (!c.gated_by.empty()) s += " (gated by " + c.gated_by + ")";
  if (c.reproduced && !*c.reproduced) s += " (does not reproduce)";
  return s;
}

std::string ids(const std::vector<std::int64_t>& v, const char* prefix) {
  std::string s;
  for (auto id : v) s += (s.empty() ? "" : " ") + std::string(prefix) + std::to_string(id);
  return s;
}

std::string evidence_cell(const CriterionResult& c) {
  std::string s = ids(c.proofs, "proof#");
  if (!c.predictions.empty()) s += (s.empty() ? "" : " ") + ids(c.predictions, "prediction#");
  return s.empty() ? "-" : s;
}

std::string measurement_line(const Measurement& m) {
  return fmt::format("{} {:.4g} (needs {} {:.4g}) {}{}", m.ok ? "ok " : "BAD", m.value, m.op, m.threshold, m.figure,
                     m.note.empty() ? "" : " — " + m.note);
}

std::string measures_lines(const Measures& m, const char* bullet) {
  std::string s;
  if (m.decision)
    s += fmt::format(
        "{}decision utility: the model ({}) chose {}, the best measured was {}: regret {:.1f}% ({:.1f} vs {:.1f} "
        "samples/s, {} candidates, proof #{})\n",
        bullet, m.decision->chosen_by, m.decision->chosen, m.decision->best, m.decision->regret_percent,
        m.decision->chosen_samples_per_s, m.decision->best_samples_per_s, m.decision->candidates, m.decision->proof);
  else
    s += std::string(bullet) + "decision utility: no measured candidates with predictions (run scaling_1_2_4)\n";
  for (const SliceRow& r : m.slices)
    s += fmt::format("{}slice reliability: {} {} on {} workers: {}/{} passed ({:.0f}%)\n", bullet, r.proof_kind,
                     r.split, r.workers, r.passed, r.total, 100 * r.rate());
  if (m.slices.empty()) s += std::string(bullet) + "slice reliability: no proofs yet\n";
  for (const LatencyRow& r : m.step_times)
    s += fmt::format("{}system latency: step time on {} workers {}\n", bullet, r.workers, seconds_text(r.step_seconds));
  s += m.restart_p50_seconds
           ? fmt::format("{}system latency: restart (fault -> training again) p50 {}, max {} over {} restarts\n",
                         bullet, seconds_text(*m.restart_p50_seconds), seconds_text(*m.restart_max_seconds), m.restarts)
           : std::string(bullet) + "system latency: no restarts recorded\n";
  s += m.detection_p50_seconds
           ? fmt::format("{}system latency: detection p50 {}, max {} over {} incidents\n", bullet,
                         seconds_text(*m.detection_p50_seconds), seconds_text(*m.detection_max_seconds), m.detections)
           : std::string(bullet) + "system latency: no detections recorded\n";
  return s;
}

}  // namespace

std::string measures_summary(const Measures& m) { return measures_lines(m, ""); }

std::string seconds_text(double s) { return s < 1 ? fmt::format("{:.1f} ms", s * 1e3) : fmt::format("{:.2f} s", s); }

std::string render_text(const Report& r) {
  std::string out = fmt::format("{} — {}\n{}\ngraded {} by parlab {} ({}), hardware {}\n\n", r.rubric_name,
                                r.rubric_title, r.db_path, r.graded_at, r.grader_version, r.grader_binary, r.hardware);
  TextTable t({"criterion", "status", "points", "evidence", "why"});
  for (const CriterionResult& c : r.criteria)
    t.add({c.id, status_cell(c), fmt::format("{:g}/{:g}", c.points, c.max_points), evidence_cell(c), c.detail});
  out += t.str();
  out += fmt::format("\nScore {:g}/{:g} = {:.1f}% (pass mark {:.0f}%): {}", r.score, r.max_score, r.percent(),
                     100 * r.pass_mark, r.passed ? "PASSED" : "NOT PASSED");
  if (r.blocked_points > 0)
    out += fmt::format("; {:g} points blocked (hardware the learner's machine lacks), not counted", r.blocked_points);
  out += "\n\nDetails\n";
  for (const CriterionResult& c : r.criteria) {
    out += fmt::format("\n[{}] {} — {}\n", to_string(c.status), c.id, c.title);
    for (const Measurement& m : c.measurements) out += "    " + measurement_line(m) + "\n";
    for (const Part& p : c.parts) out += fmt::format("    {} {}: {}\n", p.passed ? "ok " : "BAD", p.name, p.detail);
    for (const std::string& i : c.integrity) out += "    ! " + i + "\n";
    if (!c.fix.empty()) out += "    fix: " + c.fix + "\n";
  }
  out += "\nMeasures\n" + measures_lines(r.measures, "  ");
  out +=
      fmt::format("\nEvidence integrity: {} proofs, {} tampered, {} unchained, {} gap(s); written by parlab {} on {}\n",
                  r.proofs, r.tampered, r.unchained, r.gaps, r.software_versions.empty() ? "-" : r.software_versions,
                  r.machines.empty() ? "-" : r.machines);
  out += fmt::format("  database {}, chain head {}, graded on {}\n", r.db_digest.empty() ? "-" : r.db_digest,
                     r.chain_head.empty() ? "-" : r.chain_head, r.grader_host);
  for (const std::string& f : r.chain_findings) out += "  ! " + f + "\n";
  return out;
}

std::string render_markdown(const Report& r) {
  std::string out = fmt::format("# {} — {}\n\n`{}` graded {} by parlab {} (`{}`), hardware {}.\n\n", r.rubric_name,
                                r.rubric_title, r.db_path, r.graded_at, r.grader_version, r.grader_binary, r.hardware);
  out += fmt::format("**Score {:g}/{:g} = {:.1f}%** (pass mark {:.0f}%): **{}**", r.score, r.max_score, r.percent(),
                     100 * r.pass_mark, r.passed ? "passed" : "not passed");
  if (r.blocked_points > 0) out += fmt::format(" — {:g} points blocked, reported apart", r.blocked_points);
  out +=
      "\n\n| criterion | status | points | evidence | value vs threshold | how to fix |\n|---|---|---|---|---|---|\n";
  for (const CriterionResult& c : r.criteria) {
    std::string values;
    for (const Measurement& m : c.measurements)
      values +=
          fmt::format("{}{} {:.4g} {} {:.4g}", values.empty() ? "" : "<br>", m.figure, m.value, m.op, m.threshold);
    out += fmt::format("| {} — {} | {} | {:g}/{:g} | {} | {} | {} |\n", c.id, c.title, status_cell(c), c.points,
                       c.max_points, evidence_cell(c), values.empty() ? c.detail : values, c.fix.empty() ? "" : c.fix);
  }
  out += "\n## Measures\n\n" + measures_lines(r.measures, "- ");
  out += fmt::format("\n## Evidence integrity\n\n{} proofs, {} tampered, {} unchained, {} gap(s).\n", r.proofs,
                     r.tampered, r.unchained, r.gaps);
  for (const std::string& f : r.chain_findings) out += "- " + f + "\n";
  return out;
}

}  // namespace parlab::rubric
