#pragma once
// Test helpers: a scratch directory per test and a child process started with posix_spawn.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"

namespace parlab::db::testing {

// A fresh directory per test, removed at scope exit (tests/support/scratch_dir.h).
using parlab::testing::ScratchDir;

// A real child process. stdout goes to a pipe the test can read lines from; stderr to a file.
// The destructor kills and reaps a child the test did not wait for.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::filesystem::path& stderr_file) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&actions, fds[0]);
    posix_spawn_file_actions_addclose(&actions, fds[1]);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      throw std::runtime_error("posix_spawn " + argv[0] + " failed: " + std::to_string(rc));
    }
    out_ = ::fdopen(fds[0], "r");
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (out_) ::fclose(out_);
  }

  pid_t pid() const { return pid_; }
  // The next line the child printed (without the newline); empty at end of file.
  std::string read_line() {
    char buffer[256];
    if (!std::fgets(buffer, sizeof(buffer), out_)) return {};
    std::string line(buffer);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    return line;
  }
  // Reaps the child and returns its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

}  // namespace parlab::db::testing
