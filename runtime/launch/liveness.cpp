#include "runtime/launch/liveness.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime/comm/flight_recorder.h"
#include "runtime/comm/rendezvous.h"
#include "base/errors.h"

namespace parlab::launch {

std::filesystem::path rank_heartbeat_path(const std::filesystem::path& run_dir, int rank) {
  return run_dir / ("rank-" + std::to_string(rank) + ".heartbeat");
}

std::filesystem::path flight_dump_dir(const std::filesystem::path& run_dir) { return run_dir / "flight"; }

std::optional<double> heartbeat_age_seconds(const std::filesystem::path& file, double now_seconds) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return std::nullopt;
  const double touched = static_cast<double>(st.st_mtim.tv_sec) + 1e-9 * static_cast<double>(st.st_mtim.tv_nsec);
  return now_seconds - touched;
}

// ---- heartbeat ----

HeartbeatThread::HeartbeatThread(std::filesystem::path file, std::chrono::milliseconds interval)
    : file_(std::move(file)), interval_(interval) {
  std::filesystem::create_directories(file_.parent_path());
  fd_ = ::open(file_.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ < 0) throw RuntimeError("cannot create the heartbeat file " + file_.string());
  ::futimens(fd_, nullptr);
  thread_ = std::thread([this] { loop(); });
}

HeartbeatThread::~HeartbeatThread() {
  stop();
  if (fd_ >= 0) ::close(fd_);
}

void HeartbeatThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void HeartbeatThread::loop() {
  std::unique_lock lock(mu_);
  while (!cv_.wait_for(lock, interval_, [&] { return stopping_; })) ::futimens(fd_, nullptr);
}

// ---- dump on SIGTERM ----

DumpOnTerminate::DumpOnTerminate(std::filesystem::path dump_dir) : dump_dir_(std::move(dump_dir)) {
  sigemptyset(&term_);
  sigaddset(&term_, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &term_, nullptr);
  thread_ = std::thread([this] { loop(); });
}

DumpOnTerminate::~DumpOnTerminate() {
  stopping_.store(true);
  // Wakes the waiting thread; it sees stopping_ and returns instead of dying.
  ::pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
}

void DumpOnTerminate::watch(std::vector<const comm::Communicator*> comms) {
  std::lock_guard lock(mu_);
  comms_ = std::move(comms);
}

void DumpOnTerminate::unwatch() {
  std::lock_guard lock(mu_);
  comms_.clear();
}

void DumpOnTerminate::dump_all() {
  std::lock_guard lock(mu_);
  try {
    std::filesystem::create_directories(dump_dir_);
  } catch (const std::exception&) {
    return;
  }
  for (const comm::Communicator* c : comms_) {
    try {
      const comm::FlightRecorder& r = c->flight_recorder();
      r.dump(dump_dir_ / comm::flight_recorder_file_name(c->group_name(), r.identity().rank));
    } catch (const std::exception&) {
      // The rank's own failure is what matters; a dump that cannot be written must not hide it.
    }
  }
}

void DumpOnTerminate::loop() {
  for (;;) {
    int signal = 0;
    if (::sigwait(&term_, &signal) != 0 || signal != SIGTERM) continue;
    if (stopping_.load()) return;
    if (!frozen_.load()) dump_all();
    // Die of the signal itself, so the supervisor sees "killed by signal 15" as from any worker.
    ::signal(SIGTERM, SIG_DFL);
    ::pthread_sigmask(SIG_UNBLOCK, &term_, nullptr);
    ::raise(SIGTERM);
    ::_exit(128 + SIGTERM);  // not reached
  }
}

}  // namespace parlab::launch
