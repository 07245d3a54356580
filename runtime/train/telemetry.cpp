#include "runtime/train/telemetry.h"

#include <algorithm>
#include <limits>
#include <map>

#include "base/errors.h"

namespace parlab::train {

void MemorySink::on_step(const StepRecord& record) {
  std::lock_guard lock(mu_);
  records_.push_back(record);
}

std::vector<StepRecord> MemorySink::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

std::vector<StepRecord> MemorySink::records_of(int rank) const {
  std::vector<StepRecord> out;
  for (const StepRecord& r : records())
    if (r.rank == rank) out.push_back(r);
  std::stable_sort(out.begin(), out.end(), [](const StepRecord& a, const StepRecord& b) { return a.step < b.step; });
  return out;
}

JsonlSink::JsonlSink(const std::filesystem::path& path, const std::filesystem::path& events_path)
    : out_(path, std::ios::trunc) {
  if (!out_) throw RuntimeError("cannot open " + path.string() + " for the step records");
  if (!events_path.empty()) {
    events_.open(events_path, std::ios::trunc);
    if (!events_) throw RuntimeError("cannot open " + events_path.string() + " for the events");
  }
}

void JsonlSink::on_step(const StepRecord& record) {
  // Flushed per line: the supervisor tails this file while the worker runs.
  out_ << to_json(record, false).dump() << '\n' << std::flush;
  if (events_.is_open()) {
    nlohmann::json events = nlohmann::json::array();
    for (const OpEvent& e : record.events) events.push_back(to_json(e));
    events_ << events.dump() << '\n' << std::flush;
  }
}

void JsonlSink::write_line(const nlohmann::json& line) { out_ << line.dump() << '\n' << std::flush; }

void FanoutSink::on_step(const StepRecord& record) {
  for (TelemetrySink* s : sinks_) s->on_step(record);
}

nlohmann::json to_json(const OpEvent& e) {
  nlohmann::json j = {{"rank", e.rank},
                      {"step", e.step},
                      {"op_id", e.op_id},
                      {"stream", e.stream},
                      {"op", e.op},
                      {"tag", e.tag},
                      {"start_seconds", e.start_seconds},
                      {"end_seconds", e.end_seconds}};
  if (!e.group.empty()) j["group"] = e.group;
  if (e.bytes > 0) j["bytes"] = e.bytes;
  if (!e.phase.empty()) j["phase"] = e.phase;
  return j;
}

nlohmann::json to_json(const StepRecord& r, bool with_events) {
  const StepTimes& t = r.times;
  nlohmann::json j = {{"type", "step"},
                      {"rank", r.rank},
                      {"world", r.world},
                      {"step", r.step},
                      {"epoch", r.epoch},
                      {"global_batch", r.global_batch},
                      {"samples", r.samples},
                      {"loss_sum", r.loss_sum},
                      {"data_seconds", t.data_seconds},
                      {"forward_seconds", t.forward_seconds},
                      {"backward_seconds", t.backward_seconds},
                      {"exposed_comm_seconds", t.exposed_comm_seconds},
                      {"optimizer_seconds", t.optimizer_seconds},
                      {"idle_seconds", t.idle_seconds},
                      {"step_seconds", t.step_seconds},
                      {"comm_seconds", t.comm_seconds},
                      {"end_seconds", r.end_seconds}};
  if (!r.sample_indices.empty()) j["sample_indices"] = r.sample_indices;
  if (with_events) {
    nlohmann::json events = nlohmann::json::array();
    for (const OpEvent& e : r.events) events.push_back(to_json(e));
    j["events"] = std::move(events);
  }
  return j;
}

OpEvent op_event_from_json(const nlohmann::json& j) {
  try {
    OpEvent e;
    e.rank = j.at("rank").get<int>();
    e.step = j.at("step").get<int64_t>();
    e.op_id = j.at("op_id").get<int>();
    e.stream = j.at("stream").get<std::string>();
    e.op = j.at("op").get<std::string>();
    e.tag = j.at("tag").get<std::string>();
    e.group = j.value("group", std::string());
    e.bytes = j.value("bytes", 0.0);
    e.phase = j.value("phase", std::string());
    e.start_seconds = j.at("start_seconds").get<double>();
    e.end_seconds = j.at("end_seconds").get<double>();
    return e;
  } catch (const nlohmann::json::exception& ex) {
    throw ConfigError("op event", j.dump().substr(0, 120), std::string("malformed: ") + ex.what());
  }
}

StepRecord step_record_from_json(const nlohmann::json& j) {
  try {
    StepRecord r;
    r.rank = j.at("rank").get<int>();
    r.world = j.at("world").get<int>();
    r.step = j.at("step").get<int64_t>();
    r.epoch = j.at("epoch").get<int64_t>();
    r.global_batch = j.at("global_batch").get<int64_t>();
    r.samples = j.at("samples").get<int64_t>();
    r.loss_sum = j.at("loss_sum").get<double>();
    StepTimes& t = r.times;
    t.data_seconds = j.at("data_seconds").get<double>();
    t.forward_seconds = j.at("forward_seconds").get<double>();
    t.backward_seconds = j.at("backward_seconds").get<double>();
    t.exposed_comm_seconds = j.at("exposed_comm_seconds").get<double>();
    t.optimizer_seconds = j.at("optimizer_seconds").get<double>();
    t.idle_seconds = j.at("idle_seconds").get<double>();
    t.step_seconds = j.at("step_seconds").get<double>();
    t.comm_seconds = j.at("comm_seconds").get<double>();
    r.end_seconds = j.value("end_seconds", 0.0);
    if (j.contains("sample_indices")) r.sample_indices = j.at("sample_indices").get<std::vector<int64_t>>();
    if (j.contains("events"))
      for (const auto& e : j.at("events")) r.events.push_back(op_event_from_json(e));
    return r;
  } catch (const nlohmann::json::exception& ex) {
    throw ConfigError("step record", j.dump().substr(0, 120), std::string("malformed: ") + ex.what());
  }
}

std::vector<trace::Event> to_trace_events(std::span<const OpEvent> events, double origin_seconds) {
  std::vector<trace::Event> out;
  out.reserve(events.size());
  for (const OpEvent& e : events) {
    trace::Event t;
    t.rank = e.rank;
    t.stream = e.stream;
    t.name = e.tag.empty() ? e.op : e.op + " " + e.tag;
    t.start_seconds = e.start_seconds - origin_seconds;
    t.end_seconds = e.end_seconds - origin_seconds;
    t.args.push_back({"step", std::to_string(e.step)});
    if (e.op_id >= 0) t.args.push_back({"op_id", std::to_string(e.op_id)});
    if (!e.group.empty()) t.args.push_back({"group", e.group});
    if (e.bytes > 0) t.args.push_back({"bytes", std::to_string(static_cast<int64_t>(e.bytes))});
    if (!e.phase.empty()) t.args.push_back({"phase", e.phase});
    out.push_back(std::move(t));
  }
  return out;
}

void write_measured_trace(const std::string& path, std::span<const OpEvent> events, const std::string& title) {
  double origin = std::numeric_limits<double>::infinity();
  for (const OpEvent& e : events) origin = std::min(origin, e.start_seconds);
  if (events.empty()) origin = 0;
  trace::write_chrome_trace_file(path, to_trace_events(events, origin), title);
}

MeasuredBubble measured_bubble(std::span<const OpEvent> events) {
  struct Span {
    double first = std::numeric_limits<double>::infinity(), last = -std::numeric_limits<double>::infinity();
    std::map<int, double> busy;  // rank -> forward + backward seconds
  };
  std::map<int64_t, Span> steps;
  for (const OpEvent& e : events) {
    if (e.op != "forward" && e.op != "backward") continue;
    Span& s = steps[e.step];
    s.first = std::min(s.first, e.start_seconds);
    s.last = std::max(s.last, e.end_seconds);
    s.busy[e.rank] += e.end_seconds - e.start_seconds;
  }
  if (steps.size() > 1) steps.erase(steps.begin());  // the warm-up step
  MeasuredBubble out;
  std::map<int, double> per_rank;
  int samples = 0;
  double sum = 0;
  for (const auto& [step, s] : steps) {
    const double span = s.last - s.first;
    if (!(span > 0)) continue;
    ++out.steps;
    for (const auto& [rank, busy] : s.busy) {
      const double b = std::max(0.0, 1.0 - busy / span);
      per_rank[rank] += b;
      sum += b;
      ++samples;
    }
  }
  if (samples == 0) return out;
  out.mean = sum / samples;
  for (const auto& [rank, total] : per_rank) out.max_rank = std::max(out.max_rank, total / out.steps);
  return out;
}

}  // namespace parlab::train
