#pragma once
// Experiment definitions: one concept per TOML file (experiments/*.toml), with a header that
// says what a learner should notice. A file names its kind and carries the kind's table:
//
//   name = "scaling_1_2_4"
//   title = "DDP on 1, 2 and 4 workers: predicted and measured"
//   notice = "..."               # printed before the results
//   kind = "scaling"
//   [scaling]
//   model = "lab-mlp"  ...
//
// Unknown keys and bad values are rejected with the file, the key and what is allowed.
#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "strategy/scaling_lab.h"

namespace parlab::experiments {

enum class Source { kAnalytic, kSimulated, kMeasured };
std::string_view to_string(Source s);

// The seed's hand ledger (GB) and its rule.
struct LedgerTask {
  double params_gb = 0, grads_gb = 0, optimizer_gb = 0, activations_gb = 0, largest_layer_gb = 0, device_gb = 0;
};

// One plan at several worker counts: analytic, simulated and measured side by side.
struct ScalingTask {
  std::string model = "lab-mlp";
  std::string cluster = "cpu-local";
  std::string plan;  // key=value; dp follows the worker count
  std::vector<int> workers = {1, 2, 4};
  int steps = 10;  // measured and simulated steps (after one warm-up)
  std::vector<Source> sources = {Source::kAnalytic, Source::kSimulated, Source::kMeasured};
  uint64_t seed = 1;
  // Rounds over the worker counts, alternating their order (1,2,4 then 4,2,1, ...) so a machine
  // that slows down or speeds up meanwhile does not favour one count; each round profiles,
  // predicts and measures every count afresh (with a measured source; else one round). Speedups
  // are the medians of each round's paired ratio t1 / tW, errors of the paired per-round errors.
  int rounds = 1;
};

// One model on a fixed worker count under several splits (DDP, ZeRO-1/2/3): step time, exposed
// communication, memory per rank by category and bytes on the wire, analytic, simulated and
// measured side by side.
struct SplitsTask {
  std::string model = "lab-mlp";
  std::string cluster = "cpu-local";
  int workers = 4;
  std::vector<std::string> plans = {"zero=0", "zero=1", "zero=2", "zero=3"};
  int steps = 4;  // measured and simulated steps (after one warm-up)
  std::vector<Source> sources = {Source::kAnalytic, Source::kSimulated, Source::kMeasured};
  uint64_t seed = 1;
  // Measured rounds over the splits, alternating their order (first to last, then last to first,
  // ...) so a minute in which the machine slowed lands on different splits in different rounds;
  // a split's measured step is the median of its rounds' medians.
  int rounds = 1;
};

// Decision utility for splits: the planner ranks the splits of a model on `workers` processes of
// this machine; its top `top` and the best plan of each other family as it prices them (DDP,
// ZeRO, tensor, pipeline) are trained for real; the result is the regret of its first choice
// against the fastest measured candidate and the rank correlation of predicted and measured.
struct DecideTask {
  std::string model = "lab-mlp";
  std::string cluster = "cpu-local";  // this machine: cpu-local or a cluster file describing it
  int workers = 4;
  int64_t global_batch = 0;  // 0: the plan policy's (strategy::default_global_batch)
  int top = 3;
  int steps = 4;  // measured steps (at least kMinMeasuredSteps are measured), after one warm-up
  uint64_t seed = 1;
  // Measured rounds over the candidates, the order reversed every other round; each candidate's
  // measured step is the median of its rounds (the planner decides once, before any of them).
  int rounds = 1;
};

// The all-reduce scaling lab.
struct ScalingLabTask {
  strategy::ScalingLabInputs inputs;
};

// The one-worker equivalence test, recorded as evidence.
struct EquivalenceTask {
  std::string model = "lab-mlp";
  std::string plan;
  // Plans compared with one worker under `plan` (ZeRO-1/2/3, ...); empty: `plan` alone. Each is
  // trained on every worker count but 1.
  std::vector<std::string> plans;
  std::vector<int> workers = {1, 2, 4};
  int steps = 20;
  double tolerance = 1e-4;  // relative, on gradients and weights
  int64_t data_size = 0;    // 0: several epochs of the global batch
  uint64_t seed = 1;
  std::string device = "cpu";  // "cpu" | "cuda" (parlab train --device)
};

// The kill-and-resume proof, recorded as evidence.
struct KillResumeTask {
  std::string model = "lab-mlp";
  std::string plan;
  int nproc = 2;
  int steps = 20;
  int trials = 2;
  int checkpoint_every = 5;
  uint64_t seed = 1;
  std::string device = "cpu";  // "cpu" | "cuda" (parlab train --device)
};

// The planner on a large model, its top candidates also simulated.
struct PlannerTask {
  std::string model = "gpt-175b";
  std::string cluster = "dgx-a100";
  int world = 1024;
  int64_t global_batch = 0;  // gbs; 0: the plan policy's (strategy::default_global_batch)
  int top = 5;
  int simulate_top = 0;
};

// The hang drill: a rank that skips its all-reduces (or stops) on every attempt, so the detectors
// must name it and, after --max-same-failure repeats, the job must degrade to the named fallback.
struct HangDrillTask {
  std::string model = "lab-mlp";
  std::string plan;
  int nproc = 2;
  int steps = 8;
  int checkpoint_every = 2;
  std::string fault = "skip-allreduce:rank=1,step=3,attempts=0";  // launch/faults.h
  double timeout_seconds = 2;  // collective and heartbeat timeout: how long a hang goes unseen
  int max_same_failure = 1;
  std::string fallback = "survivors";  // launch/detectors.h: stop, survivors, single
  uint64_t seed = 1;
};

// Elastic sampling: a job that loses a rank resumes on fewer workers; every step must train the
// same samples as the uninterrupted run (none skipped, none repeated).
struct ElasticTask {
  std::string model = "lab-mlp";
  std::string plan;
  int nproc = 2;
  int steps = 12;
  int checkpoint_every = 4;
  int lose_rank = 1;
  int lose_step = 6;
  uint64_t seed = 1;
};

using Task = std::variant<LedgerTask, ScalingTask, ScalingLabTask, EquivalenceTask, KillResumeTask, PlannerTask,
                          SplitsTask, HangDrillTask, ElasticTask, DecideTask>;

struct ExperimentSpec {
  std::string name;
  std::string title;
  std::string notice;  // what a learner should notice
  std::string kind;
  std::string file;  // where it came from
  Task task;
};

ExperimentSpec parse_experiment(std::string_view text, const std::string& source);
ExperimentSpec load_experiment(const std::filesystem::path& path);
// The kinds and their table keys, for --help and error messages.
std::string experiment_kinds();

}  // namespace parlab::experiments
