#pragma once
// Reads a Chrome trace written by trace/trace.cpp (simulated, or a measured run's --trace) back
// into trace events, so the timeline draws both from the one schema.
#include <string>
#include <vector>

#include "trace/trace.h"

namespace parlab::gui {

// Throws parlab::RuntimeError naming the file for unreadable or malformed input.
std::vector<trace::Event> read_chrome_trace_file(const std::string& path);

// The step boundaries of a timeline: [start, end) of step `index` (0-based) among `steps`
// equal parts is not knowable from events alone, so the caller gives the step time.
// Returns the events of the last full step of length `step_seconds` ending at the last event.
std::vector<trace::Event> last_step(const std::vector<trace::Event>& events, double step_seconds);

// The step numbers a measured trace's events carry (the runtime's "step" arg), ascending.
std::vector<int> traced_steps(const std::vector<trace::Event>& events);
// The events of one traced step, shifted so that the step's first event starts at 0: the
// measured step the timeline sets against the simulated one on the same axis.
std::vector<trace::Event> traced_step(const std::vector<trace::Event>& events, int step);

}  // namespace parlab::gui
