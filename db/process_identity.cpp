#include "db/process_identity.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <fstream>
#include <sstream>
#include <string>

namespace parlab::db {

namespace {

struct ProcStat {
  char state = '?';
  std::int64_t start_ticks = 0;
};

// /proc/<pid>/stat is "pid (comm) state ppid ..."; comm may contain spaces and ')' so fields are
// counted from the last ')'. state is field 3, starttime field 22.
std::optional<ProcStat> read_proc_stat(std::int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  const auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcStat stat;
  fields >> stat.state;
  std::string skip;
  for (int field = 4; field < 22; ++field) fields >> skip;
  fields >> stat.start_ticks;
  if (!fields) return std::nullopt;
  return stat;
}

bool proc_available() { return ::access("/proc/self/stat", R_OK) == 0; }

}  // namespace

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "unknown";
  return name;
}

std::optional<std::int64_t> process_start_ticks(std::int64_t pid) {
  const auto stat = read_proc_stat(pid);
  if (!stat) return std::nullopt;
  return stat->start_ticks;
}

ProcessIdentity current_process() {
  ProcessIdentity self;
  self.pid = ::getpid();
  self.start_ticks = process_start_ticks(self.pid);
  self.host = host_name();
  return self;
}

bool process_alive(std::int64_t pid, std::optional<std::int64_t> start_ticks) {
  if (pid <= 0) return false;
  if (proc_available()) {
    const auto stat = read_proc_stat(pid);
    if (!stat) return false;
    if (stat->state == 'Z' || stat->state == 'X') return false;
    return !start_ticks || *start_ticks == stat->start_ticks;
  }
  // No /proc: signal 0 checks existence; EPERM means it exists but belongs to someone else.
  return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

}  // namespace parlab::db
