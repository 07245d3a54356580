#include "experiments/lib/spec.h"

#include <cstdint>
#include <fstream>
#include <sstream>

#include "runtime/launch/detectors.h"
#include "runtime/launch/faults.h"
#include "base/errors.h"
#include "strategy/toml_reader.h"

namespace parlab::experiments {
namespace {

using strategy::TableReader;

// Counts (workers, steps, trials) are ints; a bigger value would wrap when narrowed.
constexpr int64_t kMaxCount = 1 << 30;

std::vector<int> int_list(TableReader& r, std::string_view key, std::vector<int> fallback) {
  const toml::node* n = r.find(key);
  if (!n) return fallback;
  const toml::array* a = n->as_array();
  if (!a || a->empty()) r.fail(key, TableReader::describe(*n), "must be a non-empty array of integers, e.g. [1, 2, 4]");
  std::vector<int> out;
  for (const auto& e : *a) {
    auto v = e.value_exact<int64_t>();
    if (!v || *v < 1 || *v > kMaxCount)
      r.fail(key, TableReader::describe(e), "must hold integers from 1 to " + std::to_string(kMaxCount));
    out.push_back(int(*v));
  }
  return out;
}

std::vector<Source> source_list(TableReader& r, std::string_view key, std::vector<Source> fallback) {
  const toml::node* n = r.find(key);
  if (!n) return fallback;
  const toml::array* a = n->as_array();
  if (!a || a->empty())
    r.fail(key, TableReader::describe(*n), "must be a non-empty array of \"analytic\", \"simulated\", \"measured\"");
  std::vector<Source> out;
  for (const auto& e : *a) {
    auto v = e.value_exact<std::string>();
    if (v && *v == "analytic")
      out.push_back(Source::kAnalytic);
    else if (v && *v == "simulated")
      out.push_back(Source::kSimulated);
    else if (v && *v == "measured")
      out.push_back(Source::kMeasured);
    else
      r.fail(key, TableReader::describe(e), "each entry must be \"analytic\", \"simulated\" or \"measured\"");
  }
  return out;
}

int positive_int(TableReader& r, std::string_view key, int fallback) {
  const auto v = r.integer(key);
  if (!v) return fallback;
  if (*v < 1 || *v > kMaxCount)
    r.fail(key, std::to_string(*v), "must be an integer from 1 to " + std::to_string(kMaxCount));
  return int(*v);
}

double non_negative(TableReader& r, std::string_view key, double fallback) {
  const auto v = r.number(key);
  if (!v) return fallback;
  if (!(*v >= 0)) r.fail(key, std::to_string(*v), "must be >= 0");
  return *v;
}

double positive(TableReader& r, std::string_view key, double fallback) {
  const auto v = r.number(key);
  if (!v) return fallback;
  if (!(*v > 0)) r.fail(key, std::to_string(*v), "must be > 0");
  return *v;
}

// `seed`: any non-negative 64-bit integer (a negative one would wrap to 2^64 - 1); 1 when absent.
uint64_t seed_key(TableReader& r) { return uint64_t(r.integer("seed", 0, INT64_MAX).value_or(1)); }

// `key` = a non-empty array of plan strings, appended to `plans`; absent: `plans` unchanged.
void plan_list(TableReader& r, std::string_view key, std::vector<std::string>& plans) {
  const toml::node* n = r.find(key);
  if (!n) return;
  const toml::array* a = n->as_array();
  if (!a || a->empty()) r.fail(key, TableReader::describe(*n), "must be a non-empty array of plan strings");
  plans.clear();
  for (const auto& e : *a) {
    const auto v = e.value_exact<std::string>();
    if (!v) r.fail(key, TableReader::describe(e), "each entry must be a plan string, e.g. \"zero=3\"");
    plans.push_back(*v);
  }
}

// The keys every training drill shares, in the order they are checked: model, plan, nproc (at
// least `min_nproc`, else `why`), steps.
template <class Task>
void read_training_keys(TableReader& r, Task& t, int min_nproc = 1, const char* why = "") {
  t.model = r.string("model").value_or(t.model);
  t.plan = r.string("plan").value_or("");
  t.nproc = positive_int(r, "nproc", t.nproc);
  if (t.nproc < min_nproc) r.fail("nproc", std::to_string(t.nproc), why);
  t.steps = positive_int(r, "steps", t.steps);
}

LedgerTask parse_ledger(TableReader& r) {
  LedgerTask t;
  auto required = [&](std::string_view key) {
    // At most 1e12 GB: 1e308 would make the replica "inf GB" and still be recorded as a result.
    const auto v = r.number(key, 0, 1e12, false);
    if (!v) r.fail(key, "(missing)", "required (GB)");
    return *v;
  };
  t.params_gb = required("params_gb");
  t.grads_gb = required("grads_gb");
  t.optimizer_gb = required("optimizer_gb");
  t.activations_gb = required("activations_gb");
  t.largest_layer_gb = required("largest_layer_gb");
  t.device_gb = required("device_gb");
  if (!(t.device_gb > 0)) r.fail("device_gb", std::to_string(t.device_gb), "must be > 0");
  return t;
}

ScalingTask parse_scaling(TableReader& r) {
  ScalingTask t;
  t.model = r.string("model").value_or(t.model);
  t.cluster = r.string("cluster").value_or(t.cluster);
  t.plan = r.string("plan").value_or("");
  t.workers = int_list(r, "workers", t.workers);
  t.steps = positive_int(r, "steps", t.steps);
  t.sources = source_list(r, "sources", t.sources);
  t.seed = seed_key(r);
  t.rounds = int(r.integer("rounds", 1, 20).value_or(t.rounds));
  return t;
}

ScalingLabTask parse_scaling_lab(TableReader& r) {
  ScalingLabTask t;
  auto& in = t.inputs;
  in.compute_seconds = positive(r, "compute_ms", in.compute_seconds * 1e3) / 1e3;
  in.overhead_seconds = non_negative(r, "overhead_ms", in.overhead_seconds * 1e3) / 1e3;
  in.bytes = non_negative(r, "bytes", in.bytes);
  in.link_bytes_per_s = positive(r, "link_gb_per_s", in.link_bytes_per_s / 1e9) * 1e9;
  in.latency_seconds = non_negative(r, "latency_us", in.latency_seconds * 1e6) / 1e6;
  in.straggler_fraction = non_negative(r, "straggler", in.straggler_fraction);
  in.workers = int_list(r, "workers", in.workers);
  return t;
}

// `device = "cpu" | "cuda"`: where the measured runs train (parlab train --device).
std::string device_key(TableReader& r) {
  const std::string d = r.string("device").value_or("cpu");
  if (d != "cpu" && d != "cuda") r.fail("device", "\"" + d + "\"", "one of \"cpu\", \"cuda\"");
  return d;
}

EquivalenceTask parse_equivalence(TableReader& r) {
  EquivalenceTask t;
  t.model = r.string("model").value_or(t.model);
  t.plan = r.string("plan").value_or("");
  plan_list(r, "plans", t.plans);
  t.workers = int_list(r, "workers", t.workers);
  t.steps = positive_int(r, "steps", t.steps);
  t.tolerance = positive(r, "tolerance", t.tolerance);
  t.data_size = r.integer("data_size").value_or(0);
  if (t.data_size < 0) r.fail("data_size", std::to_string(t.data_size), "must be >= 0 (0: automatic)");
  t.seed = seed_key(r);
  t.device = device_key(r);
  if (t.workers.front() != 1) r.fail("workers", std::to_string(t.workers.front()), "must start with 1 (the reference)");
  return t;
}

SplitsTask parse_splits(TableReader& r) {
  SplitsTask t;
  t.model = r.string("model").value_or(t.model);
  t.cluster = r.string("cluster").value_or(t.cluster);
  t.workers = positive_int(r, "workers", t.workers);
  plan_list(r, "plans", t.plans);
  t.steps = positive_int(r, "steps", t.steps);
  t.sources = source_list(r, "sources", t.sources);
  t.seed = seed_key(r);
  t.rounds = int(r.integer("rounds", 1, 20).value_or(t.rounds));
  return t;
}

DecideTask parse_decide(TableReader& r) {
  DecideTask t;
  t.model = r.string("model").value_or(t.model);
  t.cluster = r.string("cluster").value_or(t.cluster);
  // Its candidates are trained here, so the cluster they are priced on must be this machine.
  const bool path_like = t.cluster.find('/') != std::string::npos || t.cluster.ends_with(".toml");
  if (!path_like && t.cluster != "cpu-local")
    r.fail("cluster", "\"" + t.cluster + "\"",
           "\"cpu-local\" or a cluster file describing this machine (the candidates are trained here)");
  t.workers = positive_int(r, "workers", t.workers);
  if (t.workers < 2)
    r.fail("workers", std::to_string(t.workers), "must be at least 2: one worker has no split to choose");
  t.global_batch = r.integer("gbs", 1, kMaxCount).value_or(0);
  t.top = int(r.integer("top", 1, 16).value_or(t.top));
  t.steps = positive_int(r, "steps", t.steps);
  t.seed = seed_key(r);
  t.rounds = int(r.integer("rounds", 1, 20).value_or(t.rounds));
  return t;
}

KillResumeTask parse_kill_resume(TableReader& r) {
  KillResumeTask t;
  read_training_keys(r, t);
  t.trials = positive_int(r, "trials", t.trials);
  t.checkpoint_every = positive_int(r, "checkpoint_every", t.checkpoint_every);
  t.seed = seed_key(r);
  t.device = device_key(r);
  return t;
}

PlannerTask parse_planner(TableReader& r) {
  PlannerTask t;
  t.model = r.string("model").value_or(t.model);
  t.cluster = r.string("cluster").value_or(t.cluster);
  t.world = positive_int(r, "world", t.world);
  t.global_batch = positive_int(r, "gbs", int(t.global_batch));
  t.top = positive_int(r, "top", t.top);
  t.simulate_top = int(r.integer("simulate_top").value_or(0));
  if (t.simulate_top < 0) r.fail("simulate_top", std::to_string(t.simulate_top), "must be >= 0");
  return t;
}

HangDrillTask parse_hang_drill(TableReader& r) {
  HangDrillTask t;
  read_training_keys(r, t, 2, "must be at least 2: a hang needs a rank to wait for another");
  t.checkpoint_every = positive_int(r, "checkpoint_every", t.checkpoint_every);
  t.fault = r.string("fault").value_or(t.fault);
  // Checked here, before anything runs: a hang drill needs a rank that hangs the others.
  launch::FaultSpec fault;
  try {
    fault = launch::parse_fault(t.fault);
  } catch (const ConfigError& e) {
    r.fail("fault", t.fault, e.allowed());
  }
  if (fault.kind != launch::FaultKind::kSkipAllReduce && fault.kind != launch::FaultKind::kHang)
    r.fail("fault", t.fault, "must be a skip-allreduce or hang fault (launch/faults.h)");
  if (fault.rank >= t.nproc) r.fail("fault", t.fault, "names a rank outside [0, nproc)");
  t.timeout_seconds = positive(r, "timeout_seconds", t.timeout_seconds);
  t.max_same_failure = positive_int(r, "max_same_failure", t.max_same_failure);
  t.fallback = r.string("fallback").value_or(t.fallback);
  try {
    launch::parse_fallback(t.fallback);
  } catch (const ConfigError& e) {
    r.fail("fallback", t.fallback, e.allowed());
  }
  t.seed = seed_key(r);
  return t;
}

ElasticTask parse_elastic(TableReader& r) {
  ElasticTask t;
  read_training_keys(r, t, 2, "must be at least 2 to lose a rank");
  t.checkpoint_every = positive_int(r, "checkpoint_every", t.checkpoint_every);
  t.lose_rank = int(r.integer("lose_rank").value_or(t.lose_rank));
  if (t.lose_rank < 0 || t.lose_rank >= t.nproc)
    r.fail("lose_rank", std::to_string(t.lose_rank), "must be a rank in [0, nproc)");
  t.lose_step = positive_int(r, "lose_step", t.lose_step);
  if (t.lose_step >= t.steps)
    r.fail("lose_step", std::to_string(t.lose_step), "must be below steps (the job must go on after it)");
  t.seed = seed_key(r);
  return t;
}

struct Kind {
  const char* name;
  const char* keys;
  Task (*parse)(TableReader&);
};

const Kind kKinds[] = {
    {"ledger", "params_gb, grads_gb, optimizer_gb, activations_gb, largest_layer_gb, device_gb",
     [](TableReader& r) -> Task { return parse_ledger(r); }},
    {"scaling", "model, cluster, plan, workers, steps, sources, seed, rounds",
     [](TableReader& r) -> Task { return parse_scaling(r); }},
    {"scaling_lab", "compute_ms, overhead_ms, bytes, link_gb_per_s, latency_us, straggler, workers",
     [](TableReader& r) -> Task { return parse_scaling_lab(r); }},
    {"equivalence", "model, plan, plans, workers, steps, tolerance, data_size, seed, device",
     [](TableReader& r) -> Task { return parse_equivalence(r); }},
    {"kill_resume", "model, plan, nproc, steps, trials, checkpoint_every, seed, device",
     [](TableReader& r) -> Task { return parse_kill_resume(r); }},
    {"planner", "model, cluster, world, gbs, top, simulate_top",
     [](TableReader& r) -> Task { return parse_planner(r); }},
    {"splits", "model, cluster, workers, plans, steps, sources, seed, rounds",
     [](TableReader& r) -> Task { return parse_splits(r); }},
    {"decide", "model, cluster, workers, gbs, top, steps, seed, rounds",
     [](TableReader& r) -> Task { return parse_decide(r); }},
    {"hang_drill",
     "model, plan, nproc, steps, checkpoint_every, fault, timeout_seconds, max_same_failure, fallback, seed",
     [](TableReader& r) -> Task { return parse_hang_drill(r); }},
    {"elastic", "model, plan, nproc, steps, checkpoint_every, lose_rank, lose_step, seed",
     [](TableReader& r) -> Task { return parse_elastic(r); }},
};

}  // namespace

std::string_view to_string(Source s) {
  switch (s) {
    case Source::kAnalytic:
      return "analytic";
    case Source::kSimulated:
      return "simulated";
    case Source::kMeasured:
      return "measured";
  }
  return "?";
}

std::string experiment_kinds() {
  std::string out;
  for (const auto& k : kKinds) out += std::string(out.empty() ? "" : "; ") + k.name + " [" + k.keys + "]";
  return out;
}

ExperimentSpec parse_experiment(std::string_view text, const std::string& source) {
  const toml::table root = strategy::parse_toml(text, source);
  TableReader r(root, source, "");
  ExperimentSpec spec;
  spec.file = source;
  spec.name = r.string("name").value_or(std::filesystem::path(source).stem().string());
  if (spec.name.empty()) r.fail("name", "(empty)", "must name the experiment");
  spec.title = r.string("title").value_or(spec.name);
  spec.notice = r.string("notice").value_or("");
  const auto kind = r.string("kind");
  std::string names;
  for (const auto& k : kKinds) names += std::string(names.empty() ? "" : ", ") + k.name;
  if (!kind) r.fail("kind", "(missing)", "one of " + names);
  for (const auto& k : kKinds) {
    if (*kind != k.name) continue;
    spec.kind = k.name;
    const toml::table* t = r.table(k.name);
    static const toml::table empty;
    TableReader kr(t ? *t : empty, source, std::string(k.name) + ".");
    spec.task = k.parse(kr);
    kr.reject_unknown(k.keys);  // every kind's keys are listed once, in kKinds
    r.reject_unknown(std::string("name, title, notice, kind, [") + k.name + "]");
    return spec;
  }
  r.fail("kind", *kind, "one of " + names);
}

ExperimentSpec load_experiment(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("experiment", path.string(), "cannot be read (no such file?)");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_experiment(text.str(), path.string());
}

}  // namespace parlab::experiments
