#include "runtime/launch/incidents.h"

#include <algorithm>

#include "runtime/diagnose/hang_analysis.h"
#include "runtime/launch/detectors.h"
#include "base/errors.h"
#include "base/units.h"

namespace parlab::launch {
namespace {

double seconds_of(std::chrono::milliseconds d) { return std::chrono::duration<double>(d).count(); }

// "all-reduce #10 (s5/grad.bucket0, 12.6 MB, group world)"
std::string collective_of(const diagnose::HangFinding& f) {
  return f.op + " #" + std::to_string(f.seq) + " (" + f.tag + ", " + units::format_bytes(f.bytes) + ", group " +
         f.group + ")";
}

std::string opt_seconds(const std::optional<double>& s) { return s ? units::format_seconds(*s) : std::string("?"); }

}  // namespace

bool is_hang(const SupervisorResult& result) {
  for (const WorkerExit& e : result.exits)
    if (e.silent || (e.error.is_object() && e.error.value("kind", "") == "hang")) return true;
  return false;
}

void classify_hang(IncidentReport& i, const SupervisorResult& r, const std::filesystem::path& run_dir,
                   const TrainJob& job) {
  i.kind = IncidentKind::kHang;
  int silent = -1;
  for (const WorkerExit& e : r.exits)
    if (e.silent && silent < 0) silent = e.rank;
  if (r.failed_rank >= 0 && r.exits[r.failed_rank].silent) silent = r.failed_rank;

  diagnose::HangAnalysis a;
  try {
    a = diagnose::analyze_run_dir(run_dir);
  } catch (const Error&) {
    // No dumps (every rank died before it could write one): the other detectors still name it.
  }
  const diagnose::HangFinding* finding = a.found ? &a.findings.front() : nullptr;
  if (finding) {
    i.analysis = finding->sentence;
    i.collective = collective_of(*finding);
  }
  i.message.clear();  // the hang's own account replaces the supervisor's first line
  if (silent >= 0) {
    // Failed by its heartbeat timeout, or named for its silence after the others' collectives
    // timed out (the supervisor's error record says which detector fired).
    const WorkerExit& e = r.exits[silent];
    const bool heartbeat =
        !e.error.is_object() || e.error.value("detector", std::string(kHeartbeatDetector)) == kHeartbeatDetector;
    i.rank = silent;
    i.detector = heartbeat ? kHeartbeatDetector : kCollectiveTimeoutDetector;
    i.detector_timeout_seconds = seconds_of(heartbeat ? job.heartbeat_timeout : job.comm_timeout);
    i.message = e.unhealthy;
  } else {
    i.detector = kCollectiveTimeoutDetector;
    i.detector_timeout_seconds = seconds_of(job.comm_timeout);
    if (finding && !finding->culprits.empty())
      i.rank = finding->culprits.front().rank;
    else
      i.rank = r.failed_rank;
  }
  // Without a finding, what the ranks' own errors say they were waiting in.
  for (const WorkerExit& e : r.exits) {
    if (!i.collective.empty()) break;
    if (e.error.is_object() && e.error.contains("collective")) i.collective = e.error.value("collective", "");
  }
  if (i.rank >= 0 && i.rank < static_cast<int>(r.exits.size())) i.status = r.exits[i.rank].status;
}

// ---- stragglers ----

void StragglerWatch::add(const train::StepRecord& r) {
  const train::StepTimes& t = r.times;
  timings_.push_back({r.step, r.rank, t.forward_seconds + t.backward_seconds + t.optimizer_seconds, t.step_seconds});
}

std::vector<std::string> StragglerWatch::on_step(int64_t completed, int64_t step) {
  const int window = options_.window;
  if (window <= 0 || completed <= 0 || completed % window != 0) return {};
  // The persistence rule (straggler.h) over the latest windows.
  const int64_t span = std::min<int64_t>(completed, int64_t{kStragglerRecentWindows} * window);
  std::vector<diagnose::RankTiming> last;
  for (const diagnose::RankTiming& t : timings_)
    if (t.step > step - span && t.step <= step) last.push_back(t);
  std::vector<std::string> out;
  for (const diagnose::Straggler& s : diagnose::detect_stragglers(last, options_).stragglers)
    if (flagged_at_.emplace(s.rank, step).second) out.push_back(s.sentence);
  return out;
}

std::vector<IncidentReport> StragglerWatch::incidents(int attempt) const {
  std::set<int64_t> steps;
  for (const diagnose::RankTiming& t : timings_) steps.insert(t.step);
  if (options_.window <= 0 || static_cast<int64_t>(steps.size()) < options_.window) return {};
  std::vector<IncidentReport> out;
  for (const diagnose::Straggler& s : diagnose::detect_stragglers(timings_, options_).stragglers) {
    IncidentReport i;
    i.attempt = attempt;
    i.rank = s.rank;
    i.kind = IncidentKind::kStraggler;
    i.detector = kStragglerDetector;
    i.analysis = s.sentence;
    i.message = s.sentence;
    const auto it = flagged_at_.find(s.rank);
    i.failed_at_step = it != flagged_at_.end() ? it->second : *steps.rbegin();
    out.push_back(std::move(i));
  }
  return out;
}

// The incident as one sentence (what()) and with its recovery (describe()).
std::string IncidentReport::what() const {
  if (kind == IncidentKind::kStraggler) return analysis;
  if (kind == IncidentKind::kHang) {
    const bool heartbeat = detector == kHeartbeatDetector;
    std::string s = "hang of rank " + std::to_string(rank) + " at step " + std::to_string(failed_at_step) +
                    ", detected by the " + (heartbeat ? "heartbeat" : "collective timeout") + " (" +
                    units::format_seconds(detector_timeout_seconds) + ")";
    if (!message.empty()) s += ": " + message;  // a silent rank's account
    if (!analysis.empty())
      s += (message.empty() ? ": " : "; ") + analysis;
    else if (message.empty() && !collective.empty())
      s += ": ranks waited in " + collective;
    if (!fault.empty()) s += " (injected: " + fault + ")";
    return s;
  }
  std::string s = rank >= 0 ? "rank " + std::to_string(rank) + " " + status.describe() : message;
  if (kind == IncidentKind::kLost) s += " and its device is lost";
  if (kind == IncidentKind::kUnhealthy) s = message;
  s += " at step " + std::to_string(failed_at_step);
  if (!fault.empty()) s += " (injected: " + fault + ")";
  return s;
}

std::string IncidentReport::describe() const {
  std::string s = what();
  if (resumed_step) {
    s += "; resumed from step " + std::to_string(*resumed_step) + " with " + std::to_string(new_world) + " worker(s)";
    if (steps_lost) s += ", " + std::to_string(*steps_lost) + " step(s) lost";
  }
  const RestartLatency& l = latency;
  if (l.total_seconds)
    s += "; restart latency " + opt_seconds(l.total_seconds) + " = detection " + opt_seconds(l.detection_seconds) +
         " + teardown " + opt_seconds(l.teardown_seconds) + " + restart " + opt_seconds(l.restart_seconds) +
         " + state load " + opt_seconds(l.state_load_seconds) + " + first step " + opt_seconds(l.first_step_seconds);
  if (!l.total_seconds && l.detection_seconds) s += "; detected after " + opt_seconds(l.detection_seconds);
  if (!l.total_seconds && l.teardown_seconds)
    s += "; workers stopped " + opt_seconds(l.teardown_seconds) + " after detection";
  return s;
}

}  // namespace parlab::launch
