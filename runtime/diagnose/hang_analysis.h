#pragma once
// Naming the culprit of a hang. "One rank skips a batch and misses an all-reduce, leaving every
// other rank hung": every rank's flight recorder says which collectives it issued, in order,
// per group. The first sequence number where the ranks disagree — a rank that never reached it,
// or reached it with a different collective — is where the job went wrong, and the ranks that
// disagree are the culprits; the others waited there.
//
// Works on the runtime's flight-recorder dumps (flight_recorder.<group>.rank<r>.json in a run
// directory) and on the simulator's stopped-rank report (who waits in which collective).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "runtime/comm/flight_recorder.h"

namespace parlab::diagnose {

struct Culprit {
  int rank = 0;
  // Its record ends before the collective: it never reached it (hung or died on the way). When
  // false, it issued another op at that sequence number: it skipped the collective.
  bool never_reached = false;
  std::string instead;        // what it issued at that sequence number instead, or its last op
  bool left_no_dump = false;  // no flight-recorder file: the process died or never got here
};

struct HangFinding {
  std::string group;
  uint64_t seq = 0;
  std::string op;  // the collective the majority issued there
  double bytes = 0;
  std::string tag;
  std::vector<int> waited;  // ranks that issued it and waited
  std::vector<Culprit> culprits;
  double waited_seconds = 0;  // longest wait among the waiters (start to end, or to the dump)
  std::string
      sentence;  // "rank 2 skipped all-reduce #41 (grad.bucket3, 12.6 MB, group dp.0); ranks 0, 1, 3 waited 30.0 s"
};

struct HangAnalysis {
  bool found = false;
  std::vector<HangFinding> findings;  // one per group with a disagreement, earliest first
  std::vector<std::string> notes;     // dumps read, ranks without dumps, entries dropped by the ring
  std::string summary() const;        // the findings' sentences, or why nothing was found
};

// Analyses per-rank dumps of possibly several groups. `world_size` (0: from the dumps) lets it
// name ranks that left no dump at all.
HangAnalysis analyze_dumps(const std::vector<comm::FlightRecorderDump>& dumps, int world_size = 0);
// Reads the flight_recorder.*.json dumps of a run directory's current attempt (in `dir` and
// `dir`/flight) and analyses them; when there are none, those of the latest attempt-<k>/ that
// has any (a restarted job archives each failed attempt's files there).
HangAnalysis analyze_run_dir(const std::filesystem::path& dir);
// The simulator's JSON result (`parlab simulate --json` with a stop fault): its hang report.
HangAnalysis analyze_sim_result(const std::string& json_text);
// A path: a run directory, a directory of dumps, or a simulator JSON file.
HangAnalysis analyze_path(const std::filesystem::path& path);

}  // namespace parlab::diagnose
