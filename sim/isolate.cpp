#include "sim/isolate.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

#include "strategy/errors.h"

namespace parlab::sim {
namespace {

bool write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t k = ::write(fd, data, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    data += k;
    n -= size_t(k);
  }
  return true;
}

// The child's side: 'R' + result bytes, or 'E' + an error message.
[[noreturn]] void child(int fd, const std::function<std::string()>& work) {
  std::string out;
  try {
    out = "R" + work();
  } catch (const std::exception& e) {
    out = std::string("E") + e.what();
  } catch (...) {
    out = "Eunknown exception in the simulation process";
  }
  const bool ok = write_all(fd, out.data(), out.size());
  ::close(fd);
  std::fflush(stderr);
  ::_exit(ok ? 0 : 3);
}

}  // namespace

std::string run_isolated(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw RuntimeError(std::string("pipe() failed: ") + std::strerror(errno));
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw RuntimeError(std::string("fork() failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1], work);
  }
  ::close(fds[1]);
  std::string bytes;
  char buf[1 << 16];
  for (;;) {
    const ssize_t k = ::read(fds[0], buf, sizeof buf);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    bytes.append(buf, size_t(k));
  }
  ::close(fds[0]);
  int status = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  // reaped < 0 (ECHILD): a SIGCHLD handler of the host program took the child; the bytes decide.
  if (reaped == pid && WIFSIGNALED(status))
    throw RuntimeError("the simulation process was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                       strsignal(WTERMSIG(status)) + ")");
  if (bytes.empty())
    throw RuntimeError("the simulation process ended without a result" +
                       (reaped == pid ? " (exit status " + std::to_string(WEXITSTATUS(status)) + ")" : std::string()));
  if (bytes[0] == 'E') throw RuntimeError("simulation failed: " + bytes.substr(1));
  return bytes.substr(1);
}

}  // namespace parlab::sim
