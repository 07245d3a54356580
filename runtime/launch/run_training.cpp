#include "runtime/launch/run_training.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <set>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/comm/flight_recorder.h"
#include "runtime/launch/faults.h"
#include "runtime/launch/incidents.h"
#include "runtime/launch/protocol.h"
#include "runtime/launch/restart_policy.h"
#include "runtime/launch/supervisor.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "base/units.h"

namespace parlab::launch {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using units::format_seconds;

double now() { return comm::wall_clock_seconds(); }

// What the workers of one attempt reported, beyond their step records.
struct AttemptLog {
  int attempt = 0;
  int world = 0;
  double spawned_seconds = 0;
  std::map<int, double> started, resumed, first_step_end;  // rank -> wall clock
  std::optional<int64_t> resume_step;
  std::string resume_summary;
  bool resumed_from_checkpoint = false;
  std::optional<protocol::Fault> fault;  // the first fault line of a failing worker
  bool fatal = false;                    // a worker failed on a configuration error
  std::optional<train::StateFingerprint> final_state;
  std::unique_ptr<StragglerWatch> stragglers;
  std::map<std::string, std::string> comms;  // group -> backend, from the ranks' "started" lines
};

// "Comm     world shm, p2p.0>1 shm" once every rank said what its groups use.
std::string comms_line(const std::map<std::string, std::string>& comms) {
  std::string line;
  for (const auto& [group, backend] : comms) line += (line.empty() ? "" : ", ") + group + " " + backend;
  return "groups   " + line;
}

// Faults whose failure the detectors must find by themselves (the fault line only times them).
bool is_hang_fault(FaultKind kind) {
  return kind == FaultKind::kSkipAllReduce || kind == FaultKind::kHang || kind == FaultKind::kSkipSend;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::optional<double> span(double from, double to) {
  if (from <= 0 || to <= 0) return std::nullopt;
  return std::max(0.0, to - from);
}

double max_of(const std::map<int, double>& m) {
  double x = 0;
  for (const auto& [r, v] : m) x = std::max(x, v);
  return x;
}

// One job, all its attempts.
class JobRunner {
 public:
  JobRunner(const TrainJobSpec& spec, const TrainCallbacks& cb) : spec_(spec), cb_(cb) {}
  TrainOutcome run();

 private:
  void prepare();
  SupervisorResult run_attempt(AttemptLog& log, RunProgress& progress);
  void on_message(AttemptLog& log, const json& j);
  // One handler per message type (protocol.h); the step records come through on_record.
  void handle(AttemptLog& log, const protocol::Started& m);
  void handle(AttemptLog& log, const protocol::Resume& m);
  void handle(AttemptLog& log, const protocol::Checkpoint& m);
  void handle(AttemptLog& log, const protocol::Fault& m);
  void handle(AttemptLog& log, const protocol::Final& m);
  void handle(AttemptLog& log, const protocol::Memory& m);
  void handle(AttemptLog& log, const protocol::Export& m);
  void handle(AttemptLog& log, const protocol::Error& m);
  void handle(AttemptLog&, const train::StepRecord&) {}
  void on_record(AttemptLog& log, RunProgress& progress, const train::StepRecord& r);
  IncidentReport incident_of(const SupervisorResult& result, const AttemptLog& log, int64_t completed) const;
  void finish_pending_incident(const AttemptLog& next, bool first_step_done);
  void report_incident(const IncidentReport& incident);
  void report_stragglers(const AttemptLog& log);
  int choose_world(int capacity, std::string& why_not) const;
  // The --max-same-failure rule: empty, or the fallback it names (restart_policy.h decides).
  std::optional<Fallback> check_repeats(const IncidentReport& incident);
  // The world of the next attempt (a degradation, or a restart without the lost device); when
  // none fits, the decision becomes giving up.
  int degrade(Fallback plan, const IncidentReport& incident, int world, RestartDecision& decision);
  int restart_world(const IncidentReport& incident, RestartDecision& decision);
  // The decision for a failed attempt, with the next world (0 when giving up).
  RestartDecision decide_after(const IncidentReport& incident, const AttemptLog& log, int world, int restarts,
                               int& next_world);
  void give_up(const IncidentReport& incident, const SupervisorResult& result, const AttemptLog& log,
               const RestartDecision& decision);
  // Says and records what the fallback does; `why_not`: why a degradation could not be applied.
  void announce_fallback(const std::string& why_not);
  void use_devices(int world);
  void note(const std::string& line) const {
    if (cb_.on_note) cb_.on_note(line);
  }
  std::string last_good_text(bool rerun_resumes);
  void announce_checkpoints(int64_t steps_done);
  void finish_run();

  const TrainJobSpec& spec_;
  const TrainCallbacks& cb_;
  TrainJob job_;  // pinned
  std::vector<std::string> argv_;
  TrainOutcome out_;
  std::map<int64_t, StepSummary> steps_;
  std::optional<IncidentReport> pending_;  // failed, restart not yet timed
  std::set<std::string> reported_skips_;
  std::vector<CheckpointReport> announce_;  // committed, not yet shown (announce_checkpoints)
  int64_t steps_done_ = 0;                  // steps every rank of the current attempt reported
  double stopped_seconds_ = 0;              // the last teardown's end
  // Devices (first-attempt ranks) still available; an attempt of world w runs on the first w.
  std::vector<int> devices_;
  std::vector<std::string> faults_;  // --fault texts in first-attempt ranks
  FailureHistory history_;
  bool degraded_ = false;                  // a fallback was applied: the next repeat stops the job
  std::optional<int64_t> last_good_step_;  // set by last_good_text()
};

TrainJob pinned(const TrainJob& job, int world) {
  TrainJob j = pin_global_batch(job, world);
  j.data_size = make_train_config(j, world).data_size;
  return j;
}

void JobRunner::prepare() {
  const int n = spec_.nproc;
  if (n < 1) throw ConfigError("--nproc", std::to_string(n), "must be at least 1 worker");
  const int min = spec_.min_nproc > 0 ? spec_.min_nproc : n;
  if (min > n)
    throw ConfigError("--min-nproc", std::to_string(min), "must be at most --nproc (" + std::to_string(n) + ")");
  if (spec_.max_restarts < 0) throw ConfigError("--max-restarts", std::to_string(spec_.max_restarts), "must be >= 0");
  job_ = pinned(spec_.job, n);
  const train::TrainConfig config = make_train_config(job_, n);
  train::check_runtime_supports(config.model, config.plan);
  check_faults(parse_faults(job_.faults), n, job_.steps, job_.checkpoint_every);
  if (spec_.max_same_failure < 0)
    throw ConfigError("--max-same-failure", std::to_string(spec_.max_same_failure), "must be >= 0");
  if (spec_.fallback == Fallback::kSurvivors && min >= n)
    throw ConfigError("--fallback", "survivors",
                      "continues with fewer workers: set --min-nproc below --nproc (" + std::to_string(n) + ")");
  faults_ = job_.faults;
  devices_.resize(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) devices_[static_cast<size_t>(r)] = r;
  if (spec_.fresh) fs::remove_all(checkpoint_root(job_.run_dir));
  fs::create_directories(job_.run_dir);
  fs::remove(final_state_path(job_.run_dir));
  const fs::path job_file = job_.run_dir / "job.json";
  write_train_job(job_file, job_);
  argv_ = spec_.worker_command;
  if (argv_.empty()) argv_ = worker_command_for(self_executable());
  argv_.push_back("--job=" + fs::absolute(job_file).string());
}

int JobRunner::choose_world(int capacity, std::string& why_not) const {
  const int min = spec_.min_nproc > 0 ? spec_.min_nproc : spec_.nproc;
  for (int w = std::min(capacity, spec_.nproc); w >= min; --w) {
    try {
      const train::TrainConfig c = make_train_config(job_, w);
      train::check_runtime_supports(c.model, c.plan);
      return w;
    } catch (const Error& e) {
      why_not += (why_not.empty() ? "" : "; ") + std::to_string(w) + " workers: " + e.what();
    }
  }
  return 0;
}

void JobRunner::on_message(AttemptLog& log, const json& j) {
  std::visit([&](const auto& m) { handle(log, m); }, protocol::decode(j));
}

void JobRunner::handle(AttemptLog& log, const protocol::Started& m) {
  log.started[m.from.rank] = m.from.seconds;
  for (const auto& [group, backend] : m.comms) log.comms[group] = backend;
  if (static_cast<int>(log.started.size()) == log.world && !log.comms.empty()) note(comms_line(log.comms));
}

void JobRunner::handle(AttemptLog& log, const protocol::Resume& m) {
  log.resumed[m.from.rank] = m.from.seconds;
  if (m.from.rank != 0) return;
  log.resume_step = m.step;
  log.resumed_from_checkpoint = m.resumed;
  log.resume_summary = m.summary;
  if (log.resumed_from_checkpoint) note(log.resume_summary);
  if (log.resumed_from_checkpoint && cb_.recorder) cb_.recorder->checkpoint_verified(*log.resume_step, m.path, true);
  for (const protocol::SkippedCheckpoint& k : m.skipped) {
    const std::string key = k.path + ": " + k.reason;
    if (!reported_skips_.insert(key).second) continue;
    if (!log.resumed_from_checkpoint) note("skipped checkpoint " + key);
    // A save torn by the crash being recovered from is expected, not corruption.
    const bool torn = k.reason.rfind("incomplete", 0) == 0;
    if (cb_.recorder && !torn) cb_.recorder->checkpoint_skipped(k.step, k.path, k.reason);
  }
}

void JobRunner::handle(AttemptLog& log, const protocol::Checkpoint& m) {
  CheckpointReport c;
  c.attempt = log.attempt;
  c.step = m.step;
  c.path = m.path;
  c.bytes = m.bytes;
  c.checksum = m.checksum;
  c.save_seconds = m.save_seconds;
  c.timings = protocol::to_json(m.timings);
  out_.checkpoints.push_back(c);
  if (cb_.recorder) cb_.recorder->add_checkpoint(c);
  announce_.push_back(c);
  announce_checkpoints(steps_done_);
}

void JobRunner::handle(AttemptLog& log, const protocol::Fault& m) {
  if (m.kind == FaultKind::kCorruptCheckpoint) {
    note("injected fault " + m.spec + ": flipped a byte of " + m.file.value_or(""));
  } else if (m.kind == FaultKind::kSlow) {
    note("injected fault " + m.spec + ": rank " + std::to_string(m.from.rank) + " computes slower from step " +
         std::to_string(m.step));
  } else if (!log.fault) {
    log.fault = m;
  }
}

void JobRunner::handle(AttemptLog& log, const protocol::Final& m) { log.final_state = m.state; }

void JobRunner::handle(AttemptLog&, const protocol::Memory& m) {
  std::erase_if(out_.memory, [&](const train::MemoryReport& x) { return x.rank == m.report.rank; });
  out_.memory.push_back(m.report);
  std::sort(out_.memory.begin(), out_.memory.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
}

void JobRunner::handle(AttemptLog&, const protocol::Export& m) {
  out_.exported = std::filesystem::path(m.path);
  out_.exported_bytes = m.bytes;
}

void JobRunner::handle(AttemptLog& log, const protocol::Error& m) { log.fatal = log.fatal || m.fatal; }

void JobRunner::on_record(AttemptLog& log, RunProgress& progress, const train::StepRecord& r) {
  if (cb_.on_record) cb_.on_record(r);
  if (cb_.recorder) cb_.recorder->add_step(r);
  log.stragglers->add(r);
  if (!log.first_step_end.count(r.rank)) {
    log.first_step_end[r.rank] = r.end_seconds;
    if (static_cast<int>(log.first_step_end.size()) == log.world) finish_pending_incident(log, true);
  }
  if (const auto s = progress.add(r)) {
    steps_[s->step] = *s;
    if (cb_.on_step) cb_.on_step(*s, job_.steps);
    steps_done_ = s->step + 1;
    announce_checkpoints(steps_done_);
    for (const std::string& sentence : log.stragglers->on_step(progress.completed_steps(), s->step))
      note("straggler: " + sentence);
  }
}

// Rank 0's checkpoint line can be read before the other ranks' records of the steps it follows;
// people see it once every rank has reported those steps.
void JobRunner::announce_checkpoints(int64_t steps_done) {
  while (!announce_.empty() && announce_.front().step <= steps_done) {
    if (cb_.on_checkpoint) cb_.on_checkpoint(announce_.front());
    announce_.erase(announce_.begin());
  }
}

SupervisorResult JobRunner::run_attempt(AttemptLog& log, RunProgress& progress) {
  SupervisorOptions so;
  so.argv = argv_;
  so.nproc = log.world;
  so.run_dir = job_.run_dir;
  so.grace = spec_.grace;
  so.poll = spec_.poll;
  so.attempt = log.attempt;
  so.unhealthy = spec_.unhealthy;
  so.heartbeat_timeout = job_.heartbeat_timeout;
  so.first_beat = first_beat_allowance(job_.heartbeat_timeout, job_.comm_timeout);
  Supervisor* running = nullptr;
  so.on_record = [&](const train::StepRecord& r) { on_record(log, progress, r); };
  so.on_message = [&](const json& j) { on_message(log, j); };
  so.on_tick = [&] {
    if (cb_.stop && cb_.stop->load() && running) running->request_stop();
    if (cb_.on_tick) cb_.on_tick();
  };
  Supervisor sup(so);
  running = &sup;
  log.spawned_seconds = now();
  sup.start();
  SupervisorResult result = sup.wait();
  if (cb_.recorder) cb_.recorder->flush();
  return result;
}

IncidentReport JobRunner::incident_of(const SupervisorResult& result, const AttemptLog& log, int64_t completed) const {
  IncidentReport i;
  i.attempt = log.attempt;
  i.rank = result.failed_rank;
  if (i.rank >= 0) i.status = result.exits[i.rank].status;
  i.message = first_line(result.message);
  i.detected_seconds = result.detected_seconds;
  i.failed_at_step = completed;
  i.kind = IncidentKind::kCrash;
  if (i.rank >= 0 && !result.exits[i.rank].unhealthy.empty()) i.kind = IncidentKind::kUnhealthy;
  if (is_hang(result)) classify_hang(i, result, job_.run_dir, job_);
  if (log.fault && is_hang_fault(log.fault->kind)) {
    i.fault = log.fault->spec;
    i.failed_at_step = log.fault->step;
    i.fault_seconds = log.fault->from.seconds;
  } else if (log.fault) {
    const protocol::Fault& f = *log.fault;
    if (f.from.rank >= 0) i.rank = f.from.rank;
    if (i.rank >= 0 && i.rank < static_cast<int>(result.exits.size())) i.status = result.exits[i.rank].status;
    i.fault = f.spec;
    i.kind = f.lost ? IncidentKind::kLost : IncidentKind::kKilled;
    i.failed_at_step = f.step;
    i.fault_seconds = f.from.seconds;
    // Killed inside the save of step S: S steps were done, the save of them may not be.
    if (i.fault.find("kill-during-checkpoint") == 0) i.phase = checkpoint::save_phase_name(parse_fault(i.fault).phase);
  }
  i.latency.detection_seconds = span(i.fault_seconds, i.detected_seconds);
  i.latency.teardown_seconds = span(i.detected_seconds, result.stopped_seconds);
  return i;
}

// The restart's timings are known once every new rank completed a step (or the attempt ended).
void JobRunner::finish_pending_incident(const AttemptLog& next, bool first_step_done) {
  if (!pending_) return;
  IncidentReport& i = *pending_;
  i.new_world = next.world;
  i.resumed_step = next.resume_step;
  i.resume_summary = next.resume_summary;
  if (next.resume_step) i.steps_lost = std::max<int64_t>(0, i.failed_at_step - *next.resume_step);
  const double started = static_cast<int>(next.started.size()) == next.world ? max_of(next.started) : 0;
  const double resumed = static_cast<int>(next.resumed.size()) == next.world ? max_of(next.resumed) : 0;
  const double first = first_step_done ? max_of(next.first_step_end) : 0;
  i.latency.restart_seconds = span(stopped_seconds_, started);
  i.latency.state_load_seconds = span(started, resumed);
  i.latency.first_step_seconds = span(resumed, first);
  i.latency.total_seconds = span(i.fault_seconds > 0 ? i.fault_seconds : i.detected_seconds, first);
  report_incident(i);
  pending_.reset();
}

void JobRunner::report_incident(const IncidentReport& i) {
  out_.incidents.push_back(i);
  if (cb_.recorder) cb_.recorder->add_incident(i);
  if (cb_.on_incident) cb_.on_incident(i);
}

// Stragglers are judged over the whole attempt once it ended (a slow rank is not a failure).
void JobRunner::report_stragglers(const AttemptLog& log) {
  for (const IncidentReport& i : log.stragglers->incidents(log.attempt)) report_incident(i);
}

void JobRunner::use_devices(int world) {
  // Faults follow their devices; the job file is rewritten only when the mapping changed.
  const std::vector<int> used(devices_.begin(), devices_.begin() + world);
  const std::vector<std::string> faults = renumber_faults(faults_, used);
  if (faults == job_.faults) return;
  job_.faults = faults;
  write_train_job(job_.run_dir / "job.json", job_);
}

std::optional<Fallback> JobRunner::check_repeats(const IncidentReport& incident) {
  if (incident.rank < 0 || incident.rank >= static_cast<int>(devices_.size())) return std::nullopt;
  const int device = devices_[static_cast<size_t>(incident.rank)];
  const std::string kind(to_string(incident.kind));
  const int times = history_.add(kind, device);
  if (times <= spec_.max_same_failure) return std::nullopt;
  const std::string reason = kind + " of rank " + std::to_string(incident.rank) + " happened " + std::to_string(times) +
                             " times (more than --max-same-failure " + std::to_string(spec_.max_same_failure) + ")";
  const Fallback plan = degraded_ ? Fallback::kStop : spec_.fallback;
  FallbackReport f;
  f.plan = plan;
  f.reason =
      degraded_ ? reason + ", again after the fallback " + std::string(fallback_plan(spec_.fallback).flag) : reason;
  f.culprit_rank = incident.rank;
  out_.fallback = f;
  return plan;
}

void JobRunner::announce_fallback(const std::string& why_not) {
  FallbackReport& f = *out_.fallback;
  const FallbackPlan& p = fallback_plan(f.plan);
  std::string m = f.reason + ": ";
  if (f.world_after > 0) {
    m += "degrading to the named plan '" + std::string(p.name) + "' (--fallback " + std::string(p.flag) + "): ";
    m += f.plan == Fallback::kSingle
             ? "one worker continues from the last good checkpoint"
             : "rank " + std::to_string(f.culprit_rank) + " is dropped and " + std::to_string(f.world_after) +
                   " worker(s) continue from the last good checkpoint";
  } else {
    m += (why_not.empty() ? "" : why_not + "; ") + std::string("stopping");
    if (f.plan == Fallback::kStop) m += " (--fallback stop)";
    m += out_.last_good_checkpoint
             ? " at the last known-good checkpoint " + out_.last_good_checkpoint->string() + " (step " +
                   std::to_string(last_good_step_.value_or(0)) + "); run the same command again to resume from it"
             : " with no good checkpoint to resume from (--checkpoint-every 0?)";
  }
  f.message = m;
  note("fallback: " + m);
  if (cb_.recorder) cb_.recorder->add_fallback(f);
}

// Applies a survivors or single fallback; returns the next world (0: cannot, the decision says why).
int JobRunner::degrade(Fallback plan, const IncidentReport& incident, int world, RestartDecision& decision) {
  devices_.erase(devices_.begin() + incident.rank);  // the culprit's device is not used again
  int next = 0;
  std::string why_not;
  if (plan == Fallback::kSingle) {
    try {
      const train::TrainConfig c = make_train_config(job_, 1);
      train::check_runtime_supports(c.model, c.plan);
      next = devices_.empty() ? 0 : 1;
    } catch (const Error& e) {
      why_not = e.what();
    }
  } else {
    next = choose_world(static_cast<int>(devices_.size()), why_not);
  }
  if (next == 0)
    decision.give_up(GiveUpReason::kNoWorld, "cannot apply --fallback " + std::string(fallback_plan(plan).flag) +
                                                 (why_not.empty() ? "" : ": " + why_not));
  FallbackReport& f = *out_.fallback;
  f.world_before = world;
  f.world_after = next;
  degraded_ = true;
  return next;
}

std::string JobRunner::last_good_text(bool rerun_resumes) {
  checkpoint::LoadOptions lo(checkpoint_root(job_.run_dir));
  lo.record_last_known_good = false;  // only looking
  const checkpoint::LoadResult r = checkpoint::load_checkpoint(lo);
  if (!r.checkpoint)
    return "there is no good checkpoint in " + checkpoint_root(job_.run_dir).string() +
           (job_.checkpoint_every > 0 ? "" : " (checkpointing is off: --checkpoint-every 0)");
  out_.last_good_checkpoint = r.checkpoint->path();
  last_good_step_ = r.checkpoint->step();
  return "the last good checkpoint is " + r.checkpoint->path().string() + " (step " +
         std::to_string(r.checkpoint->step()) + ")" +
         (rerun_resumes ? "; run the same command again to resume from it" : "");
}

void JobRunner::finish_run() {
  out_.steps.clear();
  for (const auto& [s, summary] : steps_) out_.steps.push_back(summary);
  if (out_.ok && !out_.checkpoints.empty()) {
    // Read the newest checkpoint back in full: the run's result is only as good as it.
    CheckpointReport& last = out_.checkpoints.back();
    const std::vector<std::string> problems = checkpoint::verify_checkpoint(last.path);
    last.verified = problems.empty();
    if (cb_.recorder) cb_.recorder->checkpoint_verified(last.step, last.path.string(), last.verified);
    if (last.verified)
      out_.last_good_checkpoint = last.path;
    else
      note("the final checkpoint " + last.path.string() + " does not verify: " + problems.front());
  }
  double save = 0, step = 0;
  int saves = 0;
  for (const CheckpointReport& c : out_.checkpoints) save += c.save_seconds, ++saves;
  for (const StepSummary& s : out_.steps) step += s.step_seconds;
  if (saves > 0 && spec_.mtbf_hours > 0) {
    YoungDaly y;
    y.checkpoint_seconds = save / saves;
    y.mtbf_seconds = spec_.mtbf_hours * 3600.0 / std::max(1, out_.final_world);
    if (y.checkpoint_seconds > 0) {
      y.interval_seconds = checkpoint::young_daly_interval_seconds(y.checkpoint_seconds, y.mtbf_seconds);
      const double mean_step = out_.steps.empty() ? 0 : step / static_cast<double>(out_.steps.size());
      y.interval_steps = mean_step > 0 ? y.interval_seconds / mean_step : 0;
      out_.young_daly = y;
    }
  }
  if (cb_.recorder) cb_.recorder->finish(out_);
}

int JobRunner::restart_world(const IncidentReport& incident, RestartDecision& decision) {
  if (incident.kind == IncidentKind::kLost && incident.rank >= 0 && incident.rank < static_cast<int>(devices_.size()))
    devices_.erase(devices_.begin() + incident.rank);
  std::string why_not;
  const int next = choose_world(static_cast<int>(devices_.size()), why_not);
  if (next == 0)
    decision.give_up(GiveUpReason::kNoWorld, "cannot continue: " + std::to_string(devices_.size()) +
                                                 " worker(s) left, --min-nproc " +
                                                 std::to_string(spec_.min_nproc > 0 ? spec_.min_nproc : spec_.nproc) +
                                                 (why_not.empty() ? "" : " (" + why_not + ")"));
  return next;
}

RestartDecision JobRunner::decide_after(const IncidentReport& incident, const AttemptLog& log, int world, int restarts,
                                        int& next_world) {
  // The repeat rule counts only failures a restart could fix.
  const std::optional<Fallback> repeat = log.fatal ? std::nullopt : check_repeats(incident);
  RestartDecision d =
      decide_restart({.fatal = log.fatal, .repeat = repeat, .restarts = restarts, .max_restarts = spec_.max_restarts});
  if (d.action == RestartAction::kDegrade)
    next_world = degrade(*d.fallback, incident, world, d);
  else if (d.action == RestartAction::kRestart)
    next_world = restart_world(incident, d);
  return d;
}

void JobRunner::give_up(const IncidentReport& incident, const SupervisorResult& result, const AttemptLog& log,
                        const RestartDecision& d) {
  report_incident(incident);
  const std::string last_good = last_good_text(!log.fatal);
  std::string why = d.why;
  if (out_.fallback && out_.fallback->world_after == 0) {
    announce_fallback(d.fallback == Fallback::kStop ? "" : d.why);
    why = "fallback: " + out_.fallback->message;
  }
  out_.message = why + "; last incident: " + incident.describe() + "\n" + result.message + "\n" + last_good;
}

TrainOutcome JobRunner::run() {
  prepare();
  const double t0 = now();
  int world = spec_.nproc, restarts = 0;
  for (int attempt = 0;; ++attempt) {
    AttemptLog log;
    log.attempt = attempt;
    log.world = world;
    RunProgress progress(world, job_.steps);
    steps_done_ = 0;
    out_.attempts = attempt + 1;
    out_.final_world = world;
    log.stragglers = std::make_unique<StragglerWatch>(spec_.straggler);
    const SupervisorResult result = run_attempt(log, progress);
    announce_checkpoints(INT64_MAX);
    report_stragglers(log);
    finish_pending_incident(log, false);  // the restart never completed a step
    if (attempt == 0) {
      out_.start_step = log.resume_step.value_or(0);
      if (log.resumed_from_checkpoint) out_.resume_summary = log.resume_summary;
    }
    out_.rank_table = progress.rank_table();
    if (log.final_state) out_.final_state = log.final_state;
    const int64_t completed = std::max<int64_t>(
        log.resume_step.value_or(0), progress.completed().empty() ? 0 : progress.completed().back().step + 1);
    out_.steps_completed = std::max(out_.steps_completed, completed);
    if (result.ok) {
      out_.ok = true;
      out_.steps_completed = job_.steps;
      break;
    }
    if (result.interrupted || (cb_.stop && cb_.stop->load())) {
      out_.interrupted = true;
      out_.message = result.message + "\n" + last_good_text(true);
      break;
    }
    IncidentReport incident = incident_of(result, log, completed);
    stopped_seconds_ = result.stopped_seconds;
    if (incident.kind == IncidentKind::kHang && !incident.analysis.empty()) note("hang: " + incident.analysis);
    int next_world = 0;
    const RestartDecision decision = decide_after(incident, log, world, restarts, next_world);
    if (decision.action == RestartAction::kGiveUp) {
      give_up(incident, result, log, decision);
      break;
    }
    incident.restarted = true;
    ++restarts;
    note("incident: " + incident.what() + "; restarting with " + std::to_string(next_world) + " worker(s) (restart " +
         std::to_string(restarts) + " of " + std::to_string(spec_.max_restarts) + ")");
    if (decision.action == RestartAction::kDegrade) announce_fallback("");
    pending_ = incident;
    world = next_world;
    use_devices(world);
  }
  out_.wall_seconds = now() - t0;
  finish_run();
  return std::move(out_);
}

}  // namespace

TrainJob pinned_job(const TrainJob& job, int world) { return pinned(job, world); }

TrainOutcome run_training(const TrainJobSpec& spec, const TrainCallbacks& callbacks) {
  JobRunner runner(spec, callbacks);
  return runner.run();
}

}  // namespace parlab::launch
