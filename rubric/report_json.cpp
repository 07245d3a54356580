// The report as JSON (everything, for scripts) and as Gradescope's results.json.
#include <fmt/core.h>

#include <cmath>

#include "rubric/report.h"

namespace parlab::rubric {

using nlohmann::json;

json to_json(const Report& r) {
  json criteria = json::array();
  for (const CriterionResult& c : r.criteria) {
    json ms = json::array(), parts = json::array();
    for (const Measurement& m : c.measurements)
      ms.push_back({{"figure", m.figure},
                    {"value", m.value},
                    {"op", m.op},
                    {"threshold", m.threshold},
                    {"ok", m.ok},
                    {"note", m.note}});
    for (const Part& p : c.parts)
      parts.push_back({{"name", p.name}, {"passed", p.passed}, {"detail", p.detail}, {"proofs", p.proofs}});
    json j = {{"id", c.id},
              {"title", c.title},
              {"category", c.category},
              {"status", to_string(c.status)},
              {"points", c.points},
              {"max_points", c.max_points},
              {"proofs", c.proofs},
              {"runs", c.runs},
              {"predictions", c.predictions},
              {"measurements", ms},
              {"parts", parts},
              {"detail", c.detail},
              {"fix", c.fix},
              {"integrity", c.integrity}};
    if (!c.gated_by.empty()) j["gated_by"] = c.gated_by;
    if (c.reproduced) j["reproduced"] = *c.reproduced;
    criteria.push_back(j);
  }
  const Measures& m = r.measures;
  json measures = {{"slice_reliability", json::array()}, {"step_times", json::array()}};
  if (m.decision)
    measures["decision_utility"] = {{"chosen", m.decision->chosen},
                                    {"chosen_by", m.decision->chosen_by},
                                    {"best", m.decision->best},
                                    {"regret_percent", m.decision->regret_percent},
                                    {"candidates", m.decision->candidates},
                                    {"chosen_samples_per_s", m.decision->chosen_samples_per_s},
                                    {"best_samples_per_s", m.decision->best_samples_per_s},
                                    {"proof", m.decision->proof}};
  for (const SliceRow& s : m.slices)
    measures["slice_reliability"].push_back({{"proof_kind", s.proof_kind},
                                             {"split", s.split},
                                             {"workers", s.workers},
                                             {"passed", s.passed},
                                             {"total", s.total},
                                             {"rate", s.rate()}});
  for (const LatencyRow& l : m.step_times)
    measures["step_times"].push_back({{"workers", l.workers}, {"step_seconds", l.step_seconds}});
  auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  measures["restart_latency"] = {
      {"count", m.restarts}, {"p50_seconds", opt(m.restart_p50_seconds)}, {"max_seconds", opt(m.restart_max_seconds)}};
  measures["detection"] = {{"count", m.detections},
                           {"p50_seconds", opt(m.detection_p50_seconds)},
                           {"max_seconds", opt(m.detection_max_seconds)}};
  return {
      {"rubric", {{"name", r.rubric_name}, {"title", r.rubric_title}, {"source", r.rubric_source}}},
      {"db", {{"path", r.db_path}, {"digest", r.db_digest}}},
      {"graded_at", r.graded_at},
      {"grader",
       {{"version", r.grader_version}, {"binary", r.grader_binary}, {"host", r.grader_host}, {"hardware", r.hardware}}},
      {"score", r.score},
      {"max_score", r.max_score},
      {"percent", r.percent()},
      {"pass_mark", r.pass_mark},
      {"passed", r.passed},
      {"blocked_points", r.blocked_points},
      {"integrity",
       {{"proofs", r.proofs},
        {"tampered", r.tampered},
        {"unchained", r.unchained},
        {"gaps", r.gaps},
        {"findings", r.chain_findings},
        {"chain_head", r.chain_head},
        {"software_versions", r.software_versions},
        {"machines", r.machines}}},
      {"criteria", criteria},
      {"measures", measures},
      {"execution_seconds", r.execution_seconds}};
}

json gradescope_json(const Report& r) {
  json tests = json::array();
  for (const CriterionResult& c : r.criteria) {
    std::string out = std::string(to_string(c.status)) + ": " + c.detail;
    for (const Measurement& m : c.measurements)
      out +=
          fmt::format("\n{} {}: {:.4g} (needs {} {:.4g})", m.ok ? "ok" : "BAD", m.figure, m.value, m.op, m.threshold);
    for (const std::string& i : c.integrity) out += "\n! " + i;
    if (!c.fix.empty()) out += "\nHow to fix: " + c.fix;
    std::string evidence;
    for (auto id : c.proofs) evidence += (evidence.empty() ? "" : ", ") + ("proof #" + std::to_string(id));
    if (!evidence.empty()) out += "\nEvidence: " + evidence;
    json t = {{"name", c.id + ": " + c.title},
              {"score", c.points},
              {"status", c.points > 0 || (c.status == Status::kPassed && c.max_points == 0) ? "passed" : "failed"},
              {"output", out},
              {"visibility", "visible"}};
    // Blocked criteria are reported apart: shown, but worth nothing here (max_score 0).
    t["max_score"] = c.status == Status::kBlocked ? 0.0 : c.max_points;
    if (c.status == Status::kBlocked) t["name"] = c.id + ": " + c.title + " [blocked: needs a GPU]";
    tests.push_back(t);
  }
  std::string output = fmt::format("{:.1f}% of the available points (pass mark {:.0f}%): {}.", r.percent(),
                                   100 * r.pass_mark, r.passed ? "passed" : "not passed");
  if (r.blocked_points > 0)
    output +=
        fmt::format(" {:g} points blocked (hardware the learner's machine lacks), not counted.", r.blocked_points);
  if (r.tampered > 0)
    output += fmt::format(" {} proof row(s) were changed after they were written and earn nothing.", r.tampered);
  output += fmt::format("\nGraded by parlab {} on {}; database {}; {} proofs, chain head {}.", r.grader_version,
                        r.grader_host, r.db_digest.empty() ? "-" : r.db_digest, r.proofs,
                        r.chain_head.empty() ? "-" : r.chain_head);
  output += "\n\n" + measures_summary(r.measures);
  return {{"score", r.score},
          {"execution_time", static_cast<int>(std::ceil(r.execution_seconds))},
          {"output", output},
          {"visibility", "visible"},
          {"stdout_visibility", "hidden"},
          {"tests", tests}};
}

}  // namespace parlab::rubric
