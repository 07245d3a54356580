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
  // No stdio here: another thread of the parent may have held a stream's lock when it forked.
  const bool ok = write_all(fd, out.data(), out.size());
  ::close(fd);
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

// One simulating child as the parent sees it.
struct Child {
  pid_t pid = -1;
  int fd = -1, progress_fd = -1;  // result and progress pipes (read ends)
  std::string bytes, progress;
};

Child start_child(const std::function<std::string(const ProgressFn&)>& work) {
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
  return {pid, fds[0], pfds[0], {}, {}};
}

// Reaps the child whose result pipe has closed and returns its result (or throws its error).
std::string finish_child(Child& c) {
  ::close(c.fd);
  if (c.progress_fd >= 0) ::close(c.progress_fd);
  int status = 0;
  pid_t reaped = -1;
  do {
    reaped = ::waitpid(c.pid, &status, 0);
  } while (reaped < 0 && errno == EINTR);
  // reaped < 0 (ECHILD): a SIGCHLD handler of the host program took the child; the bytes decide.
  if (reaped == c.pid && WIFSIGNALED(status))
    throw RuntimeError("the simulation process was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
                       strsignal(WTERMSIG(status)) + ")");
  if (c.bytes.empty())
    throw RuntimeError(
        "the simulation process ended without a result" +
        (reaped == c.pid ? " (exit status " + std::to_string(WEXITSTATUS(status)) + ")" : std::string()));
  if (c.bytes[0] == 'E') throw RuntimeError("simulation failed: " + c.bytes.substr(1));
  return c.bytes.substr(1);
}

void kill_all(std::vector<Child>& running) {
  for (auto& c : running) {
    ::kill(c.pid, SIGKILL);
    ::close(c.fd);
    if (c.progress_fd >= 0) ::close(c.progress_fd);
    int status = 0;
    while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {}
  }
  running.clear();
}

}  // namespace

std::vector<std::string> run_isolated_all(const std::vector<std::function<std::string(const ProgressFn&)>>& works,
                                          int parallel, const JobProgressFn& on_progress,
                                          const std::atomic<bool>* cancel,
                                          const std::function<void(size_t job)>& before_start) {
  std::vector<std::string> results(works.size());
  std::vector<Child> running;
  std::vector<size_t> job_of;  // parallel to running
  size_t next = 0, done = 0;
  char buf[1 << 16];
  try {
    while (done < works.size()) {
      while (next < works.size() && int(running.size()) < std::max(1, parallel)) {
        if (before_start) before_start(next);
        running.push_back(start_child(works[next]));
        job_of.push_back(next++);
      }
      if (cancel && cancel->load()) {
        kill_all(running);
        throw SimulationCancelled();
      }
      std::vector<pollfd> p;
      for (const auto& c : running) {
        p.push_back({c.fd, POLLIN, 0});
        p.push_back({c.progress_fd, short(c.progress_fd >= 0 ? POLLIN : 0), 0});
      }
      const int ready = ::poll(p.data(), nfds_t(p.size()), 50);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) throw RuntimeError(std::string("poll() failed: ") + std::strerror(errno));
      for (size_t k = running.size(); k-- > 0;) {
        Child& c = running[k];
        if (c.progress_fd >= 0 && (p[2 * k + 1].revents & (POLLIN | POLLHUP))) {
          const ssize_t n = ::read(c.progress_fd, buf, sizeof buf);
          if (n > 0) {
            c.progress.append(buf, size_t(n));
            deliver(c.progress, [&](double f, std::string_view what) {
              if (on_progress) on_progress(job_of[k], f, what);
            });
          } else if (n == 0 || errno != EINTR) {
            ::close(c.progress_fd);
            c.progress_fd = -1;
          }
        }
        if (!(p[2 * k].revents & (POLLIN | POLLHUP))) continue;
        const ssize_t n = ::read(c.fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n > 0) {
          c.bytes.append(buf, size_t(n));
          continue;
        }
        Child finished = std::move(c);
        const size_t job = job_of[k];
        running.erase(running.begin() + std::ptrdiff_t(k));
        job_of.erase(job_of.begin() + std::ptrdiff_t(k));
        results[job] = finish_child(finished);
        ++done;
      }
    }
  } catch (...) {
    kill_all(running);
    throw;
  }
  return results;
}

std::string run_isolated(const std::function<std::string(const ProgressFn&)>& work, const IsolateOptions& options) {
  JobProgressFn progress;
  if (options.on_progress) progress = [&](size_t, double f, std::string_view what) { options.on_progress(f, what); };
  return run_isolated_all({work}, 1, progress, options.cancel).front();
}

std::string run_isolated(const std::function<std::string()>& work) {
  return run_isolated([&work](const ProgressFn&) { return work(); }, {});
}

}  // namespace parlab::sim
