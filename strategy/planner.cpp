#include "strategy/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "strategy/errors.h"
#include "strategy/units.h"

namespace parlab::strategy {
namespace {

std::string secs(double s) { return units::format_seconds(s); }

double stage_params_held(const std::vector<LayerSpec>& layers, const std::vector<LayerRange>& chunks, int tp) {
  double n = 0;
  for (const auto& r : chunks)
    for (int i = r.begin; i < r.end; ++i)
      for (const auto& t : layers[i].params) n += t.tp_split == TpSplit::kReplicated ? double(t.numel) : double(t.numel) / tp;
  return n;
}

}  // namespace

QuickEstimate quick_estimate(const ModelSpec& m, const std::vector<LayerSpec>& layers, const Plan& p,
                             const ClusterSpec& c) {
  QuickEstimate q;
  const double rate = rank_flops_per_s(c, p);
  const double tp_bytes = tp_collective_bytes(m, p);
  // One TP collective (an all-reduce, or a reduce-scatter plus an all-gather under SP).
  double t_tp = 0;
  if (p.tp > 1) {
    const auto g = tp_group(p, 0);
    t_tp = p.sequence_parallel ? collective_time(CollectiveOp::kReduceScatter, tp_bytes, g, c).seconds +
                                     collective_time(CollectiveOp::kAllGather, tp_bytes, g, c).seconds
                               : collective_time(CollectiveOp::kAllReduce, tp_bytes, g, c).seconds;
  }
  // The slowest stage sets the pipeline's pace.
  double slot = 0, slot_compute = 0, slot_tp = 0, tb_slow = 0, tf_slow = 0, held = 0;
  int slow_stage = 0;
  for (int s = 0; s < p.pp; ++s) {
    const auto chunks = stage_chunks(layers, p, s);
    double tf = 0, tb = 0;
    int count = 0;
    for (const auto& r : chunks) {
      tf += forward_flops(m, layers, p, r) / rate;
      tb += backward_flops(m, layers, p, r) / rate;
      if (p.tp > 1)
        for (int i = r.begin; i < r.end; ++i) count += layers[i].tp_collectives_forward + layers[i].tp_collectives_backward;
    }
    const double t = tf + tb + count * t_tp;
    if (t > slot) {
      slot = t, slot_compute = tf + tb, slot_tp = count * t_tp, tb_slow = tb, tf_slow = tf, slow_stage = s;
      held = stage_params_held(layers, chunks, p.tp);
    }
  }
  const double mcount = double(p.microbatches);
  q.compute_seconds = mcount * slot_compute;
  q.tp_comm_seconds = mcount * slot_tp;
  if (p.pp > 1) {
    const double p2p = p2p_time(boundary_activation_bytes(m, p), 0, rank_of(p, {0, 0, 1}), c);
    q.bubble_seconds = (p.pp - 1) * slot / p.v + 2 * (p.pp - 1) * p2p;
  }
  // Data parallelism on the slowest stage.
  if (p.dp > 1) {
    const auto g = dp_group(p, rank_of(p, {0, 0, slow_stage}));
    const double grad_bytes = held * grad_bytes_per_element(p);
    const int buckets = std::max(1, int(std::ceil(grad_bytes / p.bucket_bytes)));
    const CollectiveOp op = p.zero == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kReduceScatter;
    const double sync = buckets * collective_time(op, grad_bytes / buckets, g, c).seconds;
    const double window = tb_slow * (buckets - 1) / buckets;
    double exposed = std::max(sync / buckets, sync - window);
    if (p.zero >= 2) exposed *= mcount;  // gradients reduce-scattered after every microbatch
    if (p.zero == 1 || p.zero == 2)
      exposed += buckets * collective_time(CollectiveOp::kAllGather, held * param_bytes_per_element(p) / buckets, g, c).seconds;
    if (p.zero == 3) {
      // Blocks repeat: price each distinct layer size once.
      double gathers = 0, last_n = -1, last_t = 0;
      for (const auto& r : stage_chunks(layers, p, slow_stage))
        for (int i = r.begin; i < r.end; ++i) {
          double n = 0;
          for (const auto& t : layers[i].params) n += t.tp_split == TpSplit::kReplicated ? double(t.numel) : double(t.numel) / p.tp;
          if (n != last_n) last_n = n, last_t = collective_time(CollectiveOp::kAllGather, n * param_bytes_per_element(p), g, c).seconds;
          gathers += 2 * last_t;
        }
      exposed += mcount * std::max(0.0, gathers - (tf_slow + tb_slow));
    }
    q.dp_exposed_seconds = exposed;
  }
  Op opt;
  opt.kind = OpKind::kOptimizer;
  const double shard = p.zero >= 1 ? held / p.dp : held;
  opt.flops = shard * optimizer_flops_per_param(p);
  opt.memory_bytes = shard * optimizer_traffic_bytes_per_param(p);
  q.optimizer_seconds = compute_time(opt, c, p);
  q.step_seconds = q.compute_seconds + q.tp_comm_seconds + q.bubble_seconds + q.dp_exposed_seconds + q.optimizer_seconds;
  return q;
}

namespace {

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

  void walk(Candidate& cand) const {
    if (!cand.walked) cand.walked = estimate_step(m, cand.plan, c, /*detail=*/false);
  }

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
                   units::format_bytes(other.worst.total_bytes()) + " of " + units::format_bytes(other.worst.device_bytes);
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
      same_compute ? std::string("saves no compute (the world is fixed: DP shrinks as the split grows, so each rank "
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

}  // namespace

PlanReport search_plans(const ModelSpec& m, const ClusterSpec& c, const PlannerOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanReport report;
  report.world = c.devices();
  const int64_t default_mb = m.default_microbatch > 0 ? m.default_microbatch : 1;
  report.global_batch = o.global_batch > 0 ? o.global_batch
                        : o.fixed.global_batch > 0 ? o.fixed.global_batch
                                                   : int64_t(report.world) * default_mb;
  Search s{m, c, o, m.layer_list(), report.world, report.global_batch};

  const Plan& f = o.fixed;
  const int max_tp = o.max_tp > 0 ? o.max_tp : 2 * c.devices_per_node;
  const bool transformer = m.kind == ModelKind::kTransformer;
  const auto tps = s.choices("tp", f.tp, m.has_layers() ? powers_of_two_dividing(report.world, max_tp) : std::vector<int>{1});
  std::vector<int64_t> mbs = o.microbatch_sizes;
  if (f.was_given("mb")) mbs = {f.microbatch};
  std::vector<Candidate> fitting;
  for (int tp : tps) {
    const int rest = report.world / tp;
    if (report.world % tp) continue;
    const auto pps = s.choices("pp", f.pp, m.has_layers() ? divisors_up_to(rest, int(m.layers)) : std::vector<int>{1});
    for (int pp : pps) {
      if (rest % pp) continue;
      const int dp = rest / pp;
      if (f.was_given("dp") && f.dp != dp) continue;
      for (int zero : s.choices("zero", f.zero, std::vector<int>{0, 1, 2, 3})) {
        if (zero > 0 && dp == 1) continue;  // nothing to shard over
        for (int64_t mb : mbs) {
          std::vector<std::pair<Schedule, int>> schedules = {{Schedule::k1F1B, 1}};
          if (pp > 1) schedules = {{Schedule::k1F1B, 1}, {Schedule::kInterleaved, 2}, {Schedule::kInterleaved, 4}};
          if (f.was_given("schedule")) schedules = {{f.schedule, f.was_given("v") ? f.v : (f.schedule == Schedule::kInterleaved ? 2 : 1)}};
          for (const auto& [sched, v] : schedules) {
            std::vector<Recompute> recomputes = {Recompute::kNone, Recompute::kFull};
            if (transformer) recomputes.insert(recomputes.begin() + 1, Recompute::kSelective);
            for (Recompute rc : s.choices("recompute", f.recompute, recomputes)) {
              for (bool sp : s.choices("sp", f.sequence_parallel, tp > 1 && transformer ? std::vector<bool>{false, true} : std::vector<bool>{false})) {
                Plan p = f;
                p.given.clear();
                p.dp = dp, p.tp = tp, p.pp = pp, p.zero = zero, p.microbatch = mb;
                p.schedule = sched, p.v = v, p.recompute = rc, p.sequence_parallel = sp;
                if (f.was_given("precision")) p.given.push_back("precision");
                ++report.evaluated;
                const auto valid = s.make(p);
                if (!valid) continue;
                ++report.valid;
                Candidate cand = s.evaluate(*valid);
                if (!cand.worst.fits()) continue;
                ++report.fitting;
                fitting.push_back(std::move(cand));
              }
            }
          }
        }
      }
    }
  }

  // Rank by the closed form, then walk the best few and re-rank them by their walked time.
  std::sort(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
    return a.quick.step_seconds < b.quick.step_seconds;
  });
  const size_t walked = std::min<size_t>(fitting.size(), size_t(std::max(o.walk, o.top)));
  for (size_t i = 0; i < walked; ++i) s.walk(fitting[i]);
  std::stable_sort(fitting.begin(), fitting.begin() + walked, [](const Candidate& a, const Candidate& b) {
    return a.step_seconds() < b.step_seconds();
  });
  // Within the margin of the fastest, the plan that splits least is the choice.
  auto split_key = [](const Candidate& x) {
    return std::make_tuple(split_degree(x.plan), x.plan.zero, int(x.plan.recompute), x.plan.sequence_parallel);
  };
  if (walked > 0) {
    size_t choice = 0;
    const double limit = fitting.front().step_seconds() * (1 + o.simplicity_margin);
    for (size_t i = 1; i < walked; ++i)
      if (fitting[i].step_seconds() <= limit && split_key(fitting[i]) < split_key(fitting[choice])) choice = i;
    if (choice != 0) {
      report.fastest = fitting.front();
      std::rotate(fitting.begin(), fitting.begin() + choice, fitting.begin() + choice + 1);
    }
  }
  report.top.assign(fitting.begin(), fitting.begin() + std::min<size_t>(fitting.size(), size_t(o.top)));

  // The fitting plan that splits least: smallest model-parallel degree, then ZeRO stage, then
  // recompute, then time.
  if (!fitting.empty()) {
    auto least = std::min_element(fitting.begin(), fitting.end(), [](const Candidate& a, const Candidate& b) {
      auto key = [](const Candidate& x) {
        return std::make_tuple(split_degree(x.plan), x.plan.zero, int(x.plan.recompute), x.quick.step_seconds);
      };
      return key(a) < key(b);
    });
    report.smallest_split = *least;
    s.walk(*report.smallest_split);
  }

  // What exceeds its budget: the rule on one replica, and plain DDP's ledger.
  Plan ddp = f;
  ddp.given.clear();
  ddp.dp = report.world, ddp.tp = 1, ddp.pp = 1, ddp.zero = 0, ddp.recompute = Recompute::kNone;
  ddp.schedule = Schedule::k1F1B, ddp.v = 1, ddp.sequence_parallel = false;
  ddp.microbatch = f.was_given("mb") ? f.microbatch : std::min<int64_t>(default_mb, mbs.front());
  if (f.was_given("precision")) ddp.given.push_back("precision");
  const auto ddp_plan = s.make(ddp);
  const Plan rule_plan_base = ddp_plan ? *ddp_plan : resolve(ddp, m, report.world);
  report.rule_inputs = rule_inputs(m, rule_plan_base, c);
  report.rule = apply_rule(report.rule_inputs);
  if (ddp_plan) report.ddp_ledger = worst_stage(ledger_per_stage(m, s.layers, *ddp_plan, c));

  // The rule's own choice: its first candidate, made concrete.
  auto try_rule = [&](Plan p, const std::string& name) -> bool {
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
  };
  const std::string first = report.rule.candidates.empty() ? "DDP" : report.rule.candidates.front();
  if (first == "DDP") {
    try_rule(ddp, "DDP");
  } else if (first == "ZeRO sharding") {
    for (int z = 1; z <= 3; ++z) {
      Plan p = ddp;
      p.zero = z;
      if (try_rule(p, "ZeRO-" + std::to_string(z) + " (rule: shard model state)")) break;
    }
  } else if (first == "tensor parallel") {
    Plan p = ddp;
    p.tp = std::min(c.devices_per_node, report.world);
    p.dp = 0;
    try_rule(p, "TP " + std::to_string(p.tp) + " (rule: tensor split)");
  } else {
    for (int pp = 2; pp <= report.world && pp <= m.layers; pp *= 2) {
      Plan p = ddp;
      p.pp = pp;
      p.dp = 0;
      if (try_rule(p, "PP " + std::to_string(pp) + " (rule: pipeline)")) break;
    }
  }

  // Neighbours of the choice along each axis.
  if (!report.top.empty()) {
    const Candidate& best = report.top.front();
    const Plan& b = best.plan;
    auto neighbour = [&](int tp, int pp, const std::string& label, const std::string& stop) {
      Plan p = b;
      p.tp = tp, p.pp = pp, p.dp = 0;
      if (pp == 1) p.schedule = Schedule::k1F1B, p.v = 1;
      if (tp == 1) p.sequence_parallel = false;
      SplitComparison cmp = compare(s, best, p, label, stop);
      if (!cmp.possible) {
        // The literal neighbour (same microbatching, ZeRO stage, recompute) may break the global
        // batch or the memory budget where another variant of the same split works: compare
        // with the fastest fitting plan of that split instead, and say which it is.
        const auto alt = std::find_if(fitting.begin(), fitting.end(), [&](const Candidate& x) {
          return x.plan.tp == tp && x.plan.pp == pp;
        });
        if (alt != fitting.end()) {
          const Plan& a = alt->plan;
          const std::string variant = "mb " + std::to_string(a.microbatch) + " x" + std::to_string(a.microbatches) +
                                      ", ZeRO-" + std::to_string(a.zero) + ", recompute " + std::string(to_string(a.recompute));
          SplitComparison other = compare(s, best, a, label + " (its fastest fitting variant: " + variant + ")", stop);
          if (other.possible) {
            other.label = label;
            cmp = other;
          }
        }
      }
      report.neighbours.push_back(cmp);
    };
    if (report.world / (b.tp * b.pp) >= 2) {
      neighbour(b.tp * 2, b.pp, "TP " + std::to_string(b.tp) + "->" + std::to_string(b.tp * 2), "stop at TP " + std::to_string(b.tp));
      neighbour(b.tp, b.pp * 2, "PP " + std::to_string(b.pp) + "->" + std::to_string(b.pp * 2), "stop at PP " + std::to_string(b.pp));
    }
    if (b.tp > 1) neighbour(b.tp / 2, b.pp, "TP " + std::to_string(b.tp) + "->" + std::to_string(b.tp / 2), "keep TP " + std::to_string(b.tp));
    if (b.pp > 1) neighbour(b.tp, b.pp / 2, "PP " + std::to_string(b.pp) + "->" + std::to_string(b.pp / 2), "keep PP " + std::to_string(b.pp));
  }

  // The explanation, in the seed's steps.
  auto& ex = report.explanation;
  const RuleVerdict& r = report.rule;
  if (report.ddp_ledger && report.ddp_ledger->fits()) {
    ex.push_back("1. What cannot fit: nothing. A full replica needs " + units::format_bytes(report.ddp_ledger->total_bytes()) +
                 " of " + units::format_bytes(report.ddp_ledger->device_bytes) + " per device, so plain DDP is possible.");
  } else {
    const double need = report.ddp_ledger ? report.ddp_ledger->total_bytes() : r.replica_bytes;
    ex.push_back("1. What cannot fit: " + r.blocker + ". A full replica needs " + units::format_bytes(need) + " (parameters " +
                 units::format_bytes(report.rule_inputs.params_bytes) + ", gradients " + units::format_bytes(report.rule_inputs.grads_bytes) +
                 ", optimizer state " + units::format_bytes(report.rule_inputs.optimizer_bytes) + ", activations " +
                 units::format_bytes(report.rule_inputs.activations_bytes) + ") but a device holds " +
                 units::format_bytes(report.rule_inputs.device_bytes) + ".");
  }
  if (report.smallest_split)
    ex.push_back("2. The smallest split that fits: " + report.smallest_split->plan.short_name() + " (" +
                 secs(report.smallest_split->step_seconds()) + " per step).");
  else
    ex.push_back("2. No plan fits " + std::to_string(report.world) + " devices at global batch " +
                 std::to_string(report.global_batch) + ": add devices, shrink the batch or the model.");
  if (!report.top.empty()) {
    const Candidate& best = report.top.front();
    if (report.fastest) {
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "3. The choice: %s at %s per step. %s is %.1f%% faster but splits more; within the model's %.0f%% "
                    "margin the smaller split wins (%lld of %lld valid plans fit).",
                    best.plan.short_name().c_str(), secs(best.step_seconds()).c_str(),
                    report.fastest->plan.short_name().c_str(),
                    100 * (best.step_seconds() / report.fastest->step_seconds() - 1), 100 * o.simplicity_margin,
                    (long long)report.fitting, (long long)report.valid);
      ex.push_back(buf);
    } else {
      ex.push_back("3. The fastest plan that fits: " + best.plan.short_name() + " at " + secs(best.step_seconds()) +
                   " per step (" + std::to_string(report.fitting) + " of " + std::to_string(report.valid) + " valid plans fit).");
    }
    for (const auto& n : report.neighbours) ex.push_back("   " + n.sentence + ".");
  }
  if (report.rule_choice && !report.top.empty()) {
    const double ratio = report.rule_choice->step_seconds() / report.top.front().step_seconds();
    char buf[256];
    if (report.rule_choice->plan.short_name() == report.top.front().plan.short_name()) {
      ex.push_back("4. Rule vs model: they agree on " + report.top.front().plan.short_name() + ".");
      report.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return report;
    }
    std::snprintf(buf, sizeof buf, "4. Rule vs model: the rule picks %s at %s per step; the model's choice is %.2fx %s.",
                  report.rule_choice_name.c_str(), secs(report.rule_choice->step_seconds()).c_str(),
                  ratio >= 1 ? ratio : 1 / ratio, ratio >= 1 ? "faster" : "slower");
    ex.push_back(buf);
  } else {
    ex.push_back("4. Rule vs model: the rule's choice: " + report.rule_choice_problem + ".");
  }
  report.search_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return report;
}

}  // namespace parlab::strategy
