// The correctness checks: the seed's worked example, the hand-checked efficiency substitution,
// equivalence per split, kill-and-resume, the hang drill, elastic sampling, checkpoint
// completeness, predictions before reveal, and a plain "the latest proof passed". Performance
// and simulation checks are in checks_perf.cpp; the table of all of them is at the end.
#include "rubric/checks.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "rubric/check_util.h"
#include "rubric/lesson.h"

namespace parlab::rubric {

using nlohmann::json;

std::string split_of(const std::string& plan_text) {
  std::map<std::string, long> kv;
  size_t start = 0;
  while (start <= plan_text.size()) {
    const size_t end = std::min(plan_text.find(',', start), plan_text.size());
    const std::string item = plan_text.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
      try {
        kv[item.substr(0, eq)] = std::stol(item.substr(eq + 1));
      } catch (const std::exception&) {}
    }
    start = end + 1;
  }
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "+") + part; };
  if (kv["zero"] > 0) add("zero-" + std::to_string(kv["zero"]));
  if (kv["tp"] > 1) add("tp" + std::to_string(kv["tp"]));
  if (kv["pp"] > 1) add("pp" + std::to_string(kv["pp"]));
  return s.empty() ? "ddp" : s;
}

double max_relative_difference(const json& j) {
  double worst = -1;
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (v.is_number() && k.size() >= 19 && k.ends_with("relative_difference"))
        worst = std::max(worst, v.get<double>());
      else if (v.is_structured())
        worst = std::max(worst, max_relative_difference(v));
    }
  } else if (j.is_array()) {
    for (const auto& v : j) worst = std::max(worst, max_relative_difference(v));
  }
  return worst;
}

namespace detail {

void judge_seed_example(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const json& in = p->inputs;
  const double params = num(in, "params_gb"), grads = num(in, "grads_gb"), opt = num(in, "optimizer_gb"),
               act = num(in, "activations_gb"), layer = num(in, "largest_layer_gb"), device = num(in, "device_gb");
  // The chapter's rule, recomputed here from the recorded inputs (parallelism_budget.py).
  const double replica = params + grads + opt + act;
  const bool ddp = replica <= device, shard = replica > device, tensor = layer > device, pipeline = act > params;
  const double tol = c.threshold("tolerance_gb");
  r.measurements.push_back(
      within("replica_gb", replica, c.threshold("replica_gb"), tol, "params + grads + optimizer + activations"));
  r.measurements.push_back(
      within("recorded replica_gb", num(p->evidence, "replica_gb"), replica, tol, "the lab's own figure"));
  const std::pair<const char*, bool> verdicts[] = {{"ddp_fits", ddp},
                                                   {"shard_model_state", shard},
                                                   {"tensor_split_needed", tensor},
                                                   {"pipeline_candidate", pipeline}};
  for (const auto& [name, mine] : verdicts) {
    const double want = c.threshold(std::string("expect_") + name);
    r.measurements.push_back(equals(name, mine ? 1 : 0, want, "the rule on the recorded inputs"));
    r.measurements.push_back(
        equals(std::string("recorded ") + name, flag(p->evidence, name), mine ? 1 : 0, "what the lab printed"));
  }
  conclude(r, fmt::format("replica {:g} GB against {:g} GB: DDP {}, shard model state {}", replica, device,
                          ddp ? "fits" : "does not fit", shard ? "yes" : "no"));
}

void judge_efficiency_substitution(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const int w = static_cast<int>(c.threshold("workers"));
  const double t1 = c.threshold("step_1_ms"), tw = c.threshold("step_w_ms");
  // throughput_W = W b / t_W and throughput_1 = b / t_1 (b samples per worker per step), so
  // efficiency = throughput_W / (W throughput_1) = t_1 / t_W.
  const double hand = t1 / tw;
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const json rows = p->evidence.value("rows", json::array());
  const json* row = nullptr;
  const json* one = nullptr;
  for (const json& x : rows) {
    if (x.value("workers", 0) == w) row = &x;
    if (x.value("workers", 0) == 1) one = &x;
  }
  if (!row || !one) {
    r.status = Status::kFailed;
    r.detail = fmt::format("the lab's table has no row for 1 and {} workers", w);
    return;
  }
  const double lab = num(*row, "efficiency");
  const double from_steps = num(*one, "step_seconds") / num(*row, "step_seconds");
  const double tol = c.threshold("tolerance");
  r.measurements.push_back(within(fmt::format("efficiency at {} workers (lab)", w), lab, hand, tol,
                                  fmt::format("hand: t_1 / t_W = {:g} ms / {:g} ms = {:.4f}", t1, tw, hand)));
  r.measurements.push_back(
      within("lab efficiency vs its own step times", lab, from_steps, 1e-9, "t_1 / t_W from the lab's rows"));
  r.measurements.push_back(
      within(fmt::format("speedup at {} workers (lab)", w), num(*row, "speedup"), w * hand, w * tol, "W x efficiency"));
  conclude(r, fmt::format("hand-checked efficiency {:.4f} vs the lab's {:.4f} (tolerance {:g})", hand, lab, tol));
}

void judge_equivalence(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  note_untrusted(c, e, r);
  const auto proofs = e.trusted(c.proof, c.experiment);
  if (proofs.empty()) return set_missing(c, e, r);
  // Data-driven: every split that was run is judged, the latest proof of each. A proof over
  // several plans ("plans": [...]) with its evidence keyed by plan text counts once per plan.
  struct Run {
    const Proof* proof;
    json evidence;
    bool per_plan = false;  // judged from its own part of the evidence, not the proof's overall flag
  };
  std::map<std::string, Run> by_split;
  for (const Proof* p : proofs) {
    const json plans = p->inputs.value("plans", json());
    bool keyed = plans.is_array() && !plans.empty();
    if (keyed)
      for (const json& plan : plans) keyed = keyed && plan.is_string() && p->evidence.contains(plan.get<std::string>());
    if (keyed)
      for (const json& plan : plans)
        by_split[split_of(plan.get<std::string>())] = {p, p->evidence[plan.get<std::string>()], true};
    else
      by_split[split_of(p->inputs.value("plan", std::string()))] = {p, p->evidence, false};
  }
  const double limit = c.threshold("max_relative_difference");
  bool all = true;
  for (const auto& [split, run] : by_split) {
    const Proof* p = run.proof;
    const double worst = max_relative_difference(run.evidence);
    Part part{split, worst >= 0 && worst <= limit && (run.per_plan || p->row.passed), "", {p->row.id}};
    std::string workers;
    for (const auto& [k, v] : run.evidence.items())
      if (v.is_object()) workers += (workers.empty() ? "" : ", ") + k;
    part.detail = worst < 0 ? "no relative differences recorded"
                            : fmt::format("largest relative difference {:.2e} (limit {:.0e}) on {} workers vs 1", worst,
                                          limit, workers);
    r.measurements.push_back(
        at_most(split + " relative difference", worst, limit, "proof #" + std::to_string(p->row.id)));
    all = all && part.passed;
    add_proof(r, *p);
    r.parts.push_back(part);
  }
  for (const std::string& need :
       c.lists.count("require_splits") ? c.lists.at("require_splits") : std::vector<std::string>{"ddp"}) {
    if (by_split.count(need)) continue;
    all = false;
    r.parts.push_back({need, false, "required split not run", {}});
  }
  r.status = all ? Status::kPassed : Status::kFailed;
  r.detail = fmt::format("{} split(s) run: {}", by_split.size(),
                         all ? "every one equivalent to 1 worker" : "not all equivalent");
}

void judge_kill_resume(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const std::string ref = p->evidence.value("reference_hash", std::string());
  int identical = 0, total = 0;
  for (const json& t : p->evidence.value("trials", json::array())) {
    ++total;
    // Identical as recomputed from the hashes, and only when the fault fired and the job finished.
    const bool fired = t.contains("restart_seconds");
    const bool same = !ref.empty() && t.value("final_hash", std::string()) == ref && t.value("completed", false);
    identical += fired && same;
    r.parts.push_back({"trial " + std::to_string(t.value("trial", 0)),
                       fired && same,
                       fmt::format("--fault {}: final hash {} {}", t.value("fault", std::string()),
                                   t.value("final_hash", std::string("-")),
                                   !fired ? "(the fault never fired)"
                                   : same ? "= reference"
                                          : "differs from reference " + ref),
                       {p->row.id}});
    if (t.contains("run")) r.runs.push_back(t["run"].get<int64_t>());
  }
  r.measurements.push_back(
      at_least("bit-identical trials", identical, c.threshold("min_trials"), "final-state hash = reference's"));
  r.measurements.push_back(at_most("differing trials", total - identical, 0, ""));
  conclude(r, fmt::format("{}/{} trials bit-identical to the uninterrupted run", identical, total));
}

void judge_hang_fallback(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const int injected = p->inputs.value("injected_rank", -1);
  const json incidents = p->evidence.value("incidents", json::array());
  const json first = incidents.empty() ? json::object() : incidents.front();
  const json fb = p->evidence.value("fallback", json());
  r.measurements.push_back(
      equals("culprit named by the detectors", first.value("rank", -1), injected,
             "detector " + first.value("detector", std::string("-")) + "; injected rank " + std::to_string(injected)));
  r.measurements.push_back(at_most(
      "detection seconds", first.contains("detection_seconds") ? first["detection_seconds"].get<double>() : INFINITY,
      c.threshold("max_detection_seconds"), "fault -> noticed"));
  const bool named_plan = fb.is_object() && !fb.value("name", std::string()).empty();
  const bool exercised =
      named_plan && (fb.value("plan", std::string()) == "stop" || p->evidence.value("completed", false));
  r.measurements.push_back(equals("named fallback exercised", exercised ? 1 : 0, 1,
                                  named_plan ? "'" + fb.value("name", std::string()) + "'" : "no fallback reached"));
  conclude(r, named_plan ? fmt::format("hang of rank {} detected; fallback '{}' ({} -> {} workers)", injected,
                                       fb.value("name", std::string()), fb.value("world_before", 0),
                                       fb.value("world_after", 0))
                         : "no fallback was reached");
}

void judge_elastic(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const json& ev = p->evidence;
  const int before = ev.value("world_before", 0), after = ev.value("world_after", 0);
  r.measurements.push_back(
      at_least("world size change", before - after, 1, fmt::format("{} -> {} workers", before, after)));
  r.measurements.push_back(at_most("samples skipped", double(ev.value("skipped", json::array()).size()), 0,
                                   "against the uninterrupted run"));
  r.measurements.push_back(at_most("samples repeated", double(ev.value("repeated", json::array()).size()), 0,
                                   "against the uninterrupted run"));
  r.measurements.push_back(
      at_least("steps compared", ev.value("steps_compared", 0), p->inputs.value("steps", 1), "every step of the job"));
  if (ev.contains("reference_run")) r.runs.push_back(ev["reference_run"].get<int64_t>());
  conclude(r, fmt::format("resumed {} -> {} workers; {} steps compared sample by sample", before, after,
                          ev.value("steps_compared", 0)));
}

void judge_checkpoint(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  const json& ev = p->evidence;
  const json comp = ev.value("components", json::object());
  r.measurements.push_back(
      equals("verified against the manifest", flag(ev, "verified"), 1, ev.value("path", std::string())));
  r.measurements.push_back(at_least("parameters", comp.value("parameters", 0), 1, ""));
  r.measurements.push_back(at_least(
      "optimizer buffers per parameter",
      comp.value("parameters", 0) ? double(comp.value("optimizer_buffers", 0)) / comp.value("parameters", 1) : 0,
      c.threshold("min_buffers_per_parameter"), "AdamW keeps exp_avg and exp_avg_sq"));
  r.measurements.push_back(at_most("missing components", double(ev.value("missing", json::array()).size()), 0,
                                   ev.value("missing", json::array()).dump()));
  for (const char* key : {"step", "sampler", "rng", "optimizer"})
    r.measurements.push_back(
        equals(std::string(key) + " saved", comp.value(key, false) ? 1 : 0, 1, "metadata." + std::string(key)));
  conclude(r, "final checkpoint: " + std::to_string(comp.value("parameters", 0)) +
                  " parameters with their optimizer state, step, sampler and RNG");
}

void judge_predictions(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  if (e.predictions.empty()) return set_missing(c, e, r);
  int credited = 0;
  for (const Prediction& p : e.predictions) {
    // Timestamps are ISO-8601 UTC with milliseconds: text order is time order.
    const bool before = p.revealed_at && p.predicted_at < *p.revealed_at;
    credited += before;
    r.predictions.push_back(p.id);
    r.parts.push_back({fmt::format("prediction #{} ({}, {} workers)", p.id, p.quantity, p.world_size),
                       before,
                       !p.revealed_at ? "not revealed yet"
                       : before ? fmt::format("predicted {:g} at {}, revealed {:g} at {}", p.predicted, p.predicted_at,
                                              p.revealed.value_or(0), *p.revealed_at)
                                : "predicted at " + p.predicted_at + ", not before the reveal at " + *p.revealed_at +
                                      ": not credited",
                       {}});
  }
  r.measurements.push_back(
      at_least("predictions made before their reveal", credited, c.threshold("min_predictions"), ""));
  conclude(r, fmt::format("{} of {} predictions were recorded before the result was revealed", credited,
                          e.predictions.size()));
}

void judge_lesson(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const LessonProgress lp = lesson_progress(e.predictions);
  bool any = false;
  for (const Prediction& p : e.predictions) any = any || p.quantity.rfind("lesson.", 0) == 0;
  if (!any) {
    set_missing(c, e, r);
    r.detail = "no lesson answers in the database (the desktop lab's Lesson view writes them)";
    return;
  }
  for (const LessonStepProgress& s : lp.steps) {
    r.predictions.insert(r.predictions.end(), s.predictions.begin(), s.predictions.end());
    std::string missing;
    for (const std::string& q : s.missing) missing += (missing.empty() ? "" : ", ") + q;
    r.parts.push_back(
        {fmt::format("lesson step {}: {}", s.number, s.title),
         s.complete,
         s.complete ? "every question answered before its reveal" : "not yet answered and revealed: " + missing,
         {}});
  }
  r.measurements.push_back(at_least("lesson steps completed", lp.completed, c.threshold("min_steps"),
                                    fmt::format("of {}", lp.steps.size())));
  conclude(r, lp.next_step == 0 ? fmt::format("the lesson is complete: {} of {} steps", lp.completed, lp.steps.size())
                                : fmt::format("{} of {} lesson steps complete; it resumes at step {}", lp.completed,
                                              lp.steps.size(), lp.next_step));
}

void judge_proof_passed(const Criterion& c, const Evidence& e, const GradeOptions&, CriterionResult& r) {
  const Proof* p = latest_trusted(c, e, r);
  if (!p) return;
  r.measurements.push_back(equals("latest proof passed", p->row.passed ? 1 : 0, 1, p->row.result));
  conclude(r, p->row.result);
}

}  // namespace detail
}  // namespace parlab::rubric
