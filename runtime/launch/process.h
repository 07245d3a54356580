#pragma once
// A child process as an RAII value: posix_spawn (safe from a multi-threaded parent, unlike fork),
// its own process group, stdout and stderr to a file, and a destructor that kills (SIGKILL, the
// whole group) and reaps a child still running, so no code path leaves an orphan or a zombie.
#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace parlab::launch {

// How a child ended.
struct ExitStatus {
  bool exited = false;  // exit() / return from main: `code` holds the status
  int code = 0;
  int signal = 0;  // killed by this signal (exited = false)
  bool ok() const { return exited && code == 0; }
  // "exited with code 3", "was killed by signal 9 (SIGKILL)"
  std::string describe() const;
};

class ChildProcess {
 public:
  // Starts argv[0] (a path) with this process's environment plus `env` (which wins; an empty
  // value removes the variable). stdout and stderr go to `log_file` (appended) when given.
  // Throws RuntimeError when the program cannot be started.
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
               const std::filesystem::path& log_file = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&&) = delete;

  pid_t pid() const { return pid_; }
  bool running() const { return !status_.has_value(); }
  // Reaps the child if it has ended (never blocks); returns its status once it has.
  std::optional<ExitStatus> poll();
  // Sends `sig` to the child's process group (it and anything it started).
  void signal(int sig) const;
  // Waits up to `timeout` for the child to end; returns its status, or nullopt if still running.
  std::optional<ExitStatus> wait_for(std::chrono::milliseconds timeout);
  // SIGTERM, then SIGKILL after `grace` if it has not ended; always reaps. Returns the status.
  ExitStatus terminate(std::chrono::milliseconds grace);

 private:
  pid_t pid_ = -1;
  std::optional<ExitStatus> status_;
};

// The path of the running executable (/proc/self/exe), so a launcher can start itself.
std::filesystem::path self_executable();
// How a worker of the parlab program at `parlab_bin` is started: parlab-worker beside it (it
// starts in milliseconds: no simulator to load, cli/worker_main.cpp), else its own worker mode.
std::vector<std::string> worker_command_for(const std::filesystem::path& parlab_bin);

// Whether a process with this pid exists (kill(pid, 0)); zombies count as existing.
bool process_exists(pid_t pid);

}  // namespace parlab::launch
