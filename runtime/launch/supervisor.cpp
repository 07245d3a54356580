#include "runtime/launch/supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include "runtime/comm/flight_recorder.h"
#include "runtime/comm/shm/shm_segment.h"
#include "runtime/comm/store_token.h"
#include "runtime/launch/detectors.h"
#include "runtime/launch/liveness.h"
#include "base/errors.h"
#include "base/units.h"

namespace parlab::launch {
namespace {

// The last `n` lines of a (log) file, for the failure message.
std::string last_lines(const std::filesystem::path& path, int n) {
  std::ifstream in(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
    if (static_cast<int>(lines.size()) > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += "  | " + l + "\n";
  return out;
}

std::string list_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ", ") + std::to_string(r);
  return s;
}

}  // namespace

std::filesystem::path rank_records_path(const std::filesystem::path& d, int rank) {
  return d / ("rank-" + std::to_string(rank) + ".jsonl");
}
std::filesystem::path rank_log_path(const std::filesystem::path& d, int rank) {
  return d / ("rank-" + std::to_string(rank) + ".log");
}
std::filesystem::path rank_events_path(const std::filesystem::path& d, int rank) {
  return d / ("rank-" + std::to_string(rank) + ".events.jsonl");
}

std::vector<train::OpEvent> read_run_events(const std::filesystem::path& run_dir, int world) {
  std::vector<train::OpEvent> events;
  for (int r = 0; r < world; ++r) {
    std::ifstream in(rank_events_path(run_dir, r));
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_array())
        throw ConfigError(rank_events_path(run_dir, r).string(), line.substr(0, 80),
                          "expected a JSON array of events per line");
      for (const auto& e : j) events.push_back(train::op_event_from_json(e));
    }
  }
  return events;
}

std::vector<std::string> JsonlTail::read_new_lines() {
  std::vector<std::string> out;
  std::ifstream in(path_, std::ios::binary);
  if (!in) return out;
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uintmax_t>(in.tellg());
  if (size < offset_) {  // truncated (the worker re-opened it): start over
    offset_ = 0;
    partial_.clear();
  }
  if (size == offset_) return out;
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string chunk(size - offset_, '\0');
  in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
  chunk.resize(static_cast<size_t>(in.gcount()));
  offset_ += chunk.size();
  partial_ += chunk;
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
    if (nl > start) out.push_back(partial_.substr(start, nl - start));
  partial_.erase(0, start);
  return out;
}

Supervisor::Supervisor(SupervisorOptions options) : options_(std::move(options)) {
  if (options_.nproc < 1) throw ConfigError("--nproc", std::to_string(options_.nproc), "must be at least 1 worker");
  if (options_.argv.empty()) throw ConfigError("worker command", "(empty)", "needs a program");
  if (options_.run_dir.empty()) throw ConfigError("--run-dir", "(empty)", "needs a directory");
}

Supervisor::~Supervisor() {
  // ChildProcess destructors SIGKILL and reap whatever still runs.
  children_.clear();
  remove_shared_memory();
}

void Supervisor::remove_shared_memory() noexcept {
  // The workers unlink their segments once every rank mapped them; only a rank killed between
  // creating one and that moment leaves a name behind, under this launch's prefix.
  if (!shm_prefix_.empty()) comm::shm::remove_segments(shm_prefix_);
}

// The per-rank files of attempt k-1 move to run_dir/attempt-<k-1>/ (whatever its worker count
// was), so every attempt's logs stay readable after a restart.
void Supervisor::archive_previous_attempt() const {
  namespace fs = std::filesystem;
  const fs::path& dir = options_.run_dir;
  const fs::path archive = dir / ("attempt-" + std::to_string(options_.attempt - 1));
  fs::create_directories(archive);
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!e.is_regular_file() || (name.rfind("rank-", 0) != 0 && name.rfind("flight_recorder.", 0) != 0)) continue;
    fs::rename(e.path(), archive / name);
  }
  // The flight-recorder dumps of the attempt (a hang's evidence) go with it.
  if (fs::exists(flight_dump_dir(dir))) {
    fs::remove_all(flight_dump_dir(archive));
    fs::rename(flight_dump_dir(dir), flight_dump_dir(archive));
  }
}

void Supervisor::start() {
  namespace fs = std::filesystem;
  const fs::path& dir = options_.run_dir;
  fs::create_directories(dir);
  // Keys of an earlier launch in this directory would be refused by the rendezvous ("already
  // joined this attempt"); they are worthless now.
  fs::remove_all(dir / "rendezvous");
  fs::create_directories(dir / "rendezvous");
  if (options_.attempt > 0) archive_previous_attempt();
  // Dumps of an earlier launch in this directory describe another job.
  fs::remove_all(flight_dump_dir(dir));
  for (int r = 0; r < options_.nproc; ++r) {
    fs::remove(rank_records_path(dir, r));
    fs::remove(rank_events_path(dir, r));
    fs::remove(rank_log_path(dir, r));
    fs::remove(rank_heartbeat_path(dir, r));
  }
  started_seconds_ = comm::wall_clock_seconds();
  last_line_seconds_.assign(static_cast<size_t>(options_.nproc), started_seconds_);
  const std::string n = std::to_string(options_.nproc);
  // A fresh secret per launch: whatever TCP store the workers open carries it (comm/store_token.h).
  const std::string token = comm::random_store_token();
  // Shared-memory segments of this launch are named "<prefix>.*" (comm/shm/shm_segment.h), so
  // the teardown can remove what a killed worker left, and nothing of another job. The prefix
  // extends this process's own PARLAB_SHM_PREFIX (default "parlab").
  shm_prefix_ = comm::shm::segment_prefix() + "." + std::to_string(::getpid()) + "." +
                std::to_string(options_.attempt) + "." + token.substr(0, 8);
  for (int r = 0; r < options_.nproc; ++r) {
    std::map<std::string, std::string> env = options_.env;
    env["RANK"] = std::to_string(r);
    env["WORLD_SIZE"] = n;
    env["LOCAL_RANK"] = std::to_string(r);
    env["LOCAL_WORLD_SIZE"] = n;
    env["PARLAB_RENDEZVOUS_DIR"] = fs::absolute(dir / "rendezvous").string();
    env["PARLAB_RUN_DIR"] = fs::absolute(dir).string();
    env["PARLAB_SUPERVISOR_PID"] = std::to_string(::getpid());
    env["PARLAB_ATTEMPT"] = std::to_string(options_.attempt);
    env["PARLAB_STORE_TOKEN"] = token;
    env["PARLAB_SHM_PREFIX"] = shm_prefix_;
    env["OPENBLAS_NUM_THREADS"] = "1";
    env["OMP_NUM_THREADS"] = "1";
    children_.emplace_back(options_.argv, env, rank_log_path(dir, r));
    pids_.push_back(children_.back().pid());
    tails_.emplace_back(rank_records_path(dir, r));
  }
}

void Supervisor::pump_records() {
  for (size_t r = 0; r < tails_.size(); ++r) {
    JsonlTail& tail = tails_[r];
    for (const std::string& line : tail.read_new_lines()) {
      last_line_seconds_[r] = comm::wall_clock_seconds();
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        continue;  // not ours to judge; the worker's own log says more
      }
      const std::string type = j.value("type", "");
      if (type == "error") {
        const int rank = j.value("rank", -1);
        if (!errors_.count(rank))
          errors_[rank] = WorkerError{j.value("comm", false), j.value("seconds", 0.0), j.value("message", ""), j};
      }
      if (type != "step") {
        if (options_.on_message) options_.on_message(j);
        continue;
      }
      const train::StepRecord rec = train::step_record_from_json(j);
      if (options_.on_record) options_.on_record(rec);
    }
  }
}

std::vector<double> Supervisor::heartbeat_ages(double now) const {
  std::vector<double> ages;
  for (size_t r = 0; r < children_.size(); ++r)
    ages.push_back(heartbeat_age_seconds(rank_heartbeat_path(options_.run_dir, static_cast<int>(r)), now).value_or(-1));
  return ages;
}

void Supervisor::check_heartbeats(const std::vector<bool>& seen, std::vector<int>& failed, double now) {
  using Seconds = std::chrono::duration<double>;
  const double timeout = Seconds(options_.heartbeat_timeout).count();
  const double first =
      Seconds(options_.first_beat.count() > 0 ? options_.first_beat : options_.heartbeat_timeout).count();
  const std::vector<double> ages = heartbeat_ages(now);
  for (size_t r = 0; r < children_.size(); ++r) {
    const int rank = static_cast<int>(r);
    if (seen[r] || unhealthy_.count(rank)) continue;
    const bool beating = ages[r] >= 0;
    const double silence = beating ? ages[r] : now - started_seconds_;
    if (silence <= (beating ? timeout : first)) continue;
    const std::string why = (beating ? "no heartbeat for " + units::format_seconds(silence)
                                     : "no first heartbeat " + units::format_seconds(silence) + " after it started") +
                            " (heartbeat timeout " + units::format_seconds(beating ? timeout : first) +
                            "): it stopped responding";
    unhealthy_[rank] = why;
    silent_.insert(rank);
    errors_[rank] = WorkerError{false, now, why, {{"kind", "hang"}, {"detector", std::string(kHeartbeatDetector)}}};
    failed.push_back(rank);
  }
}

int Supervisor::silent_rank(const std::vector<bool>& seen, double now) const {
  if (options_.heartbeat_timeout.count() <= 0) return -1;
  const double limit = std::chrono::duration<double>(silent_after(options_.heartbeat_timeout)).count();
  const std::vector<double> ages = heartbeat_ages(now);
  int quietest = -1;
  for (size_t r = 0; r < children_.size(); ++r)
    if (!seen[r] && ages[r] > limit && (quietest < 0 || ages[r] > ages[quietest])) quietest = static_cast<int>(r);
  return quietest;
}

void Supervisor::check_health(std::vector<bool>& seen, std::vector<int>& failed) {
  const double now = comm::wall_clock_seconds();
  if (options_.heartbeat_timeout.count() > 0) check_heartbeats(seen, failed, now);
  if (!options_.unhealthy) return;
  for (size_t r = 0; r < children_.size(); ++r) {
    if (seen[r] || unhealthy_.count(static_cast<int>(r))) continue;
    const std::string why = options_.unhealthy(static_cast<int>(r), now - last_line_seconds_[r]);
    if (why.empty()) continue;
    unhealthy_[static_cast<int>(r)] = why;
    // Named like a worker's own error, not a communication one, so it wins the root cause.
    errors_[static_cast<int>(r)] = WorkerError{false, now, why, nullptr};
    failed.push_back(static_cast<int>(r));
  }
}

std::vector<int> Supervisor::teardown() {
  std::vector<int> stopped;
  for (size_t r = 0; r < children_.size(); ++r) {
    if (children_[r].poll()) continue;
    children_[r].signal(SIGTERM);
    stopped.push_back(static_cast<int>(r));
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.grace;
  for (int r : stopped) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!children_[r].wait_for(std::max(left, std::chrono::milliseconds(0))))
      children_[r].terminate(std::chrono::milliseconds(0));  // SIGKILL and reap
  }
  return stopped;
}

int Supervisor::root_cause(const std::vector<int>& failed, int silent) const {
  // A worker that lost a peer fails too, often within milliseconds of the one that died; the
  // root cause is the failure that was not a communication error, else the earliest reported
  // (torchrun's elastic agent picks the earliest error file the same way).
  int best = -1;
  auto key = [&](int r) {
    const auto it = errors_.find(r);
    const bool comm = it != errors_.end() && it->second.comm;
    const double at = it != errors_.end() ? it->second.seconds : 0.0;
    return std::make_tuple(comm ? 1 : 0, at, r);
  };
  for (int r : failed)
    if (best < 0 || key(r) < key(best)) best = r;
  // Everyone failed on communication while one rank, still running, went quiet: they waited
  // for it. (A rank that failed by itself wins over a silent one.)
  if (silent >= 0 && (best < 0 || std::get<0>(key(best)) == 1)) return silent;
  return best;
}

std::string Supervisor::failure_message(const SupervisorResult& result, int failed,
                                        const std::vector<int>& stopped) const {
  std::string msg = failed < 0 ? std::string("interrupted")
                               : "rank " + std::to_string(failed) + " " +
                                     (unhealthy_.count(failed) ? std::string("was unhealthy")
                                                               : result.exits[failed].status.describe());
  if (failed >= 0) {
    if (const auto it = errors_.find(failed); it != errors_.end()) msg += ": " + it->second.message;
  }
  std::vector<int> also;  // failed on their own, after (probably because of) the root cause
  for (const WorkerExit& e : result.exits)
    if (e.rank != failed && !e.status.ok() && !children_[e.rank].running() &&
        std::find(stopped.begin(), stopped.end(), e.rank) == stopped.end())
      also.push_back(e.rank);
  if (!also.empty())
    msg += "; " + std::string(also.size() == 1 ? "rank " : "ranks ") + list_ranks(also) + " failed too" +
           (std::all_of(also.begin(), also.end(), [&](int r) { return errors_.count(r) && errors_.at(r).comm; })
                ? " (lost a peer)"
                : "");
  if (!stopped.empty())
    msg += "; stopped " + std::string(stopped.size() == 1 ? "rank " : "ranks ") + list_ranks(stopped) +
           " (SIGTERM, then SIGKILL after " +
           units::format_seconds(std::chrono::duration<double>(options_.grace).count()) + ")";
  if (failed >= 0) {
    const std::filesystem::path log = rank_log_path(options_.run_dir, failed);
    const std::string tail = last_lines(log, 8);
    if (!tail.empty()) msg += "\nlast lines of " + log.string() + ":\n" + tail;
  }
  return msg;
}

SupervisorResult Supervisor::wait() {
  SupervisorResult result;
  const size_t n = children_.size();
  result.exits.resize(n);
  for (size_t r = 0; r < n; ++r) result.exits[r].rank = static_cast<int>(r);
  std::vector<bool> seen(n, false);
  size_t ended = 0;
  bool torn_down = false;
  // Collects the workers that exited since the last call; the abnormal ones go to `failed`.
  auto poll_exits = [&](std::vector<int>& failed) {
    for (size_t r = 0; r < n; ++r) {
      if (seen[r]) continue;
      if (auto s = children_[r].poll()) {
        seen[r] = true;
        ++ended;
        result.exits[r].status = *s;
        if (!s->ok()) failed.push_back(static_cast<int>(r));
      }
    }
  };
  while (ended < n) {
    std::vector<int> failed;
    poll_exits(failed);
    pump_records();  // after the polls: a dead worker's last lines are all there
    check_health(seen, failed);
    if (!failed.empty() && result.detected_seconds == 0) result.detected_seconds = comm::wall_clock_seconds();
    if (options_.on_tick) options_.on_tick();
    const bool stop = stop_requested_.load();
    if (!torn_down && (!failed.empty() || stop)) {
      torn_down = true;
      // Let the workers that are failing too finish failing (and write their error records).
      // Not after a health verdict alone: the others are waiting for that rank, not failing.
      const bool health_only =
          std::all_of(failed.begin(), failed.end(), [&](int r) { return unhealthy_.count(r) > 0; });
      const auto settle_until =
          std::chrono::steady_clock::now() + (health_only ? std::chrono::milliseconds(0) : options_.settle);
      while (!failed.empty() && ended < n && std::chrono::steady_clock::now() < settle_until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        poll_exits(failed);
      }
      pump_records();
      // Candidates: every rank that failed by itself, and every rank that reported an error
      // even if the teardown's signal reached it while it was exiting.
      for (const auto& [rank, err] : errors_)
        if (rank >= 0 && rank < int(n) && std::find(failed.begin(), failed.end(), rank) == failed.end())
          failed.push_back(rank);
      const double decided = comm::wall_clock_seconds();
      const std::vector<double> ages = heartbeat_ages(decided);
      const int silent = failed.empty() ? -1 : silent_rank(seen, decided);
      const int root = failed.empty() ? -1 : root_cause(failed, silent);
      if (root >= 0 && root == silent && !unhealthy_.count(root)) {
        std::vector<int> waiting;
        for (int r : failed)
          if (r != root) waiting.push_back(r);
        std::sort(waiting.begin(), waiting.end());
        waiting.erase(std::unique(waiting.begin(), waiting.end()), waiting.end());
        unhealthy_[root] = "no heartbeat for " + units::format_seconds(ages[root]) + " while " +
                           (waiting.size() == 1 ? "rank " : "ranks ") + list_ranks(waiting) +
                           " failed on communication: it stopped responding";
        silent_.insert(root);
        // The collective timeout fired; the silence names the culprit.
        errors_[root] =
            WorkerError{false,
                        decided,
                        unhealthy_[root],
                        {{"kind", "hang"}, {"detector", std::string(kCollectiveTimeoutDetector)}, {"silent", true}}};
      }
      result.failed_rank = root;
      result.interrupted = root < 0;
      if (result.detected_seconds == 0) result.detected_seconds = decided;
      const std::vector<int> stopped = teardown();
      for (int r : stopped) result.exits[r].stopped = true;
      for (const auto& [r, why] : unhealthy_) result.exits[r].unhealthy = why;
      for (size_t r = 0; r < n; ++r) {
        result.exits[r].heartbeat_age_seconds = ages[r];
        result.exits[r].silent = silent_.count(static_cast<int>(r)) > 0;
      }
      for (size_t r = 0; r < n; ++r) {  // everyone has ended now
        if (seen[r]) continue;
        result.exits[r].status = *children_[r].poll();
        seen[r] = true;
        ++ended;
      }
      pump_records();
      for (const auto& [r, err] : errors_)
        if (r >= 0 && r < int(n)) result.exits[r].error = err.record;
      result.stopped_seconds = comm::wall_clock_seconds();
      result.message = failure_message(result, root, stopped);
      continue;
    }
    if (ended < n) std::this_thread::sleep_for(options_.poll);
  }
  remove_shared_memory();  // every worker has ended
  result.started_seconds = started_seconds_;
  result.ok = !torn_down;
  for (const WorkerExit& e : result.exits) result.ok = result.ok && e.status.ok();
  return result;
}

}  // namespace parlab::launch
