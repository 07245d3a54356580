#include "rubric/class_report.h"

#include <fmt/core.h>

#include <algorithm>

#include "base/errors.h"

namespace parlab::rubric {
namespace {

// RFC 4180: quote a field that holds a comma, a quote or a line break.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

}  // namespace

ClassReport grade_class(const std::filesystem::path& dir, const Rubric& rubric, const GradeOptions& options) {
  if (!std::filesystem::is_directory(dir))
    throw ConfigError("--class", dir.string(), "must be a folder of results databases (*.db)");
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".db") files.push_back(entry.path());
  if (files.empty())
    throw ConfigError("--class", dir.string(), "holds no *.db file (one results database per learner)");
  std::sort(files.begin(), files.end());
  ClassReport c;
  c.rubric_name = rubric.name;
  for (const Criterion& k : rubric.criteria) c.criteria.push_back(k.id);
  std::vector<int> passed(c.criteria.size(), 0), counted(c.criteria.size(), 0);
  int graded = 0, learners_passed = 0;
  for (const auto& f : files) {
    ClassRow row{f.stem().string(), f, std::nullopt, ""};
    try {
      row.report = grade_file(f, rubric, options);
      ++graded;
      learners_passed += row.report->passed;
      for (size_t i = 0; i < c.criteria.size(); ++i) {
        const CriterionResult& r = row.report->criteria[i];
        if (r.status == Status::kBlocked) continue;
        ++counted[i];
        passed[i] += r.points > 0 || (r.status == Status::kPassed && r.max_points == 0);
      }
    } catch (const Error& e) {
      row.error = e.what();
    }
    c.rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < c.criteria.size(); ++i)
    c.pass_rates.push_back(counted[i] ? double(passed[i]) / counted[i] : 0);
  c.class_pass_rate = graded ? double(learners_passed) / graded : 0;
  return c;
}

std::string class_csv(const ClassReport& c) {
  std::string out = "learner,score,max_score,percent,passed,tampered";
  for (const auto& id : c.criteria) out += "," + csv_field(id);
  out += ",error\n";
  for (const ClassRow& r : c.rows) {
    if (!r.report) {
      out += csv_field(r.learner) + ",,,,,";
      for (size_t i = 0; i < c.criteria.size(); ++i) out += ",";
      out += "," + csv_field(r.error) + "\n";
      continue;
    }
    const Report& g = *r.report;
    out += fmt::format("{},{:g},{:g},{:.1f},{},{}", csv_field(r.learner), g.score, g.max_score, g.percent(),
                       g.passed ? "yes" : "no", g.tampered);
    for (const CriterionResult& k : g.criteria)
      out += "," + std::string(to_string(k.status)) + (k.gated_by.empty() ? "" : " (gated)");
    out += ",\n";
  }
  out += "pass rate,,,,";
  out += fmt::format("{:.0f}%,", 100 * c.class_pass_rate);
  for (double rate : c.pass_rates) out += fmt::format(",{:.0f}%", 100 * rate);
  out += ",\n";
  return out;
}

std::string class_html(const ClassReport& c) {
  std::string h =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>class report — " + esc(c.rubric_name) +
      "</title><style>body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:.25em .5em}.passed{background:#e3f4e6}.failed{background:#fbe3e6}"
      ".missing{background:#fff5d6}.blocked{background:#eee}</style></head><body>";
  h += fmt::format("<h1>Class report: {}</h1><p>{} learners; {:.0f}% at or above the pass mark.</p>",
                   esc(c.rubric_name), c.rows.size(), 100 * c.class_pass_rate);
  h += "<table><tr><th>learner</th><th>score</th>";
  for (const auto& id : c.criteria) h += "<th>" + esc(id) + "</th>";
  h += "</tr>";
  for (const ClassRow& r : c.rows) {
    h += "<tr><td>" + esc(r.learner) + "</td>";
    if (!r.report) {
      h += fmt::format("<td colspan=\"{}\" class=\"failed\">{}</td></tr>", c.criteria.size() + 1, esc(r.error));
      continue;
    }
    h += fmt::format("<td class=\"{}\">{:.1f}%</td>", r.report->passed ? "passed" : "failed", r.report->percent());
    for (const CriterionResult& k : r.report->criteria)
      h += fmt::format("<td class=\"{}\">{:g}/{:g}</td>", to_string(k.status), k.points, k.max_points);
    h += "</tr>";
  }
  h += "<tr><th>pass rate</th><th></th>";
  for (double rate : c.pass_rates) h += fmt::format("<th>{:.0f}%</th>", 100 * rate);
  h += "</tr></table></body></html>\n";
  return h;
}

}  // namespace parlab::rubric
