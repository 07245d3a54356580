// The simulation and performance checks (the grader re-simulates; speedups, efficiencies and
// prediction errors are computed here from the recorded step times), and the table of every
// check a rubric may name.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>

#include "parlab/source_dir.h"
#include "rubric/check_util.h"
#include "rubric/checks.h"
#include "sim/result.h"
#include "sim/simulate.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/measures.h"

namespace parlab::rubric {

using nlohmann::json;

namespace detail {

std::string locate_model(const std::string& ref) {
  const bool path_like = ref.find('/') != std::string::npos || ref.ends_with(".toml");
  if (!path_like || std::filesystem::path(ref).is_absolute() || std::filesystem::exists(ref)) return ref;
  const std::filesystem::path in_source = std::filesystem::path(PARLAB_SOURCE_DIR) / ref;
  return std::filesystem::exists(in_source) ? in_source.string() : ref;
}

std::string resimulate(const json& in) {
  const std::string model_ref = in.value("model", std::string());
  const strategy::ModelSpec model = strategy::load_model(locate_model(model_ref));
  if (db::content_digest(strategy::to_json(model).dump()) != in.value("model_digest", std::string()))
    throw ConfigError("model", model_ref, "is not the model the simulation was recorded with (its file changed)");
  const strategy::ClusterSpec cluster =
      strategy::parse_cluster_toml(in.value("cluster_toml", std::string()), "recorded cluster");
  const int world = in.value("world", 1);
  strategy::Plan plan = strategy::resolve(strategy::parse_plan(in.value("plan", std::string())), model, world);
  const strategy::ClusterSpec sized = strategy::with_world(cluster, world);
  strategy::validate(plan, model, sized);
  sim::SimOptions so;
  so.warmup_steps = in.value("warmup_steps", 1);
  so.steps = in.value("steps", 1);
  so.timeline = in.value("timeline", false);
  return db::content_digest(sim::to_json(sim::simulate_plan(model, plan, sized, so)).dump());
}

namespace {

void judge_determinism(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  note_untrusted(c, e, r);
  const auto proofs = e.trusted(c.proof, c.experiment);
  if (proofs.empty()) return set_missing(c, e, r);
  // Determinism is a claim about one build: a simulation another build of parlab recorded may
  // differ because the simulator changed since (say, a cost its programs now count), so such a
  // difference is reported, not counted as a failure. The reproduced ones must still be enough.
  const std::string this_build = db::this_process_provenance().binary_hash;
  int same = 0, differ = 0, unrebuilt = 0, other_build = 0;
  for (const Proof* p : proofs) {
    add_proof(r, *p);
    const std::string want = p->evidence.value("output_digest", std::string());
    Part part{fmt::format("{} workers", p->inputs.value("world", 0)), false, "", {p->row.id}};
    try {
      const std::string got = resimulate(p->inputs);
      part.passed = got == want;
      const bool elsewhere = !p->row.binary_hash.empty() && p->row.binary_hash != this_build;
      part.detail = part.passed
                        ? "re-simulated: the same " + std::to_string(p->evidence.value("output_bytes", 0)) + " bytes"
                        : "re-simulated output differs: " + got + " vs recorded " + want +
                              (elsewhere ? " (recorded by another build, " + p->row.binary_hash + ": not judged)" : "");
      (part.passed ? same : elsewhere ? other_build : differ)++;
    } catch (const Error& err) {
      part.detail = std::string("cannot re-simulate here: ") + err.what();
      ++unrebuilt;
    }
    r.parts.push_back(part);
  }
  r.measurements.push_back(at_least("simulations reproduced byte for byte", same, c.threshold("min_simulations"),
                                    "the grader re-ran each one"));
  r.measurements.push_back(at_most("simulations that differ", differ, 0, ""));
  r.measurements.push_back(
      at_most("simulations that could not be rebuilt", unrebuilt, 0, "their model or inputs are not available here"));
  conclude(r, fmt::format("{} recorded simulation(s) re-simulated: {} identical{}", proofs.size(), same,
                          other_build ? fmt::format(", {} of another build differ (not judged)", other_build) : ""));
}

// A report row's step times per round from one source (one, its median, when it carries none).
std::vector<double> round_steps(const json& row, const std::string& source) {
  std::vector<double> out;
  for (const json& t : row.value(source + "_round_step_seconds", json::array()))
    if (t.is_number()) out.push_back(t.get<double>());
  if (out.empty()) out.push_back(num(row, (source + "_step_seconds").c_str()));
  return out;
}

// The latest trusted report with measured rows at every required worker count.
void judge_scaling(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  std::vector<int> want;
  for (const std::string& w :
       c.lists.count("workers") ? c.lists.at("workers") : std::vector<std::string>{"1", "2", "4"})
    want.push_back(std::stoi(w));
  std::map<int, json> rows;
  for (const json& x : p->evidence.value("rows", json::array())) rows[x.value("workers", 0)] = x;
  const double max_error = c.threshold("max_prediction_error"), min_eff = c.threshold("min_efficiency");
  if (!rows.count(want.front()) || !rows[want.front()].contains("measured_step_seconds")) {
    r.status = Status::kFailed;
    r.detail = fmt::format("no measured run at {} worker(s): nothing to scale from", want.front());
    return;
  }
  const int w1 = want.front();
  const double b1 = num(rows[w1], "global_batch");
  const std::vector<double> rounds1 = round_steps(rows[w1], "measured");
  for (int w : want) {
    if (!rows.count(w) || !rows[w].contains("measured_step_seconds")) {
      r.measurements.push_back(at_least(fmt::format("measured run at {} workers", w), 0, 1, "not in the report"));
      continue;
    }
    const json& row = rows[w];
    const double tw = num(row, "measured_step_seconds");
    // Throughput ratio at the recorded global batches, paired by round where the rows carry their
    // rounds (strategy/measures.h: the tree's one estimator).
    const double speedup = strategy::speedup(rounds1, round_steps(row, "measured"), b1, num(row, "global_batch")).value;
    const double eff = strategy::efficiency(speedup, w, w1);
    r.measurements.push_back(at_least(
        fmt::format("efficiency at {} workers", w), eff, min_eff,
        fmt::format("speedup {:.2f}x, step {:.1f} ms (run {})", speedup, tw * 1e3, row.value("measured_run", 0))));
    if (row.contains("measured_run")) r.runs.push_back(row["measured_run"].get<int64_t>());
    for (const char* src : {"simulated", "analytic"}) {
      const std::string key = std::string(src) + "_step_seconds";
      if (!row.contains(key)) continue;
      // Paired by round where each round predicted afresh beside its measurement (the tree's estimator).
      const double err = std::fabs(strategy::relative_error(round_steps(row, src), round_steps(row, "measured")).value);
      r.measurements.push_back(
          at_most(fmt::format("{} error at {} workers", src, w), err, max_error,
                  fmt::format("predicted {:.1f} ms vs measured {:.1f} ms", num(row, key.c_str()) * 1e3, tw * 1e3)));
    }
  }
  conclude(r, fmt::format("{}-worker efficiency report with its predictions' errors", fmt::join(want, "/")));
}

}  // namespace
}  // namespace detail

namespace {

// The checks that recompute the chapter's numbers and the lab's predictions from their proofs.
std::vector<CheckKind> modelling_checks() {
  using namespace detail;
  return {
      {"seed_worked_example",
       "seed_worked_example",
       "the seed's memory ledger recomputed from its recorded inputs and compared with the chapter",
       {{"replica_gb", 130, "the chapter's replica size"},
        {"tolerance_gb", 0.01, "allowed difference, GB"},
        {"expect_ddp_fits", 0, "1 when DDP should fit"},
        {"expect_shard_model_state", 1, ""},
        {"expect_tensor_split_needed", 0, ""},
        {"expect_pipeline_candidate", 0, ""}},
       {},
       judge_seed_example},
      {"efficiency_substitution",
       "scaling_lab",
       "the chapter's W-worker efficiency substitution, by hand, against the lab's table",
       {{"workers", 2, "W"},
        {"step_1_ms", 120.3, "the chapter's 1-worker step"},
        {"step_w_ms", 125.7, "the chapter's W-worker step"},
        {"tolerance", 0.01, "declared tolerance on efficiency"}},
       {},
       judge_efficiency_substitution},
      {"deterministic_simulation",
       "deterministic_simulation",
       "every recorded simulation re-simulated by the grader, output compared byte for byte",
       {{"min_simulations", 1, "simulations that must reproduce"}},
       {},
       judge_determinism},
      {"equivalence",
       "equivalence",
       "each split run matches one worker within the relative tolerance",
       {{"max_relative_difference", 1e-4, "normwise, gradients/weights/loss"}},
       {"require_splits"},
       judge_equivalence},
      {"efficiency_report",
       "scaling_report",
       "measured speedup and efficiency per worker count, each prediction within its error",
       {{"max_prediction_error", 0.5, "largest |predicted / measured - 1|"},
        {"min_efficiency", 0, "lowest measured efficiency"}},
       {"workers"},
       judge_scaling},
      {"decision_utility",
       "decision_utility",
       "the planner's first choice among splits against the fastest measured candidate, and the rank correlation of "
       "predicted and measured step times (kind = \"decide\")",
       {{"max_regret", 0.05, "1 - t_fastest / t_choice"},
        {"min_spearman", 0.8, "Spearman's rho, predicted vs measured"},
        {"min_candidates", 3, "candidates measured"},
        {"min_families", 4, "families among them: DDP, ZeRO, tensor, pipeline"}},
       {},
       judge_decision},
  };
}

// The checks of the runtime's fault tolerance and of the desktop lab's use.
std::vector<CheckKind> runtime_and_lab_checks() {
  using namespace detail;
  return {
      {"kill_resume",
       "kill_resume_bitwise",
       "kill-and-resume trials end bit-identical to the uninterrupted run",
       {{"min_trials", 2, "bit-identical trials needed"}},
       {},
       judge_kill_resume},
      {"hang_fallback",
       "hang_fallback",
       "a hang is detected, its culprit named, and the named fallback exercised",
       {{"max_detection_seconds", 60, "fault -> detection"}},
       {},
       judge_hang_fallback},
      {"elastic_sampling",
       "elastic_sampling",
       "a resume on another world size neither skips nor repeats a sample",
       {},
       {},
       judge_elastic},
      {"checkpoint_complete",
       "checkpoint_complete",
       "the final checkpoint holds every state component and verifies",
       {{"min_buffers_per_parameter", 2, "optimizer buffers per parameter (AdamW: 2)"}},
       {},
       judge_checkpoint},
      {"predictions_before_reveal",
       "",
       "predictions recorded in the desktop lab before their result was revealed",
       {{"min_predictions", 3, "credited predictions needed"}},
       {},
       judge_predictions},
      {"proof_passed", "", "the latest trusted proof of the named kind passed", {}, {}, judge_proof_passed},
      {"lesson_progress",
       "",
       "the desktop lab's guided lesson: steps whose every question was answered before its reveal",
       {{"min_steps", 5, "completed steps needed"}},
       {},
       judge_lesson},
  };
}

}  // namespace

const std::vector<CheckKind>& check_kinds() {
  static const std::vector<CheckKind> kinds = [] {
    std::vector<CheckKind> k = modelling_checks();
    for (CheckKind& c : runtime_and_lab_checks()) k.push_back(std::move(c));
    return k;
  }();
  return kinds;
}

const CheckKind* find_check(const std::string& name) {
  for (const CheckKind& k : check_kinds())
    if (k.name == name) return &k;
  return nullptr;
}

}  // namespace parlab::rubric
