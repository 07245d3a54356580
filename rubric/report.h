#pragma once
// A Report in the formats `parlab grade --format` writes: text (a terminal), md, html (with the
// speedup chart and the memory bars as inline SVG), json (everything), gradescope (results.json
// in Gradescope's schema: score, execution_time, output, tests[] with name, score, max_score,
// status, output, visibility).
#include <nlohmann/json.hpp>
#include <string>

#include "rubric/evidence.h"
#include "rubric/grade.h"

namespace parlab::rubric {

std::string render_text(const Report& report);
std::string render_markdown(const Report& report);
// `evidence` supplies the chart's and the bars' figures (the scaling report, the seed ledger).
std::string render_html(const Report& report, const Evidence& evidence);
nlohmann::json to_json(const Report& report);
nlohmann::json gradescope_json(const Report& report);

// The chapter's measures as plain lines (decision utility, slice reliability, system latency).
std::string measures_summary(const Measures& measures);

// "12.3 ms", "1.20 s": the reports' durations.
std::string seconds_text(double seconds);

}  // namespace parlab::rubric
