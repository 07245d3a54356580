#pragma once
// Who owns a run: a process on a host. Used to tell a run whose owner died (left 'running'
// forever) from one still in progress.
#include <cstdint>
#include <optional>
#include <string>

namespace parlab::db {

struct ProcessIdentity {
  std::int64_t pid = 0;
  // Start time of the process in clock ticks since boot (field 22 of /proc/<pid>/stat). A pid
  // recycled by a later process has a different start time. Absent where /proc is not available.
  std::optional<std::int64_t> start_ticks;
  std::string host;
};

// The calling process.
ProcessIdentity current_process();
// This machine's host name (gethostname).
std::string host_name();
// The start ticks of `pid`, or nothing when the process does not exist or /proc is unavailable.
std::optional<std::int64_t> process_start_ticks(std::int64_t pid);

// Whether the process `pid` on this host still exists and is the same process (its start ticks
// match when both are known). A zombie (exited, not yet reaped) counts as gone.
bool process_alive(std::int64_t pid, std::optional<std::int64_t> start_ticks);

}  // namespace parlab::db
