#include "gui/core/trace_reader.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "base/errors.h"

namespace parlab::gui {

std::vector<trace::Event> read_chrome_trace_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw RuntimeError("trace " + path + ": cannot be read");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const std::exception& e) {
    throw RuntimeError("trace " + path + ": not JSON (" + e.what() + ")");
  }
  if (!j.contains("traceEvents") || !j["traceEvents"].is_array())
    throw RuntimeError("trace " + path + ": no traceEvents array");
  std::map<std::pair<int, int>, std::string> threads;  // (pid, tid) -> stream
  for (const auto& e : j["traceEvents"])
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
      threads[{e.value("pid", 0), e.value("tid", 0)}] = e["args"].value("name", "");
  std::vector<trace::Event> out;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    trace::Event t;
    t.rank = e.value("pid", 0);
    const int tid = e.value("tid", 0);
    const auto it = threads.find({t.rank, tid});
    t.stream = it != threads.end() ? it->second : (tid == 0 ? "compute" : "comm");
    t.name = e.value("name", "");
    t.start_seconds = e.value("ts", 0.0) * 1e-6;
    t.end_seconds = t.start_seconds + e.value("dur", 0.0) * 1e-6;
    if (e.contains("args") && e["args"].is_object())
      for (const auto& [k, v] : e["args"].items())
        t.args.emplace_back(k, v.is_string() ? v.get<std::string>() : v.dump());
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<trace::Event> last_step(const std::vector<trace::Event>& events, double step_seconds) {
  double end = 0;
  for (const auto& e : events) end = std::max(end, e.end_seconds);
  const double from = std::max(0.0, end - step_seconds);
  std::vector<trace::Event> out;
  for (const auto& e : events)
    if (e.start_seconds >= from - 1e-12) {
      trace::Event s = e;
      s.start_seconds -= from;
      s.end_seconds -= from;
      out.push_back(std::move(s));
    }
  return out;
}

namespace {
std::optional<int> step_of(const trace::Event& e) {
  for (const auto& [k, v] : e.args)
    if (k == "step") {
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        return std::nullopt;
      }
    }
  return std::nullopt;
}
}  // namespace

std::vector<int> traced_steps(const std::vector<trace::Event>& events) {
  std::set<int> steps;
  for (const auto& e : events)
    if (const auto s = step_of(e)) steps.insert(*s);
  return {steps.begin(), steps.end()};
}

std::vector<trace::Event> traced_step(const std::vector<trace::Event>& events, int step) {
  std::vector<trace::Event> out;
  double from = std::numeric_limits<double>::infinity();
  for (const auto& e : events)
    if (step_of(e) == step) {
      out.push_back(e);
      from = std::min(from, e.start_seconds);
    }
  for (auto& e : out) {
    e.start_seconds -= from;
    e.end_seconds -= from;
  }
  return out;
}

}  // namespace parlab::gui
