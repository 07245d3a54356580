#pragma once
// Real child processes for the multi-process tests: posix_spawn (never fork from inside gtest),
// an exit-status wait bounded by a deadline, and a destructor that kills a child still running.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace parlab::comm::testing {

class ChildProcess {
 public:
  // Starts `argv` with this process's environment plus `extra_env` (which wins).
  ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env = {}) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string entry(*e);
      const std::string key = entry.substr(0, entry.find('='));
      if (!extra_env.count(key)) env.push_back(entry);
    }
    for (const auto& [k, v] : extra_env) env.push_back(k + "=" + v);
    std::vector<char*> args, envp;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], nullptr, nullptr, args.data(), envp.data());
    if (rc != 0) {
      throw std::runtime_error("posix_spawn " + argv[0] + ": " + std::strerror(rc));
    }
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_) { o.pid_ = -1; }

  pid_t pid() const { return pid_; }

  // Exit code, or nullopt if the child did not exit by `timeout` (it is then killed) or died
  // from a signal.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      int status = 0;
      const pid_t got = ::waitpid(pid_, &status, WNOHANG);
      if (got == pid_) {
        pid_ = -1;
        if (WIFEXITED(status)) return WEXITSTATUS(status);
        return std::nullopt;
      }
      if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;  // dtor kills
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace parlab::comm::testing
