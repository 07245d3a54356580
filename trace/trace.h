#pragma once
// Chrome trace-event JSON (opens in Perfetto and chrome://tracing): one process per rank with a
// "compute" and a "comm" thread, one complete ("ph": "X") event per op with ts/dur in
// microseconds. The simulator writes its timelines with it and the runtime can write measured
// ones with the same schema: this file knows nothing of SimGrid or step programs (standard
// library only; library target parlab_trace).
//
// Output is deterministic: events are sorted (rank, thread, start, name) and times printed with
// a fixed number of decimals (nanosecond resolution).
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace parlab::trace {

struct Event {
  int rank = 0;
  std::string stream;  // "compute" or "comm" (any other name becomes a further thread)
  std::string name;    // "forward fwd.mb0.c0", "all-reduce grad.bucket3"
  double start_seconds = 0, end_seconds = 0;
  // Shown in the viewer's details pane, as strings: {"bytes", "12582912"}, {"group", "dp.0"}.
  std::vector<std::pair<std::string, std::string>> args;
};

// Writes {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}} to `out`.
// `title` lands in otherData.
void write_chrome_trace(std::ostream& out, std::vector<Event> events, const std::string& title = "parlab");
// Writes the trace to a file; throws parlab::RuntimeError when it cannot be written.
void write_chrome_trace_file(const std::string& path, std::vector<Event> events, const std::string& title = "parlab");

// JSON string escaping (quotes included).
std::string json_string(const std::string& s);

}  // namespace parlab::trace
