#include "trace/trace.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <tuple>

#include "base/errors.h"

namespace parlab::trace {
namespace {

// Thread ids: compute 0, comm 1, anything else after them in name order.
int thread_of(const std::string& stream, const std::map<std::string, int>& extra) {
  if (stream == "compute") return 0;
  if (stream == "comm") return 1;
  return extra.at(stream);
}

std::string micros(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", seconds * 1e6);
  return buf;
}

}  // namespace

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void write_chrome_trace(std::ostream& out, std::vector<Event> events, const std::string& title) {
  std::map<std::string, int> extra;
  std::set<int> ranks;
  for (const auto& e : events) {
    ranks.insert(e.rank);
    if (e.stream != "compute" && e.stream != "comm") extra.emplace(e.stream, 0);
  }
  int next = 2;
  for (auto& [name, tid] : extra) tid = next++;
  std::sort(events.begin(), events.end(), [&](const Event& a, const Event& b) {
    return std::make_tuple(a.rank, thread_of(a.stream, extra), a.start_seconds, a.end_seconds, a.name) <
           std::make_tuple(b.rank, thread_of(b.stream, extra), b.start_seconds, b.end_seconds, b.name);
  });

  out << "{\"traceEvents\": [\n";
  bool first = true;
  auto line = [&](const std::string& s) {
    out << (first ? "" : ",\n") << s;
    first = false;
  };
  for (int r : ranks) {
    const std::string pid = std::to_string(r);
    line("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"args\": {\"name\": \"rank " + pid +
         "\"}}");
    line("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid + ", \"args\": {\"sort_index\": " + pid +
         "}}");
    line("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"tid\": 0, \"args\": {\"name\": \"compute\"}}");
    line("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid +
         ", \"tid\": 1, \"args\": {\"name\": \"comm\"}}");
    for (const auto& [name, tid] : extra)
      line("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " + std::to_string(tid) +
           ", \"args\": {\"name\": " + json_string(name) + "}}");
  }
  for (const auto& e : events) {
    std::string s = "{\"name\": " + json_string(e.name) + ", \"cat\": " + json_string(e.stream) +
                    ", \"ph\": \"X\", \"pid\": " + std::to_string(e.rank) +
                    ", \"tid\": " + std::to_string(thread_of(e.stream, extra)) +
                    ", \"ts\": " + micros(e.start_seconds) +
                    ", \"dur\": " + micros(std::max(0.0, e.end_seconds - e.start_seconds));
    if (!e.args.empty()) {
      s += ", \"args\": {";
      for (size_t i = 0; i < e.args.size(); ++i)
        s += (i ? ", " : "") + json_string(e.args[i].first) + ": " + json_string(e.args[i].second);
      s += "}";
    }
    line(s + "}");
  }
  out << "\n], \"displayTimeUnit\": \"ms\", \"otherData\": {\"title\": " << json_string(title) << "}}\n";
}

void write_chrome_trace_file(const std::string& path, std::vector<Event> events, const std::string& title) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw RuntimeError("cannot write trace file " + path);
  write_chrome_trace(out, std::move(events), title);
  out.flush();
  if (!out) throw RuntimeError("error while writing trace file " + path);
}

}  // namespace parlab::trace
