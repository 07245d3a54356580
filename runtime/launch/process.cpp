#include "runtime/launch/process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/errors.h"

extern char** environ;

namespace parlab::launch {
namespace {

ExitStatus decode(int status) {
  ExitStatus s;
  if (WIFEXITED(status)) {
    s.exited = true;
    s.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    s.signal = WTERMSIG(status);
  }
  return s;
}

// posix_spawn attributes and file actions as RAII values.
struct SpawnAttr {
  posix_spawnattr_t attr;
  SpawnAttr() { posix_spawnattr_init(&attr); }
  ~SpawnAttr() { posix_spawnattr_destroy(&attr); }
};
struct SpawnActions {
  posix_spawn_file_actions_t actions;
  SpawnActions() { posix_spawn_file_actions_init(&actions); }
  ~SpawnActions() { posix_spawn_file_actions_destroy(&actions); }
};

}  // namespace

std::string ExitStatus::describe() const {
  if (exited) return "exited with code " + std::to_string(code);
  const char* name = sigabbrev_np(signal);
  return "was killed by signal " + std::to_string(signal) + (name ? std::string(" (SIG") + name + ")" : "");
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                           const std::filesystem::path& log_file) {
  if (argv.empty()) throw ConfigError("argv", "(empty)", "needs the program to start");
  std::vector<std::string> entries;
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    if (!env.count(entry.substr(0, entry.find('=')))) entries.push_back(entry);
  }
  for (const auto& [k, v] : env)
    if (!v.empty()) entries.push_back(k + "=" + v);
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : entries) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  SpawnAttr attr;
  // Its own process group: teardown signals reach everything the worker started, and the
  // terminal's Ctrl-C reaches only the launcher, which then stops the workers in order.
  posix_spawnattr_setflags(&attr.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&attr.attr, 0);
  sigset_t none, defaults;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr.attr, &none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE, SIGCHLD, SIGHUP}) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr.attr, &defaults);
  SpawnActions actions;
  if (!log_file.empty()) {
    posix_spawn_file_actions_addopen(&actions.actions, STDOUT_FILENO, log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions.actions, STDOUT_FILENO, STDERR_FILENO);
  }
  const int rc = posix_spawn(&pid_, args[0], &actions.actions, &attr.attr, args.data(), envp.data());
  if (rc != 0) {
    pid_ = -1;
    throw RuntimeError("cannot start " + argv[0] + ": " + std::strerror(rc));
  }
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_), status_(o.status_) {
  o.pid_ = -1;
  o.status_ = ExitStatus{};
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && running()) {
    signal(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  }
}

std::optional<ExitStatus> ChildProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  const pid_t got = ::waitpid(pid_, &status, WNOHANG);
  if (got == pid_) status_ = decode(status);
  return status_;
}

void ChildProcess::signal(int sig) const {
  if (pid_ <= 0 || status_) return;
  // The group first; the pid itself in case it left its group.
  ::kill(-pid_, sig);
  ::kill(pid_, sig);
}

std::optional<ExitStatus> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!poll()) {
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return status_;
}

ExitStatus ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (poll()) return *status_;
  signal(SIGTERM);
  if (auto s = wait_for(grace)) return *s;
  signal(SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
  status_ = decode(status);
  return *status_;
}

std::filesystem::path self_executable() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw RuntimeError("cannot find this program's path (/proc/self/exe): " + ec.message());
  return p;
}

bool process_exists(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

std::vector<std::string> worker_command_for(const std::filesystem::path& parlab_bin) {
  const std::filesystem::path worker = parlab_bin.parent_path() / "parlab-worker";
  return std::filesystem::exists(worker) ? std::vector<std::string>{worker.string()}
                                         : std::vector<std::string>{parlab_bin.string(), "train", "--worker"};
}

}  // namespace parlab::launch
