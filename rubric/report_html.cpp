// The HTML report: one self-contained page (no scripts, no external files) with the criteria
// table, the speedup chart and the memory bars as inline SVG, the measures and the integrity
// findings.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "rubric/report.h"

namespace parlab::rubric {
namespace {

using nlohmann::json;

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

const char* kStyle =
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:75em}table{border-collapse:collapse}"
    "td,th{border:1px solid #ccc;padding:.3em .6em;vertical-align:top;text-align:left}"
    ".passed{color:#176f2c}.failed{color:#b00020}.missing{color:#8a6d00}.blocked{color:#555}"
    "small{color:#555}svg text{font-size:11px;font-family:sans-serif}";

// Speedup per worker count: measured and each prediction, with the ideal line.
std::string speedup_chart(const Evidence& e) {
  const Proof* p = nullptr;
  for (const Proof* q : e.trusted("scaling_report")) p = q;
  if (!p) return "<p><small>No scaling report yet: run <code>parlab experiment run scaling_1_2_4</code>.</small></p>";
  const json rows = p->evidence.value("rows", json::array());
  if (rows.empty()) return "";
  const double w1 = rows.front().value("workers", 1), b1 = rows.front().value("global_batch", 1.0);
  const double wmax = rows.back().value("workers", 1);
  const int W = 420, H = 240, L = 40, B = 30;
  double ymax = wmax / w1;
  std::map<std::string, std::vector<std::pair<double, double>>> series;
  for (const char* src : {"measured", "simulated", "analytic"}) {
    const std::string key = std::string(src) + "_step_seconds";
    if (!rows.front().contains(key)) continue;
    const double t1 = rows.front()[key].get<double>();
    for (const json& r : rows) {
      if (!r.contains(key)) continue;
      const double s = (r.value("global_batch", 1.0) / r[key].get<double>()) / (b1 / t1);
      series[src].push_back({r.value("workers", 1), s});
      ymax = std::max(ymax, s);
    }
  }
  auto x = [&](double w) { return L + (W - L - 10) * (wmax > w1 ? (w - w1) / (wmax - w1) : 0.5); };
  auto y = [&](double s) { return H - B - (H - B - 10) * (s / ymax); };
  std::string svg =
      fmt::format("<svg width=\"{}\" height=\"{}\" role=\"img\" aria-label=\"speedup per worker count\">", W, H);
  svg += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#000\"/>", L, H - B, W - 10, H - B);
  svg += fmt::format("<line x1=\"{}\" y1=\"10\" x2=\"{}\" y2=\"{}\" stroke=\"#000\"/>", L, L, H - B);
  svg += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>", x(w1),
      y(1), x(wmax), y(wmax / w1));
  for (const json& r : rows)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>", x(r.value("workers", 1)),
                       H - B + 14, r.value("workers", 1));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">workers</text>", (W + L) / 2, H - 2);
  for (double s = 0; s <= ymax + 1e-9; s += std::max(0.5, std::ceil(ymax / 4)))
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:g}x</text>", L - 4, y(s) + 4, s);
  const std::map<std::string, std::string> colour = {
      {"measured", "#1f5fbf"}, {"simulated", "#d9730d"}, {"analytic", "#2e9c4a"}};
  int legend = 0;
  for (const auto& [src, pts] : series) {
    std::string path;
    for (const auto& [w, s] : pts) path += fmt::format("{}{:.1f},{:.1f}", path.empty() ? "" : " ", x(w), y(s));
    svg +=
        fmt::format("<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>", path, colour.at(src));
    for (const auto& [w, s] : pts)
      svg += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"><title>{} {:g} workers: {:.2f}x</title></circle>",
          x(w), y(s), colour.at(src), src, w, s);
    svg +=
        fmt::format("<text x=\"{}\" y=\"{}\" fill=\"{}\">{}</text>", L + 10, 20 + 14 * legend++, colour.at(src), src);
  }
  svg += fmt::format("<text x=\"{}\" y=\"{}\" fill=\"#999\">ideal</text></svg>", L + 10, 20 + 14 * legend);
  return "<figure>" + svg +
         fmt::format("<figcaption>Speedup at a fixed global batch (proof #{}).</figcaption></figure>", p->row.id);
}

// The seed's memory ledger: one stacked bar per state kind against the device.
std::string memory_bars(const Evidence& e) {
  const Proof* p = nullptr;
  for (const Proof* q : e.trusted("seed_worked_example")) p = q;
  if (!p) return "<p><small>No memory ledger yet: run <code>parlab experiment run seed_budget</code>.</small></p>";
  const json& in = p->inputs;
  const std::pair<const char*, const char*> parts[] = {
      {"params_gb", "#1f5fbf"}, {"grads_gb", "#5b8fd9"}, {"optimizer_gb", "#d9730d"}, {"activations_gb", "#2e9c4a"}};
  double total = 0;
  for (const auto& [k, c] : parts) total += in.value(k, 0.0);
  const double device = in.value("device_gb", 0.0), scale = 380 / std::max(total, device);
  std::string svg = "<svg width=\"460\" height=\"90\" role=\"img\" aria-label=\"memory ledger\">";
  double x0 = 10;
  for (const auto& [k, c] : parts) {
    const double w = in.value(k, 0.0) * scale;
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"20\" width=\"{:.1f}\" height=\"28\" fill=\"{}\"><title>{} {:g} GB</title></rect>", x0,
        w, c, k, in.value(k, 0.0));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"62\">{}</text>", x0 + 2,
                       std::string(k).substr(0, std::string(k).size() - 3));
    x0 += w;
  }
  const double xd = 10 + device * scale;
  svg += fmt::format("<line x1=\"{:.1f}\" y1=\"10\" x2=\"{:.1f}\" y2=\"56\" stroke=\"#b00020\" stroke-width=\"2\"/>",
                     xd, xd);
  svg += fmt::format("<text x=\"{:.1f}\" y=\"10\" fill=\"#b00020\">device {:g} GB</text>", xd + 3, device);
  svg += fmt::format("<text x=\"10\" y=\"82\">replica {:g} GB</text></svg>", total);
  return "<figure>" + svg +
         fmt::format("<figcaption>The seed's memory ledger (proof #{}).</figcaption></figure>", p->row.id);
}

}  // namespace

std::string render_html(const Report& r, const Evidence& e) {
  std::string h = "<!doctype html><html><head><meta charset=\"utf-8\"><title>" + esc(r.rubric_name) + " — " +
                  esc(r.db_path) + "</title><style>" + kStyle + "</style></head><body>";
  h += fmt::format("<h1>{}</h1><p>{}<br><small>{} graded {} by parlab {} ({}), hardware {}</small></p>",
                   esc(r.rubric_title), esc(r.rubric_name), esc(r.db_path), esc(r.graded_at), esc(r.grader_version),
                   esc(r.grader_binary), esc(r.hardware));
  h += fmt::format("<h2 class=\"{}\">Score {:g}/{:g} = {:.1f}% — {}</h2>", r.passed ? "passed" : "failed", r.score,
                   r.max_score, r.percent(), r.passed ? "passed" : "not passed");
  h += fmt::format("<p>Pass mark {:.0f}%.{}</p>", 100 * r.pass_mark,
                   r.blocked_points > 0
                       ? fmt::format(" {:g} points blocked (hardware the learner's machine lacks), reported apart.",
                                     r.blocked_points)
                       : "");
  h += "<table><tr><th>criterion</th><th>status</th><th>points</th><th>evidence</th><th>value vs threshold</th><th>how "
       "to fix</th></tr>";
  for (const CriterionResult& c : r.criteria) {
    std::string values;
    for (const Measurement& m : c.measurements)
      values += fmt::format("<div class=\"{}\">{} {:.4g} {} {:.4g}</div>", m.ok ? "passed" : "failed", esc(m.figure),
                            m.value, esc(m.op), m.threshold);
    for (const Part& p : c.parts)
      values +=
          fmt::format("<div class=\"{}\">{}: {}</div>", p.passed ? "passed" : "failed", esc(p.name), esc(p.detail));
    for (const std::string& i : c.integrity) values += "<div class=\"failed\">" + esc(i) + "</div>";
    std::string ev;
    for (auto id : c.proofs) ev += fmt::format("proof #{} ", id);
    for (auto id : c.predictions) ev += fmt::format("prediction #{} ", id);
    std::string status = to_string(c.status);
    if (!c.gated_by.empty()) status += " (gated by " + c.gated_by + ")";
    h += fmt::format(
        "<tr><td><b>{}</b><br><small>{}</small></td><td "
        "class=\"{}\">{}</td><td>{:g}/{:g}</td><td>{}</td><td>{}<small>{}</small></td><td>{}</td></tr>",
        esc(c.id), esc(c.title), to_string(c.status), esc(status), c.points, c.max_points, ev.empty() ? "-" : ev,
        values, esc(c.detail), esc(c.fix));
  }
  h += "</table><h2>Speedup and memory</h2>" + speedup_chart(e) + memory_bars(e);
  h += "<h2>Measures</h2><ul>";
  const Measures& m = r.measures;
  if (m.decision)
    h += fmt::format(
        "<li>Decision utility: the model ({}) chose <b>{}</b>, the best measured was <b>{}</b>: regret "
        "<b>{:.1f}%</b></li>",
        esc(m.decision->chosen_by), esc(m.decision->chosen), esc(m.decision->best), m.decision->regret_percent);
  else
    h += "<li>Decision utility: no measured candidates with predictions yet</li>";
  h += "<li>Slice reliability:<table><tr><th>proof</th><th>split</th><th>workers</th><th>passed</th></tr>";
  for (const SliceRow& s : m.slices)
    h += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{} ({:.0f}%)</td></tr>", esc(s.proof_kind),
                     esc(s.split), s.workers, s.passed, s.total, 100 * s.rate());
  h += "</table></li><li>System latency: ";
  for (const LatencyRow& l : m.step_times)
    h += fmt::format("step {} on {} workers; ", seconds_text(l.step_seconds), l.workers);
  if (m.restart_p50_seconds)
    h += fmt::format("restart p50 {} / max {} ({} restarts); ", seconds_text(*m.restart_p50_seconds),
                     seconds_text(*m.restart_max_seconds), m.restarts);
  if (m.detection_p50_seconds)
    h += fmt::format("detection p50 {} / max {}", seconds_text(*m.detection_p50_seconds),
                     seconds_text(*m.detection_max_seconds));
  h += "</li></ul>";
  h += fmt::format("<h2>Evidence integrity</h2><p>{} proofs, {} tampered, {} unchained, {} gap(s).</p><ul>", r.proofs,
                   r.tampered, r.unchained, r.gaps);
  for (const std::string& f : r.chain_findings) h += "<li class=\"failed\">" + esc(f) + "</li>";
  h += "</ul></body></html>\n";
  return h;
}

}  // namespace parlab::rubric
