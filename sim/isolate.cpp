#include "sim/isolate.h"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>

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

// A progress record: the fraction (8 bytes), the line's length (4) and the line.
void write_progress(int fd, double fraction, std::string_view what) {
  std::string rec(sizeof fraction + sizeof(uint32_t), '\0');
  const auto n = uint32_t(std::min<size_t>(what.size(), 4096));
  std::memcpy(rec.data(), &fraction, sizeof fraction);
  std::memcpy(rec.data() + sizeof fraction, &n, sizeof n);
  rec.append(what.data(), n);
  write_all(fd, rec.data(), rec.size());
}

// The child's side: 'R' + result bytes, or 'E' + an error message.
[[noreturn]] void child(int fd, int progress_fd, const std::function<std::string(const ProgressFn&)>& work) {
  std::string out;
  const ProgressFn report = [progress_fd](double f, std::string_view what) {
    if (progress_fd >= 0) write_progress(progress_fd, f, what);
  };
  try {
    out = "R" + work(report);
  } catch (const std::exception& e) {
    out = std::string("E") + e.what();
  } catch (...) {
    out = "Eunknown exception in the simulation process";
  }
  if (progress_fd >= 0) ::close(progress_fd);
  const bool ok = write_all(fd, out.data(), out.size());
  ::close(fd);
  std::fflush(stderr);
  ::_exit(ok ? 0 : 3);
}

// Complete records at the front of `buf` go to the callback (the latest one only: a slow
// callback must not fall behind the simulation).
void deliver(std::string& buf, const ProgressFn& on_progress) {
  size_t pos = 0;
  double fraction = -1;
  std::string what;
  while (buf.size() - pos >= sizeof(double) + sizeof(uint32_t)) {
    uint32_t n = 0;
    std::memcpy(&n, buf.data() + pos + sizeof(double), sizeof n);
    const size_t len = sizeof(double) + sizeof n + n;
    if (buf.size() - pos < len) break;
    std::memcpy(&fraction, buf.data() + pos, sizeof fraction);
    what.assign(buf.data() + pos + sizeof(double) + sizeof n, n);
    pos += len;
  }
  buf.erase(0, pos);
  if (fraction >= 0 && on_progress) on_progress(fraction, what);
}

}  // namespace

std::string run_isolated(const std::function<std::string(const ProgressFn&)>& work, const IsolateOptions& options) {
  int fds[2], pfds[2];
  if (::pipe(fds) != 0) throw RuntimeError(std::string("pipe() failed: ") + std::strerror(errno));
  if (::pipe(pfds) != 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw RuntimeError(std::string("pipe() failed: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {fds[0], fds[1], pfds[0], pfds[1]}) ::close(fd);
    throw RuntimeError(std::string("fork() failed: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::close(fds[0]);
    ::close(pfds[0]);
    child(fds[1], pfds[1], work);
  }
  ::close(fds[1]);
  ::close(pfds[1]);
  std::string bytes, progress;
  char buf[1 << 16];
  bool cancelled = false;
  int progress_fd = pfds[0];
  for (;;) {
    if (options.cancel && options.cancel->load()) {
      ::kill(pid, SIGKILL);
      cancelled = true;
      break;
    }
    pollfd p[2] = {{fds[0], POLLIN, 0}, {progress_fd, POLLIN, 0}};
    const int ready = ::poll(p, progress_fd >= 0 ? 2 : 1, 50);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (progress_fd >= 0 && (p[1].revents & (POLLIN | POLLHUP))) {
      const ssize_t k = ::read(progress_fd, buf, sizeof buf);
      if (k > 0) {
        progress.append(buf, size_t(k));
        deliver(progress, options.on_progress);
      } else if (k == 0 || errno != EINTR) {
        ::close(progress_fd);
        progress_fd = -1;
      }
    }
    if (p[0].revents & (POLLIN | POLLHUP)) {
      const ssize_t k = ::read(fds[0], buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      bytes.append(buf, size_t(k));
    }
  }
  ::close(fds[0]);
  if (progress_fd >= 0) ::close(progress_fd);
  int status = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  if (cancelled) throw SimulationCancelled();
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

std::string run_isolated(const std::function<std::string()>& work) {
  return run_isolated([&work](const ProgressFn&) { return work(); }, {});
}

}  // namespace parlab::sim
