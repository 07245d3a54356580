#include "runtime/launch/detectors.h"

#include <algorithm>
#include <cstdio>

#include "base/errors.h"
#include "base/text_table.h"

namespace parlab::launch {
namespace {

using std::chrono::milliseconds;

std::string fixed(double x, const char* format) {
  char b[32];
  std::snprintf(b, sizeof b, format, x);
  return b;
}

std::string fallback_list() {
  std::string s;
  for (const FallbackPlan& p : fallback_plans()) s += (s.empty() ? "" : ", ") + std::string(p.flag);
  return s;
}

// The sentence every hang detector shares: what the job does after the restart budget for the
// same failure is spent.
std::string stop_rule(const DetectorSettings& s) {
  return "The same failure (same kind, same culprit device) more than --max-same-failure " +
         std::to_string(s.max_same_failure) + " times: restarting again would loop, so the job degrades to the " +
         "fallback plan, once; a failure after that, or any failure with no restart left (--max-restarts), "
         "stops the job with a message naming the last good checkpoint.";
}

std::string fallback_rule(const DetectorSettings& s) {
  const FallbackPlan& p = fallback_plan(s.fallback);
  return "--fallback " + std::string(p.flag) + (s.fallback == kDefaultFallback ? " (default)" : "") + ": " +
         std::string(p.name) + ". Plans: " + fallback_list() +
         " (see Fallback plans). The fallback is announced on the console and recorded (run params fallback, "
         "fallback_reason).";
}

Detector collective_timeout(const DetectorSettings& s) {
  Detector d;
  d.id = kCollectiveTimeoutDetector;
  d.failure = "Hang: a rank skipped or never reached a collective";
  d.symptom =
      "Progress stops. Every rank is alive and beating, but they sit in different collectives: one rank "
      "skipped a batch's all-reduces (or issued another collective there), so every other rank waits for "
      "a partner that will never come.";
  d.fires =
      "On every rank, a collective that makes no progress for the collective timeout raises CollectiveTimeout "
      "(op, sequence number, group, bytes and tag `s<step>/<bucket>`). The rank dumps the flight recorder of "
      "every group it uses to `RUN_DIR/flight/`, writes an error record (kind hang, op, seq, group) and exits "
      "non-zero; the supervisor reads it at its next poll, stops the other ranks (each dumps its flight "
      "recorder on SIGTERM) and records the incident. Ranks that disagree on what collective #k is never "
      "pair up (the tag is part of the Gloo slot), so a skip hangs at once instead of summing the wrong "
      "step. Detection latency: the timeout plus one poll.";
  d.lab = "--timeout " + human_duration(s.collective_timeout);
  d.production = human_duration(kProductionCollectiveTimeout) + " (PyTorch's default process-group timeout)";
  d.owner =
      "Fired by every rank's communicator (runtime/comm); acted on by the supervisor of parlab train; "
      "the incident goes to the training on-call.";
  d.culprit =
      "Automatic: the supervisor runs the flight-recorder analyzer on the run directory and puts its "
      "sentence in the incident and on the console. By hand: `parlab analyze hang RUN_DIR`. It names the "
      "first sequence number where the ranks' records disagree, e.g. \"rank 2 skipped all-reduce #10 "
      "(s5/grad.bucket0, 12.6 MB, group world): it issued all-reduce #10 (s6/grad.bucket0) there instead; "
      "ranks 0, 1, 3 waited 30.0 s\".";
  d.mitigation =
      "Restart every rank from the last good checkpoint (--max-restarts, a checkpoint every "
      "--checkpoint-every steps); the steps since it are redone and the run ends in the same state as "
      "an uninterrupted one.";
  d.stop = stop_rule(s);
  d.fallback = fallback_rule(s);
  d.reproduce =
      "parlab train --nproc 4 --steps 10 --checkpoint-every 5 --max-restarts 1 --timeout 2 "
      "--fault skip-allreduce:rank=2,step=7";
  return d;
}

Detector heartbeat(const DetectorSettings& s) {
  Detector d;
  d.id = kHeartbeatDetector;
  d.failure = "Hang: a rank stopped responding outside any collective";
  d.symptom =
      "Progress stops. One rank's process still exists but does nothing: no new records, no heartbeat. "
      "The others wait for it in their next collective.";
  d.fires = "Every rank touches `RUN_DIR/rank-<r>.heartbeat` every " +
            human_duration(heartbeat_interval(s.heartbeat_timeout)) +
            " (min(1 s, timeout / 4)); the supervisor fails a rank whose heartbeat is older than the heartbeat "
            "timeout. While other ranks fail on communication, a rank silent for " +
            human_duration(silent_after(s.heartbeat_timeout)) +
            " (3 beats) is named at once. Before its first beat a rank is allowed the larger of the heartbeat "
            "and the collective timeout (startup is not a hang). Detection latency: the heartbeat timeout plus "
            "up to one beat.";
  d.lab = "--heartbeat-timeout " + human_duration(s.heartbeat_timeout) + " (below --timeout, so it fires first)";
  d.production = human_duration(kProductionHeartbeatTimeout) + " (PyTorch's TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC)";
  d.owner = "The supervisor of parlab train fires and acts on it; the incident goes to the training on-call.";
  d.culprit =
      "The silent rank itself: the incident names it, not the ranks that waited for it. The analyzer's "
      "sentence (in the incident, or `parlab analyze hang RUN_DIR`) confirms it: \"rank 1 left no dump "
      "and never reached all-reduce #8 (s4/grad.bucket0, ...); ranks 0, 2, 3 waited 10.0 s\".";
  d.mitigation = "Stop every rank (the silent one is killed), restart from the last good checkpoint.";
  d.stop = stop_rule(s);
  d.fallback = fallback_rule(s);
  d.reproduce =
      "parlab train --nproc 4 --steps 10 --checkpoint-every 5 --max-restarts 1 --heartbeat-timeout 2 "
      "--fault hang:rank=1,step=7";
  return d;
}

Detector straggler(const DetectorSettings& s) {
  const diagnose::StragglerOptions& o = s.straggler;
  Detector d;
  d.id = kStragglerDetector;
  d.failure = "Straggler: one rank computes slowly";
  d.symptom =
      "The job trains, but every step takes as long as the slowest rank's compute; the other ranks show "
      "exposed communication (they wait at the all-reduce).";
  d.fires = "Over each window of " + std::to_string(o.window) +
            " steps, a rank is flagged when its median compute "
            "(forward + backward + optimizer) has a modified z-score above " +
            fixed(o.z_threshold, "%.1f") + " against the other ranks' medians AND is more than " +
            fixed(o.ratio_threshold, "%.2f") + "x their median (scale floored at " +
            fixed(100 * o.scale_floor, "%.0f") +
            "% of the median, so a tight cluster does not alarm on a wobble) AND its excess compute is at least " +
            fixed(100 * o.min_cost_fraction, "%.0f") +
            "% of the median step (what the others wait must matter). It is a straggler when flagged "
            "persistently: in at least " +
            std::to_string(o.min_windows) + " windows and " + fixed(100 * o.min_window_fraction, "%.0f") +
            "% of them. Checked at every window's end over the last " + std::to_string(kStragglerRecentWindows) +
            " windows (announced), and over all windows at the end of each attempt (recorded).";
  d.lab = "window " + std::to_string(o.window) + " steps, z > " + fixed(o.z_threshold, "%.1f") + ", ratio > " +
          fixed(o.ratio_threshold, "%.2f") + "x, excess >= " + fixed(100 * o.min_cost_fraction, "%.0f") +
          "% of the step, in " + std::to_string(o.min_windows) + "+ windows and " +
          fixed(100 * o.min_window_fraction, "%.0f") + "% of them";
  d.production = "the same statistic; windows of " + std::to_string(o.window) + " steps";
  d.owner =
      "The supervisor of parlab train announces it and records an incident (kind straggler) with its cost; "
      "the training on-call decides what to do with the node.";
  d.culprit =
      "The announcement and the incident name the rank and what it costs the others per step. By hand: "
      "`parlab analyze stragglers RUN_DIR`.";
  d.mitigation =
      "None automatic: a straggler is slow, not wrong, so the job keeps training. Drain or replace the "
      "node; to continue without it now, stop the job and run the same command with --nproc one lower: "
      "it resumes the last checkpoint with the same global batch.";
  d.stop = "Never stopped for slowness alone. A rank that stops responding is a hang (heartbeat).";
  d.fallback = "None (the job is correct, only slower).";
  d.reproduce = "parlab train --nproc 4 --steps 40 --checkpoint-every 0 --fault slow:rank=3,factor=3";
  return d;
}

// One section per detector, then the fallback plans, as markdown or plain text.
class Writer {
 public:
  explicit Writer(bool markdown) : md_(markdown) {}
  void heading(int level, const std::string& text) {
    if (md_)
      out_ += std::string(static_cast<size_t>(level), '#') + " " + text + "\n\n";
    else
      out_ += text + "\n" + std::string(text.size(), level == 1 ? '=' : '-') + "\n\n";
  }
  void para(const std::string& text) { out_ += wrap(text, "") + "\n"; }
  void field(const std::string& name, const std::string& text) {
    out_ += wrap(md_ ? "**" + name + ".** " + text : name + ": " + text, md_ ? "" : "    ");
    if (md_) out_ += "\n";
  }
  // A command to copy: never wrapped.
  void command(const std::string& name, const std::string& command) {
    out_ += md_ ? "**" + name + ".**\n\n```\n" + command + "\n```\n\n" : name + ":\n    $ " + command + "\n\n";
  }
  void table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
    if (md_) {
      auto row = [](const std::vector<std::string>& r) {
        std::string s = "|";
        for (const std::string& c : r) s += " " + c + " |";
        return s + "\n";
      };
      out_ += row(header);
      out_ += row(std::vector<std::string>(header.size(), "---"));
      for (const auto& r : rows) out_ += row(r);
      out_ += "\n";
      return;
    }
    // Plain text: one block per row, the header names as labels.
    for (const auto& r : rows) {
      for (size_t i = 0; i < r.size(); ++i)
        out_ += wrap(header[i] + ": " + r[i], i == 0 ? "" : "    ", i == 0 ? "" : "  ");
      out_ += "\n";
    }
  }
  std::string str() const { return out_; }

 private:
  // Plain text: lines of at most 100 characters, `first` prefixing the first line and `rest` the
  // others. Markdown: one line per paragraph (the renderer wraps; diffs stay per paragraph).
  std::string wrap(const std::string& text, const std::string& rest, const std::string& first = "") const {
    if (md_) return first + text + "\n";
    std::string out, line = first;
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find(' ', start);
      if (end == std::string::npos) end = text.size();
      const std::string word = text.substr(start, end - start);
      if (line.size() > rest.size() && line.size() + 1 + word.size() > 100) {
        out += line + "\n";
        line = rest;
      }
      line += (line.empty() || line == rest || line == first ? "" : " ") + word;
      start = end + 1;
    }
    return out + line + "\n";
  }

  bool md_;
  std::string out_;
};

}  // namespace

std::chrono::milliseconds heartbeat_interval(milliseconds timeout) {
  return std::clamp(timeout / 4, milliseconds(1), milliseconds(1000));
}

std::chrono::milliseconds silent_after(milliseconds timeout) { return 3 * heartbeat_interval(timeout); }

std::chrono::milliseconds first_beat_allowance(milliseconds heartbeat_timeout, milliseconds collective_timeout) {
  return std::max(heartbeat_timeout, collective_timeout);
}

const std::vector<FallbackPlan>& fallback_plans() {
  static const std::vector<FallbackPlan> plans = {
      {Fallback::kStop, "stop", "stop at the last known-good checkpoint",
       "the job stops; its message names the last known-good checkpoint, from which the same command resumes "
       "once the cause is fixed"},
      {Fallback::kSurvivors, "survivors", "DDP on the surviving ranks",
       "the culprit rank is dropped and the others continue elastically from the last good checkpoint, global "
       "batch unchanged (needs --min-nproc below --nproc)"},
      {Fallback::kSingle, "single", "single-worker baseline",
       "one worker continues from the last good checkpoint, global batch unchanged (gradient accumulation): "
       "slower, but with no peer left to hang on"},
  };
  return plans;
}

const FallbackPlan& fallback_plan(Fallback kind) {
  for (const FallbackPlan& p : fallback_plans())
    if (p.kind == kind) return p;
  return fallback_plans().front();
}

Fallback parse_fallback(std::string_view text) {
  for (const FallbackPlan& p : fallback_plans())
    if (p.flag == text) return p.kind;
  throw ConfigError("--fallback", std::string(text), "one of " + fallback_list());
}

std::string human_duration(milliseconds d) {
  const int64_t ms = d.count();
  if (ms >= 60'000 && ms % 60'000 == 0) return std::to_string(ms / 60'000) + " min";
  if (ms >= 1000 && ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  if (ms < 1000) return std::to_string(ms) + " ms";
  return fixed(static_cast<double>(ms) / 1000, "%g") + " s";
}

std::vector<Detector> detectors(const DetectorSettings& s) {
  return {collective_timeout(s), heartbeat(s), straggler(s)};
}

std::string render_runbook(bool markdown, const DetectorSettings& s) {
  Writer w(markdown);
  w.heading(1, "Hang and straggler runbook");
  w.para("Generated by `parlab runbook" + std::string(markdown ? " --markdown" : "") +
         "` from the detector table the software itself reads (runtime/launch/detectors.h): every number below "
         "is the one parlab train uses. Do not edit; regenerate.");
  w.para(
      "The failure class: one rank skips a batch and misses an all-reduce, leaving every other rank hung. In "
      "synchronous data parallelism every rank waits for every other at each gradient all-reduce, so one rank "
      "that skips, freezes or slows down stalls or slows all of them. Each detector below says what you see, "
      "what fires, who owns it, how the culprit is named, what happens next, when the job stops trying and what "
      "it degrades to.");
  const std::vector<Detector> ds = detectors(s);
  std::vector<std::vector<std::string>> rows;
  for (const Detector& d : ds) rows.push_back({d.id, d.failure, d.lab, d.production});
  w.heading(2, "Detectors");
  w.table({"detector", "catches", "lab default", "production default"}, rows);
  for (const Detector& d : ds) {
    w.heading(2, d.failure + " (" + d.id + ")");
    w.field("Symptom", d.symptom);
    w.field("Detector", d.fires);
    w.field("Threshold", "lab " + d.lab + "; production " + d.production + ".");
    w.field("Owner", d.owner);
    w.field("Name the culprit", d.culprit);
    w.field("Mitigation", d.mitigation);
    w.field("Stop condition", d.stop);
    w.field("Fallback", d.fallback);
    w.command("Reproduce", d.reproduce);
  }
  w.heading(2, "Fallback plans (--fallback)");
  rows.clear();
  for (const FallbackPlan& p : fallback_plans())
    rows.push_back({std::string(p.flag) + (p.kind == kDefaultFallback ? " (default)" : ""), std::string(p.name),
                    std::string(p.what)});
  w.table({"--fallback", "plan", "what happens"}, rows);
  w.para(
      "A job degrades once: a failure that exceeds --max-same-failure after a fallback stops it at the last "
      "known-good checkpoint, and --max-restarts bounds every restart, fallbacks included, so a job never "
      "loops.");
  return w.str();
}

}  // namespace parlab::launch
