#pragma once
// The simulator's answer. Its keys are the analytic model's (strategy::StepEstimate), so the two
// compare field by field: step_seconds, per rank compute / exposed communication / bubble
// seconds (classified exactly as the analytic walker classifies the compute stream's time),
// per collective start and end, and the bubble fractions. Deterministic: the same inputs give
// byte-identical JSON (sorted lists, no wall-clock, no addresses).
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/executor.h"
#include "trace/trace.h"
#include "strategy/cost_model.h"

namespace parlab::sim {

// Who waits where when the run could not finish: the simulated twin of a hung job.
struct Waiter {
  int rank = 0;
  std::string stream;  // "compute" | "comm"
  int step = 0;
  int op_id = -1;  // -1: waiting at the step boundary for its other stream
  std::string op;  // "all-reduce", "recv", ...
  std::string tag;
  std::string group;             // collectives
  int call = -1;                 // collectives: call number within the group in this step (0-based)
  std::vector<int> waiting_for;  // members that never reached the collective, or the sender
  int waiting_on_op = -1;        // a dependency (of the rank's other stream) that never finished
  double since_seconds = 0;
};

struct HangReport {
  bool deadlock = false;
  double at_seconds = 0;           // simulated time when nothing could progress any more
  std::vector<int> stopped_ranks;  // ended by a stop fault
  std::vector<int> missing_ranks;  // ranks others wait for (union of waiting_for)
  std::vector<Waiter> waiting;     // sorted by rank, stream
  // Collectives whose members called different things at the same call number (a rank skipped
  // or added a call): one line each, naming who called what.
  std::vector<std::string> mismatches;
  std::vector<std::string> lines;  // one readable line per waiter
};

struct SimResult {
  // The analytic model's keys, averaged over the measured steps.
  double step_seconds = 0;
  std::vector<strategy::RankTimes> ranks;  // every rank, by rank
  // Collectives of the detail ranks in the last measured step, times relative to its start.
  std::vector<strategy::CollectiveTiming> collectives;
  double bubble_fraction_of_ideal = 0;  // closed forms, as the analytic model reports them
  double bubble_fraction_of_total = 0;
  double walked_bubble_fraction = 0;  // simulated: the largest rank bubble over the step
  double samples_per_s = 0, tokens_per_s = 0, mfu = 0;

  // The simulator's own.
  int warmup_steps = 0;
  int measured_steps = 0;                 // measured steps that completed
  std::vector<double> step_seconds_each;  // every completed simulated step, warm-up first
  std::vector<double> sent_bytes;         // per rank: bytes its links carried out, per step
  int64_t messages = 0;                   // simulated messages (all steps)
  int64_t flows = 0;                      // of which SimGrid carried as flows (executor.h)
  int64_t closed_form_steps = 0;          // collective steps timed in closed form
  int64_t preempted_steps = 0;            // closed-form steps other traffic turned into flows
  int64_t ops = 0;                        // ops executed (all steps, all ranks)
  double simulated_seconds = 0;           // end of the whole run
  HangReport hang;
  std::vector<trace::Event> timeline;  // every op of every step (absolute times), if asked
};

// A SimResult as bytes and back, bit for bit: what a simulating child that summarizes its own run
// sends its parent (simulate_plan), so the parent never holds the step programs or the raw run.
std::string serialize(const SimResult& result);
SimResult deserialize_result(const std::string& bytes);

struct SummaryOptions {
  int warmup_steps = 1;
  std::vector<int> detail_ranks;  // empty: dp = tp = 0 of every stage (the analytic walk's ranks)
  bool timeline = true;
  ScheduleOptions schedule;
  std::vector<Fault> faults;
};

// Turns the executor's raw intervals into the result.
SimResult summarize(const std::vector<strategy::StepProgram>& programs, const RawRun& run,
                    const strategy::ModelSpec& model, const strategy::ClusterSpec& cluster,
                    const SummaryOptions& options);

nlohmann::json to_json(const SimResult& result);
// The analytic estimate in the same keys.
nlohmann::json estimate_to_json(const strategy::StepEstimate& estimate);

}  // namespace parlab::sim
