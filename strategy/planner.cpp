#include "strategy/planner.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "base/errors.h"
#include "base/units.h"

namespace parlab::strategy {
namespace {

std::string secs(double s) { return units::format_seconds(s); }

struct Search {
  const ModelSpec& m;
  const ClusterSpec& c;
  const PlannerOptions& o;
  std::vector<LayerSpec> layers;
  int world;
  int64_t gbs;

  // Resolves and validates a plan; nullopt (and the reason) when invalid.
  std::optional<Plan> make(Plan p, std::string* why = nullptr) const {
    try {
      p.global_batch = gbs;
      p.microbatches = 0;
      p = resolve(p, m, world);
      validate(p, m, c);
      return p;
    } catch (const ConfigError& e) {
      if (why) *why = e.what();
      return std::nullopt;
    }
  }

  Candidate evaluate(const Plan& p) const {
    Candidate cand;
    cand.plan = p;
    cand.worst = worst_stage(ledger_per_stage(m, layers, p, c));
    cand.quick = quick_estimate(m, layers, p, c);
    return cand;
  }

  // The rule's choice, the smallest split and the neighbours are often plans the ranking has
  // walked already: each plan is walked once.
  void walk(Candidate& cand) const {
    if (cand.walked) return;
    const Plan& p = cand.plan;
    auto it = walks.find(key_of(p));
    if (it == walks.end()) it = walks.emplace(key_of(p), estimate_step(m, layers, p, c, /*detail=*/false)).first;
    cand.walked = it->second;
  }

  // Walks the first n candidates, several plans at once, one thread per core: each walk reads
  // only its plan and the search's constants, and the estimates are stored in the candidates'
  // order afterwards, so the result is the sequential one (a walk that throws rethrows as it would
  // have there: the first in order).
  void walk_first(std::vector<Candidate>& cands, size_t n) const {
    std::vector<const Plan*> todo;
    std::set<Key> queued;
    for (size_t i = 0; i < n; ++i)
      if (!cands[i].walked && !walks.count(key_of(cands[i].plan)) && queued.insert(key_of(cands[i].plan)).second)
        todo.push_back(&cands[i].plan);
    std::vector<StepEstimate> out(todo.size());
    std::vector<std::exception_ptr> failed(todo.size());
    std::atomic<size_t> next{0};
    auto work = [&] {
      for (size_t k; (k = next++) < todo.size();) try {
          out[k] = estimate_step(m, layers, *todo[k], c, /*detail=*/false);
        } catch (...) {
          failed[k] = std::current_exception();
        }
    };
    const size_t threads = std::min<size_t>(todo.size(), std::max(1u, std::thread::hardware_concurrency()));
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    for (size_t k = 0; k < todo.size(); ++k) {
      if (failed[k]) std::rethrow_exception(failed[k]);
      walks.emplace(key_of(*todo[k]), std::move(out[k]));
    }
    for (size_t i = 0; i < n; ++i) walk(cands[i]);
  }

  using Key = std::tuple<int, int, int, int, int64_t, int64_t, int64_t, int, int, int, bool, int, int, int, double>;
  static Key key_of(const Plan& p) {
    return {p.dp,
            p.tp,
            p.pp,
            p.zero,
            p.microbatch,
            p.microbatches,
            p.global_batch,
            int(p.schedule),
            p.v,
            int(p.recompute),
            p.sequence_parallel,
            int(p.precision),
            int(p.mixed_state),
            int(p.optimizer),
            p.bucket_bytes};
  }
  mutable std::map<Key, StepEstimate> walks;

  template <typename T>
  std::vector<T> choices(const char* key, T given, std::vector<T> all) const {
    if (o.fixed.was_given(key)) return {given};
    return all;
  }
};

std::vector<int> powers_of_two_dividing(int n, int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit && v <= n; v *= 2)
    if (n % v == 0) out.push_back(v);
  return out;
}

std::vector<int> divisors_up_to(int n, int limit) {
  std::vector<int> out;
  for (int v = 1; v <= limit && v <= n; ++v)
    if (n % v == 0) out.push_back(v);
  return out;
}

int split_degree(const Plan& p) { return p.tp * p.pp; }

// A one-line comparison of the chosen plan with a neighbour along one axis.
SplitComparison compare(const Search& s, const Candidate& chosen, Plan next, const std::string& label,
                        const std::string& stop_word) {
  SplitComparison cmp;
  cmp.label = label;
  std::string why;
  next.given.clear();
  const auto valid = s.make(next, &why);
  if (!valid) {
    cmp.why_not = why;
    cmp.sentence = label + " is not a valid plan: " + why;
    return cmp;
  }
  Candidate other = s.evaluate(*valid);
  if (!other.worst.fits()) {
    cmp.why_not = "does not fit";
    cmp.sentence = label + " does not fit: stage " + std::to_string(other.worst.stage) + " needs " +
                   units::format_bytes(other.worst.total_bytes()) + " of " +
                   units::format_bytes(other.worst.device_bytes);
    return cmp;
  }
  s.walk(other);
  cmp.possible = true;
  auto totals = [](const StepEstimate& e, double& comm, double& rest) {
    comm = rest = 0;
    for (const auto& r : e.ranks) {
      comm = std::max(comm, r.exposed_comm_seconds);
      rest = std::max(rest, r.compute_seconds + r.bubble_seconds);
    }
  };
  double comm_a, rest_a, comm_b, rest_b;
  totals(*chosen.walked, comm_a, rest_a);
  totals(*other.walked, comm_b, rest_b);
  cmp.comm_added_seconds = comm_b - comm_a;
  cmp.compute_saved_seconds = rest_a - rest_b;
  cmp.step_seconds = other.walked->step_seconds;
  const bool better = cmp.step_seconds < chosen.walked->step_seconds;
  // With the world fixed, a larger split shrinks DP by the same factor: every rank still computes
  // 1/world of the step's FLOPs, so the split saves (almost) no compute -- it buys memory, and
  // costs communication. Say so rather than print a residue of microseconds as "saves".
  const bool same_compute = std::fabs(cmp.compute_saved_seconds) < 0.01 * rest_a;
  const std::string compute_part =
      same_compute ? std::string(
                         "saves no compute (the world is fixed: DP shrinks as the split grows, so each rank "
                         "computes as much as before)")
                   : std::string(cmp.compute_saved_seconds >= 0 ? "saves " : "costs ") +
                         secs(std::fabs(cmp.compute_saved_seconds)) + " of compute and bubble";
  char buf[640];
  std::snprintf(buf, sizeof buf, "%s %s %s of exposed communication per step and %s: %s", label.c_str(),
                cmp.comm_added_seconds >= 0 ? "adds" : "removes", secs(std::fabs(cmp.comm_added_seconds)).c_str(),
                compute_part.c_str(),
                better ? ("faster (" + secs(cmp.step_seconds) + " per step)").c_str() : stop_word.c_str());
  cmp.sentence = buf;
  return cmp;
}

// ---- enumerate: every combination of the searched keys, outermost key first ----

// One key of the search: the plans that extend `p` along it (one each for the values it may
// take; none when no value suits what `p` already fixed).
using Axis = std::function<std::vector<Plan>(const Plan&)>;

// The product of `plans` with one more axis, in nested-loop order: every extension of plans[0],
// then of plans[1], ...
std::vector<Plan> extend(const std::vector<Plan>& plans, const Axis& axis) {
  std::vector<Plan> out;
  for (const Plan& p : plans)
    for (Plan& q : axis(p)) out.push_back(std::move(q));
  return out;
}

// `p` once per value, `set` applying each (in the values' order).
template <class T, class Set>
std::vector<Plan> along(const Plan& p, const std::vector<T>& values, Set set) {
  std::vector<Plan> out;
  for (const T& v : values) {
    out.push_back(p);
    set(out.back(), v);
  }
  return out;
}

// The values that satisfy `pred`, in order.
template <class T, class Pred>
std::vector<T> keep(std::vector<T> values, Pred pred) {
  values.erase(std::remove_if(values.begin(), values.end(), [&](const T& v) { return !pred(v); }), values.end());
  return values;
}

// Every (tp, pp, dp, zero, mb, schedule, recompute, sp) the search considers, with the keys the
// user fixed held at their values. Nothing is validated here.
std::vector<Plan> enumerate_plans(const Search& s) {
  const Plan& f = s.o.fixed;
  const ModelSpec& m = s.m;
  const int world = s.world;
  const bool transformer = m.kind == ModelKind::kTransformer;
  const int max_tp = s.o.max_tp > 0 ? s.o.max_tp : 2 * s.c.devices_per_node;
  std::vector<int64_t> mbs = s.o.microbatch_sizes;
  if (f.was_given("mb")) mbs = {f.microbatch};
  using Sched = std::pair<Schedule, int>;

  Plan base = f;
  base.given.clear();
  if (f.was_given("precision")) base.given.push_back("precision");
  std::vector<Plan> plans = {base};
  plans = extend(plans, [&](const Plan& p) {
    const auto tps =
        s.choices("tp", f.tp, m.has_layers() ? powers_of_two_dividing(world, max_tp) : std::vector<int>{1});
    return along(p, keep(tps, [&](int tp) { return world % tp == 0; }), [](Plan& q, int tp) { q.tp = tp; });
  });
  // pp divides what TP leaves; dp is the rest.
  plans = extend(plans, [&](const Plan& p) {
    const int rest = world / p.tp;
    const auto pps = s.choices("pp", f.pp, m.has_layers() ? divisors_up_to(rest, int(m.layers)) : std::vector<int>{1});
    const auto fits = [&](int pp) { return rest % pp == 0 && !(f.was_given("dp") && f.dp != rest / pp); };
    return along(p, keep(pps, fits), [&](Plan& q, int pp) { q.pp = pp, q.dp = rest / pp; });
  });
  plans = extend(plans, [&](const Plan& p) {
    // ZeRO needs a data-parallel group to shard over.
    const auto zeros =
        keep(s.choices("zero", f.zero, std::vector<int>{0, 1, 2, 3}), [&](int zero) { return zero == 0 || p.dp > 1; });
    return along(p, zeros, [](Plan& q, int zero) { q.zero = zero; });
  });
  plans = extend(plans, [&](const Plan& p) { return along(p, mbs, [](Plan& q, int64_t mb) { q.microbatch = mb; }); });
  plans = extend(plans, [&](const Plan& p) {
    std::vector<Sched> schedules = {{Schedule::k1F1B, 1}};
    if (p.pp > 1) schedules = {{Schedule::k1F1B, 1}, {Schedule::kInterleaved, 2}, {Schedule::kInterleaved, 4}};
    if (f.was_given("schedule"))
      schedules = {{f.schedule, f.was_given("v") ? f.v : (f.schedule == Schedule::kInterleaved ? 2 : 1)}};
    return along(p, schedules, [](Plan& q, const Sched& sv) { q.schedule = sv.first, q.v = sv.second; });
  });
  plans = extend(plans, [&](const Plan& p) {
    std::vector<Recompute> recomputes = {Recompute::kNone, Recompute::kFull};
    if (transformer) recomputes.insert(recomputes.begin() + 1, Recompute::kSelective);
    return along(p, s.choices("recompute", f.recompute, recomputes), [](Plan& q, Recompute rc) { q.recompute = rc; });
  });
  plans = extend(plans, [&](const Plan& p) {
    const auto sps = s.choices("sp", f.sequence_parallel,
                               p.tp > 1 && transformer ? std::vector<bool>{false, true} : std::vector<bool>{false});
    return along(p, sps, [](Plan& q, bool sp) { q.sequence_parallel = sp; });
  });
  return plans;
}

// The enumerated plans that are valid and whose fullest stage fits, in enumeration order;
// counts all three in `report`.
std::vector<Candidate> fitting_candidates(const Search& s, const std::vector<Plan>& plans, PlanReport& report) {
  std::vector<Candidate> fitting;
  for (const Plan& p : plans) {
    ++report.evaluated;
    const auto valid = s.make(p);
    if (!valid) continue;
    ++report.valid;
    Candidate cand = s.evaluate(*valid);
    if (!cand.worst.fits()) continue;
    ++report.fitting;
    fitting.push_back(std::move(cand));
  }
  return fitting;
}

// ---- rank: closed form for all, the walk for the best few, the simplest within the margin ----

// Orders `fitting` (the choice first) and fills report.top and report.fastest.
void rank_candidates(const Search& s, std::vector<Candidate>& fitting, PlanReport& report) {
  // Rank by the closed form, then walk the best few and re-rank them by their walked time.
  std::sort(fitting.begin(), fitting.end(),
            [](const Candidate& a, const Candidate& b) { return a.quick.step_seconds < b.quick.step_seconds; });
  auto split_key = [](const Candidate& x) {
    return std::make_tuple(split_degree(x.plan), x.plan.zero, int(x.plan.recompute), x.plan.sequence_parallel);
  };
  size_t walked = std::min<size_t>(fitting.size(), size_t(std::max(s.o.walk, s.o.top)));
  // The plan that splits least within the margin of the closed form's fastest is walked too,
  // even when many faster variants fill the walked places: it may be the choice.
  if (walked > 0 && walked < fitting.size()) {
    const double quick_limit = fitting.front().quick.step_seconds * (1 + s.o.simplicity_margin);
    size_t simplest = 0;
    for (size_t i = 1; i < fitting.size() && fitting[i].quick.step_seconds <= quick_limit; ++i)
      if (split_key(fitting[i]) < split_key(fitting[simplest])) simplest = i;
    bool walked_already = false;
    for (size_t i = 0; i < walked; ++i)
      walked_already = walked_already || split_key(fitting[i]) <= split_key(fitting[simplest]);
    if (!walked_already) {
      std::rotate(fitting.begin() + walked, fitting.begin() + simplest, fitting.begin() + simplest + 1);
      ++walked;
    }
  }
  s.walk_first(fitting, walked);
  std::stable_sort(fitting.begin(), fitting.begin() + walked,
                   [](const Candidate& a, const Candidate& b) { return a.step_seconds() < b.step_seconds(); });
  // Within the margin of the fastest, the plan that splits least is the choice.
  if (walked > 0) {
    size_t choice = 0;
    const double limit = fitting.front().step_seconds() * (1 + s.o.simplicity_margin);
    for (size_t i = 1; i < walked; ++i)
      if (fitting[i].step_seconds() <= limit && split_key(fitting[i]) < split_key(fitting[choice])) choice = i;
    if (choice != 0) {
      report.fastest = fitting.front();
      std::rotate(fitting.begin(), fitting.begin() + choice, fitting.begin() + choice + 1);
    }
  }
  report.top.assign(fitting.begin(), fitting.begin() + std::min<size_t>(fitting.size(), size_t(s.o.top)));
}

// The fitting plan that splits least: smallest model-parallel degree, then ZeRO stage, then
// recompute, then time.
std::optional<Candidate> smallest_split(const Search& s, const std::vector<Candidate>& fitting) {
  if (fitting.empty()) return std::nullopt;
  auto least = std::min_element(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
    auto key = [](const Candidate& x) {
      return std::make_tuple(split_degree(x.plan), x.plan.zero, int(x.plan.recompute), x.quick.step_seconds);
    };
    return key(a) < key(b);
  });
  Candidate out = *least;
  s.walk(out);
  return out;
}

// ---- the rule: what exceeds its budget, and the rule baseline's own choice ----

// Plain DDP over the whole world at the search's microbatch (unresolved).
Plan ddp_plan(const Search& s) {
  const Plan& f = s.o.fixed;
  Plan ddp = f;
  ddp.given.clear();
  ddp.dp = s.world, ddp.tp = 1, ddp.pp = 1, ddp.zero = 0, ddp.recompute = Recompute::kNone;
  ddp.schedule = Schedule::k1F1B, ddp.v = 1, ddp.sequence_parallel = false;
  const int64_t default_mb = s.m.default_microbatch > 0 ? s.m.default_microbatch : 1;
  ddp.microbatch = f.was_given("mb") ? f.microbatch : std::min<int64_t>(default_mb, s.o.microbatch_sizes.front());
  if (f.was_given("precision")) ddp.given.push_back("precision");
  return ddp;
}

// The seed's rule on one replica, and plain DDP's ledger when DDP is a valid plan.
void apply_rule_to(const Search& s, const Plan& ddp, PlanReport& report) {
  const auto valid = s.make(ddp);
  const Plan rule_plan_base = valid ? *valid : resolve(ddp, s.m, s.world);
  report.rule_inputs = rule_inputs(s.m, rule_plan_base, s.c);
  report.rule = apply_rule(report.rule_inputs);
  if (valid) report.ddp_ledger = worst_stage(ledger_per_stage(s.m, s.layers, *valid, s.c));
}

// Makes `p` the rule's choice when it is valid and fits; else records why not. True when it is.
bool try_rule_choice(const Search& s, const Plan& p, const std::string& name, PlanReport& report) {
  std::string why;
  const auto valid = s.make(p, &why);
  report.rule_choice_name = name;
  if (!valid) {
    report.rule_choice_problem = name + " is not a valid plan here (" + why + ")";
    return false;
  }
  Candidate cand = s.evaluate(*valid);
  if (!cand.worst.fits()) {
    report.rule_choice_problem = name + " does not fit: " + units::format_bytes(cand.worst.total_bytes()) + " of " +
                                 units::format_bytes(cand.worst.device_bytes);
    return false;
  }
  s.walk(cand);
  report.rule_choice = cand;
  report.rule_choice_problem.clear();
  return true;
}

// The rule's own choice: its first candidate, made concrete (the smallest of its kind that fits).
void choose_by_rule(const Search& s, const Plan& ddp, PlanReport& report) {
  const std::string first = report.rule.candidates.empty() ? "DDP" : report.rule.candidates.front();
  if (first == "DDP") {
    try_rule_choice(s, ddp, "DDP", report);
  } else if (first == "ZeRO sharding") {
    for (int z = 1; z <= 3; ++z) {
      Plan p = ddp;
      p.zero = z;
      if (try_rule_choice(s, p, "ZeRO-" + std::to_string(z) + " (rule: shard model state)", report)) break;
    }
  } else if (first == "tensor parallel") {
    Plan p = ddp;
    p.tp = std::min(s.c.devices_per_node, s.world);
    p.dp = 0;
    try_rule_choice(s, p, "TP " + std::to_string(p.tp) + " (rule: tensor split)", report);
  } else {
    for (int pp = 2; pp <= s.world && pp <= s.m.layers; pp *= 2) {
      Plan p = ddp;
      p.pp = pp;
      p.dp = 0;
      if (try_rule_choice(s, p, "PP " + std::to_string(pp) + " (rule: pipeline)", report)) break;
    }
  }
}

// ---- neighbours: one step along each split axis from the choice ----

// The choice against the plan with TP `tp` and PP `pp` (dp follows). The literal neighbour
// (same microbatching, ZeRO stage, recompute) may break the global batch or the memory budget
// where another variant of the same split works: then the comparison is with the fastest fitting
// plan of that split, and says which it is.
SplitComparison neighbour(const Search& s, const std::vector<Candidate>& fitting, const Candidate& best, int tp, int pp,
                          const std::string& label, const std::string& stop) {
  Plan p = best.plan;
  p.tp = tp, p.pp = pp, p.dp = 0;
  if (pp == 1) p.schedule = Schedule::k1F1B, p.v = 1;
  if (tp == 1) p.sequence_parallel = false;
  SplitComparison cmp = compare(s, best, p, label, stop);
  if (cmp.possible) return cmp;
  const auto alt = std::find_if(fitting.begin(), fitting.end(),
                                [&](const Candidate& x) { return x.plan.tp == tp && x.plan.pp == pp; });
  if (alt == fitting.end()) return cmp;
  const Plan& a = alt->plan;
  const std::string variant = "mb " + std::to_string(a.microbatch) + " x" + std::to_string(a.microbatches) + ", ZeRO-" +
                              std::to_string(a.zero) + ", recompute " + std::string(to_string(a.recompute));
  SplitComparison other = compare(s, best, a, label + " (its fastest fitting variant: " + variant + ")", stop);
  if (!other.possible) return cmp;
  other.label = label;
  return other;
}

// TP and PP doubled (when dp leaves room) and halved (when split), in that order.
std::vector<SplitComparison> neighbours_of(const Search& s, const std::vector<Candidate>& fitting,
                                           const Candidate& best) {
  const Plan& b = best.plan;
  const std::string tp = std::to_string(b.tp), pp = std::to_string(b.pp);
  std::vector<SplitComparison> out;
  if (s.world / (b.tp * b.pp) >= 2) {
    out.push_back(
        neighbour(s, fitting, best, b.tp * 2, b.pp, "TP " + tp + "->" + std::to_string(b.tp * 2), "stop at TP " + tp));
    out.push_back(
        neighbour(s, fitting, best, b.tp, b.pp * 2, "PP " + pp + "->" + std::to_string(b.pp * 2), "stop at PP " + pp));
  }
  if (b.tp > 1)
    out.push_back(
        neighbour(s, fitting, best, b.tp / 2, b.pp, "TP " + tp + "->" + std::to_string(b.tp / 2), "keep TP " + tp));
  if (b.pp > 1)
    out.push_back(
        neighbour(s, fitting, best, b.tp, b.pp / 2, "PP " + pp + "->" + std::to_string(b.pp / 2), "keep PP " + pp));
  return out;
}

// ---- explain: the choice in the seed's four steps ----

std::string what_cannot_fit(const PlanReport& report) {
  if (report.ddp_ledger && report.ddp_ledger->fits())
    return "1. What cannot fit: nothing. A full replica needs " +
           units::format_bytes(report.ddp_ledger->total_bytes()) + " of " +
           units::format_bytes(report.ddp_ledger->device_bytes) + " per device, so plain DDP is possible.";
  const RuleInputs& in = report.rule_inputs;
  const double need = report.ddp_ledger ? report.ddp_ledger->total_bytes() : report.rule.replica_bytes;
  return "1. What cannot fit: " + report.rule.blocker + ". A full replica needs " + units::format_bytes(need) +
         " (parameters " + units::format_bytes(in.params_bytes) + ", gradients " + units::format_bytes(in.grads_bytes) +
         ", optimizer state " + units::format_bytes(in.optimizer_bytes) + ", activations " +
         units::format_bytes(in.activations_bytes) + ") but a device holds " + units::format_bytes(in.device_bytes) +
         ".";
}

std::string smallest_split_line(const PlanReport& report) {
  if (report.smallest_split)
    return "2. The smallest split that fits: " + report.smallest_split->plan.short_name() + " (" +
           secs(report.smallest_split->step_seconds()) + " per step).";
  return "2. No plan fits " + std::to_string(report.world) + " devices at global batch " +
         std::to_string(report.global_batch) + ": add devices, shrink the batch or the model.";
}

std::string choice_line(const PlanReport& report, double margin) {
  const Candidate& best = report.top.front();
  if (!report.fastest)
    return "3. The fastest plan that fits: " + best.plan.short_name() + " at " + secs(best.step_seconds()) +
           " per step (" + std::to_string(report.fitting) + " of " + std::to_string(report.valid) +
           " valid plans fit).";
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "3. The choice: %s at %s per step. %s is %.1f%% faster but splits more; within the model's %.0f%% "
                "margin the smaller split wins (%lld of %lld valid plans fit).",
                best.plan.short_name().c_str(), secs(best.step_seconds()).c_str(),
                report.fastest->plan.short_name().c_str(),
                100 * (best.step_seconds() / report.fastest->step_seconds() - 1), 100 * margin,
                (long long)report.fitting, (long long)report.valid);
  return buf;
}

std::string rule_vs_model_line(const PlanReport& report) {
  if (!report.rule_choice || report.top.empty())
    return "4. Rule vs model: the rule's choice: " + report.rule_choice_problem + ".";
  const std::string model_choice = report.top.front().plan.short_name();
  if (report.rule_choice->plan.short_name() == model_choice)
    return "4. Rule vs model: they agree on " + model_choice + ".";
  const double ratio = report.rule_choice->step_seconds() / report.top.front().step_seconds();
  char buf[256];
  std::snprintf(buf, sizeof buf, "4. Rule vs model: the rule picks %s at %s per step; the model's choice is %.2fx %s.",
                report.rule_choice_name.c_str(), secs(report.rule_choice->step_seconds()).c_str(),
                ratio >= 1 ? ratio : 1 / ratio, ratio >= 1 ? "faster" : "slower");
  return buf;
}

// Where more ranks share a host than it has cores and the choice splits the layers (tensor or
// pipeline parallelism), what the price leaves out: its ranks meet at every block or hand-off, and
// a partner that waits for a core holds the meeting up. Empty elsewhere.
std::string shared_cores_line(const PlanReport& report, const ClusterSpec& c) {
  if (report.top.empty() || !c.shares_cores() || c.devices_per_node <= c.cores_per_node) return "";
  const Plan& p = report.top.front().plan;
  if (p.tp == 1 && p.pp == 1) return "";
  return "5. Shared cores: " + std::to_string(c.devices_per_node) + " ranks on " + std::to_string(c.cores_per_node) +
         " cores, and " + p.short_name() +
         "'s ranks meet at every block or hand-off, where a partner may be waiting for a core; this price leaves "
         "those waits out (measured on a 2-core VM with 4 ranks: tensor and pipeline plans ran up to 1.5x their "
         "price, data-parallel ones at or under theirs). On a calibrated cpu-local `parlab plan` prices the "
         "candidates again on profiles of their own rank shapes, which hold those waits; an experiment of kind "
         "\"decide\" also trains them.";
}

std::vector<std::string> explain(const PlanReport& report, const ClusterSpec& c, double margin) {
  std::vector<std::string> ex = {what_cannot_fit(report), smallest_split_line(report)};
  if (!report.top.empty()) {
    ex.push_back(choice_line(report, margin));
    for (const auto& n : report.neighbours) ex.push_back("   " + n.sentence + ".");
  }
  ex.push_back(rule_vs_model_line(report));
  if (std::string shared = shared_cores_line(report, c); !shared.empty()) ex.push_back(std::move(shared));
  return ex;
}

}  // namespace

PlanReport search_plans(const ModelSpec& m, const ClusterSpec& c, const PlannerOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanReport report;
  report.world = c.devices();
  // Not set: the plan policy's batch for the world as one data-parallel group (resolve()).
  report.global_batch = o.global_batch > 0         ? o.global_batch
                        : o.fixed.global_batch > 0 ? o.fixed.global_batch
                                                   : default_global_batch(m, report.world, 1, o.fixed.microbatch);
  const Search s{m, c, o, m.layer_list(), report.world, report.global_batch, {}};

  std::vector<Candidate> fitting = fitting_candidates(s, enumerate_plans(s), report);
  rank_candidates(s, fitting, report);
  report.smallest_split = smallest_split(s, fitting);
  const Plan ddp = ddp_plan(s);
  apply_rule_to(s, ddp, report);
  choose_by_rule(s, ddp, report);
  if (!report.top.empty()) report.neighbours = neighbours_of(s, fitting, report.top.front());
  report.explanation = explain(report, c, o.simplicity_margin);
  report.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace parlab::strategy
