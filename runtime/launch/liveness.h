#pragma once
// What a worker does so that the supervisor can tell a hung rank from one that waits for it.
//
//   heartbeat   a thread touches <run_dir>/rank-<r>.heartbeat (its mtime is the beat) every
//               heartbeat_interval(timeout); the supervisor reads the file's age every poll and
//               fails a rank silent for longer than the heartbeat timeout (detectors.h). It beats
//               while the main thread computes or waits in a collective: it says the process is
//               alive and scheduled, not that training progresses; a rank stuck in a collective
//               is the collective timeout's business, a frozen process (the hang fault, a
//               SIGSTOP, a machine in trouble) the heartbeat's.
//   dump on     SIGTERM is blocked in every thread of the worker and taken by one waiting
//   SIGTERM     thread, which dumps the flight recorder of every communicator the rank uses to
//               <run_dir>/flight/ before the process dies of the signal. The supervisor's
//               teardown is a SIGTERM, so a rank that was waiting for a hung peer leaves its
//               record (what it was waiting in, since when) even though its own collective
//               never timed out: the analyzer then sees every rank (PyTorch dumps every rank's
//               flight recorder when one rank's watchdog fires, for the same reason).
//
// Both are RAII: destroying them stops their threads. A hang fault freezes both (freeze()): the
// rank stops beating and dies on SIGTERM without a dump, as a process that stopped responding
// does.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "runtime/comm/communicator.h"

namespace parlab::launch {

// <run_dir>/rank-<r>.heartbeat, and where the flight-recorder dumps of a run go.
std::filesystem::path rank_heartbeat_path(const std::filesystem::path& run_dir, int rank);
std::filesystem::path flight_dump_dir(const std::filesystem::path& run_dir);

// Seconds between `now_seconds` (wall clock) and the heartbeat file's last touch; nullopt when
// the file does not exist yet.
std::optional<double> heartbeat_age_seconds(const std::filesystem::path& file, double now_seconds);

class HeartbeatThread {
 public:
  // Creates `file` and touches it at once, then every `interval`.
  HeartbeatThread(std::filesystem::path file, std::chrono::milliseconds interval);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;
  // Stops beating for good (the hang fault).
  void stop();

 private:
  void loop();

  std::filesystem::path file_;
  std::chrono::milliseconds interval_;
  int fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

class DumpOnTerminate {
 public:
  // Blocks SIGTERM in the calling thread, which every thread started later inherits: construct
  // it before any other thread of the process exists. `dump_dir` receives
  // flight_recorder.<group>.rank<world rank>.json per communicator.
  explicit DumpOnTerminate(std::filesystem::path dump_dir);
  ~DumpOnTerminate();
  DumpOnTerminate(const DumpOnTerminate&) = delete;
  DumpOnTerminate& operator=(const DumpOnTerminate&) = delete;

  // The communicators to dump (borrowed: call unwatch() before they are destroyed).
  void watch(std::vector<const comm::Communicator*> comms);
  void unwatch();
  // Dumps every watched communicator now (a failed rank: the groups that did not fail too).
  // Never throws; a dump that cannot be written is skipped.
  void dump_all();
  // The hang fault: SIGTERM kills the process without a dump.
  void freeze() { frozen_.store(true); }

 private:
  void loop();

  std::filesystem::path dump_dir_;
  std::mutex mu_;  // guards comms_ against unwatch() during a dump
  std::vector<const comm::Communicator*> comms_;
  std::atomic<bool> frozen_{false}, stopping_{false};
  sigset_t term_{};
  std::thread thread_;
};

}  // namespace parlab::launch
