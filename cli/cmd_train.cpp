// parlab train: run a plan for real. `--nproc N` starts N worker processes of this binary (a
// hidden --worker mode) under a restarting supervisor (launch::run_training): progress,
// checkpoints, incidents with their restart latency, and at the end the per-rank time table and
// the Young/Daly checkpoint interval. Started by torchrun/srun (RANK or SLURM_PROCID set, no
// --nproc), the process is one worker.
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <optional>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "runtime/device/device.h"
#include "record/run_recorder.h"
#include "runtime/launch/detectors.h"
#include "runtime/launch/faults.h"
#include "runtime/launch/progress.h"
#include "runtime/launch/run_training.h"
#include "runtime/launch/supervisor.h"
#include "runtime/launch/worker.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "strategy/ledger.h"
#include "base/units.h"

namespace parlab::cli {
namespace {

// Workers on one machine: every one is a process with its own Gloo sockets and BLAS thread; past
// this many a single host only thrashes (calibration takes the same bound).
constexpr int kMaxNproc = 64;

struct TrainOptions {
  launch::TrainJobSpec spec;
  int nproc = 0;  // 0: not given
  double timeout_seconds = std::chrono::duration<double>(launch::kLabCollectiveTimeout).count();
  double heartbeat_seconds = std::chrono::duration<double>(launch::kLabHeartbeatTimeout).count();
  std::string fallback{launch::fallback_plan(launch::kDefaultFallback).flag};
  std::string trace;
  std::string db;
  std::string job_file;  // hidden: the supervisor's job for its workers
  bool worker = false;
  bool json = false;
  bool every_step = false;  // a progress line per step even when stdout is not a terminal
};

// SIGINT/SIGTERM ask the running job to stop (its workers are torn down in order).
std::atomic<bool> g_stop{false};
void on_stop_signal(int) { g_stop.store(true); }

// Installs the handlers for the job's lifetime and restores the old ones after.
class StopSignals {
 public:
  StopSignals() {
    g_stop.store(false);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

std::string ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }

// A progress line on a terminal is rewritten in place; anything else printed ends it first.
class Console {
 public:
  Console(bool quiet, bool every_step)
      : quiet_(quiet), every_step_(every_step), tty_(::isatty(STDOUT_FILENO) && !quiet && !every_step) {}
  void line(const std::string& text) {
    if (quiet_) return;
    end_progress();
    fmt::print("{}\n", text);
    std::fflush(stdout);
  }
  void progress(const launch::StepSummary& s, int64_t steps) {
    if (quiet_) return;
    const std::string text = launch::format_progress(s, steps);
    const auto now = std::chrono::steady_clock::now();
    const int64_t every = std::max<int64_t>(1, steps / 10);
    if (tty_) {
      fmt::print("\r\033[K{}", text);
      std::fflush(stdout);
      open_ = true;
    } else if (every_step_
                   ? sampled(s.step, steps, now)
                   : (s.step + 1) % every == 0 || s.step + 1 == steps || now - last_ > std::chrono::seconds(30)) {
      fmt::print("{}\n", text);
      std::fflush(stdout);
      last_ = now;
      ++printed_;
    }
  }
  void end_progress() {
    if (open_) fmt::print("\n");
    open_ = false;
  }

 private:
  // --progress-every-step: every step of the first kEveryStepLines, then at most one line per
  // kMinInterval (and always the last). A tiny model's steps take a fifth of a millisecond: one
  // line each filled the lab's pipe faster than it drew them, and the supervisor, blocked on the
  // full pipe, could not act on the lab's SIGTERM before the lab's grace ran out (the run was then
  // left to the stale-run sweep).
  static constexpr int64_t kEveryStepLines = 100;
  static constexpr auto kMinInterval = std::chrono::milliseconds(10);
  bool sampled(int64_t step, int64_t steps, std::chrono::steady_clock::time_point now) const {
    return printed_ < kEveryStepLines || step + 1 == steps || now - last_ >= kMinInterval;
  }

 private:
  bool quiet_, every_step_, tty_, open_ = false;
  int64_t printed_ = 0;
  std::chrono::steady_clock::time_point last_{};
};

// What --comm means for this launch; the workers' "groups" line says what each group got.
std::string comm_policy(const launch::TrainJob& j) {
  const std::string cuda = j.device == "cuda" ? " (the program's collectives on NCCL)" : "";
  switch (comm::parse_comm_choice(j.comm)) {
    case comm::CommChoice::kAuto:
      return "shared memory for groups whose ranks share a host, Gloo (TCP) between hosts" + cuda;
    case comm::CommChoice::kShm:
      return "shared memory for every group (one host)" + cuda;
    case comm::CommChoice::kGloo:
      return "Gloo (TCP) for every group" + cuda;
  }
  return "";
}

void print_header(const train::TrainConfig& c, const launch::TrainJobSpec& spec) {
  const launch::TrainJob& j = spec.job;
  const model::MlpShape s = train::mlp_shape(c.model);
  const strategy::Plan& p = c.plan;
  fmt::print("Model    {}: h {}, f {}, {} blocks, {} classes ({} parameters)\n", c.model.name, s.hidden, s.ffn,
             s.blocks, s.classes, units::format_count(c.model.total_params()));
  fmt::print("Plan     {}  [{}]\n", p.short_name(), p.to_string());
  fmt::print("         global batch {} = microbatch {} x {} microbatches x dp {}; {} synthetic samples\n",
             p.global_batch, p.microbatch, p.microbatches, p.dp, c.data_size);
  const bool sgd = std::holds_alternative<train::SgdConfig>(c.optimizer);
  fmt::print("Train    {} steps, {} lr {:g}, seed {}, {} worker process(es) on {}, run dir {}\n", j.steps,
             sgd ? "SGD" : "AdamW",
             sgd ? std::get<train::SgdConfig>(c.optimizer).lr : std::get<train::AdamWConfig>(c.optimizer).lr, j.seed,
             spec.nproc, j.device == "cuda" ? "GPUs (NCCL)" : "CPUs", j.run_dir.string());
  fmt::print("Comm     --comm {}: {}\n", j.comm, comm_policy(j));
  if (j.checkpoint_every > 0)
    fmt::print("Ckpt     every {} steps and at the last, in {} (keep last {}); max restarts {}, min workers {}\n",
               j.checkpoint_every, launch::checkpoint_root(j.run_dir).string(), j.keep_last, spec.max_restarts,
               spec.min_nproc > 0 ? spec.min_nproc : spec.nproc);
  else
    fmt::print("Ckpt     off (--checkpoint-every 0); max restarts {}\n", spec.max_restarts);
  const launch::FallbackPlan& fb = launch::fallback_plan(spec.fallback);
  fmt::print(
      "Watch    collective timeout {}, heartbeat timeout {}; the same failure more than {} time(s): "
      "--fallback {} ({})\n",
      launch::human_duration(j.comm_timeout),
      j.heartbeat_timeout.count() > 0 ? launch::human_duration(j.heartbeat_timeout) : std::string("off"),
      spec.max_same_failure, fb.flag, fb.name);
  for (const std::string& f : j.faults) fmt::print("Fault    {}\n", f);
}

void print_rank_table(const std::vector<launch::RankSummary>& rows, int attempts) {
  Table t({"rank", "data", "forward", "backward", "exposed comm", "optimizer", "idle", "step", "comm busy", "hidden"});
  for (const launch::RankSummary& r : rows) {
    const train::StepTimes& m = r.mean;
    const std::string hidden =
        m.comm_seconds > 0 ? fmt::format("{:.0f}%", 100 * std::max(0.0, 1 - m.exposed_comm_seconds / m.comm_seconds))
                           : "-";
    t.add({std::to_string(r.rank), ms(m.data_seconds), ms(m.forward_seconds), ms(m.backward_seconds),
           ms(m.exposed_comm_seconds), ms(m.optimizer_seconds), ms(m.idle_seconds), ms(m.step_seconds),
           ms(m.comm_seconds), hidden});
  }
  const int64_t steps = rows.empty() ? 0 : rows.front().steps;
  fmt::print("\nPer-rank time per step (ms, mean of {} step(s){}{}; hidden = all-reduce time under backward)\n{}",
             steps, steps > 0 ? ", step 0 left out when there are more" : "",
             attempts > 1 ? " of the last attempt" : "", t.str());
}

// Measured peak per category beside the ledger's prediction for the plan, one row per rank.
void print_memory_table(const std::vector<train::MemoryReport>& reports, const strategy::Plan& plan) {
  if (reports.empty()) return;
  std::vector<std::string> head = {"rank"};
  for (int i = 0; i < model::kMemoryCategories; ++i)
    head.push_back(std::string(model::to_string(static_cast<model::MemoryCategory>(i))));
  head.push_back("total");
  head.push_back("resident");
  Table t(head);
  for (const train::MemoryReport& m : reports) {
    std::vector<std::string> row = {std::to_string(m.rank)};
    for (int i = 0; i < model::kMemoryCategories; ++i) {
      const auto c = static_cast<model::MemoryCategory>(i);
      const auto d = m.deviation(c);
      row.push_back(fmt::format("{} / {}{}", units::format_bytes(static_cast<double>(m.measured(c))),
                                units::format_bytes(m.ledger(c)), d ? fmt::format(" ({:+.0f}%)", 100 * *d) : ""));
    }
    row.push_back(fmt::format("{} / {}", units::format_bytes(static_cast<double>(m.measured_peak_total_bytes)),
                              units::format_bytes(m.ledger_total_bytes)));
    row.push_back(m.resident_peak_bytes > 0 ? units::format_bytes(static_cast<double>(m.resident_peak_bytes)) : "-");
    t.add(row);
  }
  fmt::print(
      "\nPer-rank peak memory (measured by the accounting allocator / the memory ledger's prediction; "
      "resident = the process's peak RSS)\n{}Ledger   {}\n",
      t.str(), strategy::state_convention(plan));
}

// How each rank's resident peak (VmHWM, read when its work was done) splits: what the process held
// before the trainer existed, the accounting allocator's peak, the communicators' scratch, and the
// rest (the allocator's slack and workspaces the account does not see).
void print_resident_table(const std::vector<train::MemoryReport>& reports) {
  Table t({"rank", "resident peak", "before training", "accounted peak", "comm scratch", "rest"});
  bool any = false;
  for (const train::MemoryReport& m : reports) {
    const std::optional<int64_t> rest = m.unexplained_resident_bytes();
    if (!rest) continue;
    any = true;
    auto b = [](int64_t v) { return units::format_bytes(static_cast<double>(v)); };
    t.add({std::to_string(m.rank), b(m.resident_peak_bytes), b(m.resident_baseline_bytes),
           b(m.measured_peak_total_bytes), b(m.comm_scratch_bytes), b(*rest)});
  }
  if (!any) return;
  fmt::print(
      "\nResident peak per rank (VmHWM at the end of the rank's work) = before training (libraries, runtime, "
      "Gloo world) + accounted peak + comm scratch (Gloo's ring scratch, ZeRO-2/3's ring of registered gradient "
      "buckets) + rest (allocator slack, unaccounted workspaces; on shared memory also the pages of the peers' "
      "registered gradients and shards this rank read, shared by the ranks, not extra)\n{}",
      t.str());
}

void print_summary(const launch::TrainOutcome& o, const launch::TrainJobSpec& spec) {
  if (!o.incidents.empty()) {
    Table t({"attempt", "rank", "what", "at step", "resumed", "lost", "detect", "teardown", "restart", "load",
             "1st step", "total"});
    auto sec = [](const std::optional<double>& s) { return s ? units::format_seconds(*s) : std::string("-"); };
    for (const launch::IncidentReport& i : o.incidents)
      t.add({std::to_string(i.attempt), std::to_string(i.rank),
             std::string(to_string(i.kind)) + (i.phase.empty() ? "" : " (" + i.phase + ")"),
             std::to_string(i.failed_at_step), i.resumed_step ? std::to_string(*i.resumed_step) : "-",
             i.steps_lost ? std::to_string(*i.steps_lost) : "-", sec(i.latency.detection_seconds),
             sec(i.latency.teardown_seconds), sec(i.latency.restart_seconds), sec(i.latency.state_load_seconds),
             sec(i.latency.first_step_seconds), sec(i.latency.total_seconds)});
    fmt::print("\nIncidents (restart latency from the fault to the first step completed after the restart)\n{}",
               t.str());
  }
  if (o.young_daly) {
    const launch::YoungDaly& y = *o.young_daly;
    fmt::print(
        "\nYoung/Daly: checkpoint cost C = {} (mean of {} save(s)), cluster MTBF M = {:g} h / {} device(s) = {:.4g} h\n"
        "            recommended interval sqrt(2 C M) = {} = about {:.0f} steps (this run: every {})\n",
        units::format_seconds(y.checkpoint_seconds), o.checkpoints.size(), spec.mtbf_hours, o.final_world,
        y.mtbf_seconds / 3600, units::format_seconds(y.interval_seconds), y.interval_steps, spec.job.checkpoint_every);
  }
  if (o.fallback) fmt::print("Fallback {}\n", o.fallback->message);
  if (o.final_state)
    fmt::print("Final    step {}, state hash {} (xxh3_64 over parameters and optimizer state)\n", o.final_state->step,
               o.final_state->combined_hex());
  if (o.last_good_checkpoint) fmt::print("Ckpt     last good checkpoint {}\n", o.last_good_checkpoint->string());
}

nlohmann::json summary_json(const launch::TrainOutcome& o) {
  nlohmann::json steps = nlohmann::json::array(), ranks = nlohmann::json::array(), incidents = nlohmann::json::array();
  for (const launch::StepSummary& s : o.steps)
    steps.push_back({{"step", s.step},
                     {"epoch", s.epoch},
                     {"global_batch", s.global_batch},
                     {"loss", s.loss},
                     {"step_seconds", s.step_seconds},
                     {"samples_per_s", s.samples_per_s}});
  for (const launch::RankSummary& r : o.rank_table)
    ranks.push_back({{"rank", r.rank},
                     {"steps", r.steps},
                     {"data_seconds", r.mean.data_seconds},
                     {"forward_seconds", r.mean.forward_seconds},
                     {"backward_seconds", r.mean.backward_seconds},
                     {"exposed_comm_seconds", r.mean.exposed_comm_seconds},
                     {"optimizer_seconds", r.mean.optimizer_seconds},
                     {"idle_seconds", r.mean.idle_seconds},
                     {"step_seconds", r.mean.step_seconds},
                     {"comm_seconds", r.mean.comm_seconds}});
  for (const launch::IncidentReport& i : o.incidents) {
    nlohmann::json j = {{"attempt", i.attempt},          {"rank", i.rank},   {"kind", std::string(to_string(i.kind))},
                        {"status", i.status.describe()}, {"fault", i.fault}, {"failed_at_step", i.failed_at_step},
                        {"detail", i.describe()}};
    if (!i.detector.empty()) j["detector"] = i.detector;
    if (!i.collective.empty()) j["collective"] = i.collective;
    if (!i.analysis.empty()) j["analysis"] = i.analysis;
    if (i.latency.detection_seconds) j["detection_seconds"] = *i.latency.detection_seconds;
    if (i.resumed_step) j["resumed_step"] = *i.resumed_step;
    if (i.steps_lost) j["steps_lost"] = *i.steps_lost;
    if (i.latency.total_seconds) j["restart_total_seconds"] = *i.latency.total_seconds;
    incidents.push_back(j);
  }
  nlohmann::json j = {{"ok", o.ok},
                      {"message", o.message},
                      {"attempts", o.attempts},
                      {"final_world", o.final_world},
                      {"start_step", o.start_step},
                      {"steps", steps},
                      {"ranks", ranks},
                      {"incidents", incidents},
                      {"checkpoints", o.checkpoints.size()}};
  if (o.final_state) j["final_state_xxh3_64"] = o.final_state->combined_hex();
  if (o.last_good_checkpoint) j["last_good_checkpoint"] = o.last_good_checkpoint->string();
  if (o.young_daly) j["young_daly_interval_seconds"] = o.young_daly->interval_seconds;
  nlohmann::json memory = nlohmann::json::array();
  for (const train::MemoryReport& m : o.memory) memory.push_back(m.to_json());
  j["memory"] = memory;
  if (o.exported) j["export"] = {{"path", o.exported->string()}, {"bytes", o.exported_bytes}};
  if (o.fallback)
    j["fallback"] = {{"plan", std::string(launch::fallback_plan(o.fallback->plan).flag)},
                     {"reason", o.fallback->reason},
                     {"world_after", o.fallback->world_after},
                     {"message", o.fallback->message}};
  return j;
}

// The flags whose libraries read 0 or -1 as "the default": a value typed by the user must be
// checked here, where it is still known to have been typed, before any process starts.
void check_train_flags(const CLI::App& cmd, const TrainOptions& o) {
  const launch::TrainJob& j = o.spec.job;
  refuse_negative_unsigned(cmd, "--seed");
  if (given(cmd, "--lr")) positive("--lr", j.lr, 1e3);
  if (given(cmd, "--weight-decay")) at_least("--weight-decay", j.weight_decay, 0, 1e3);
  at_least("--momentum", j.momentum, 0, 0.999999);
  if (given(cmd, "--data-size") && j.data_size < 1)
    throw ConfigError("--data-size", std::to_string(j.data_size), "must be at least one global batch of samples");
  if (given(cmd, "--min-nproc")) in_range("--min-nproc", o.spec.min_nproc, 1, o.nproc > 0 ? o.nproc : 1);
  positive("--mtbf-hours", o.spec.mtbf_hours, 1e9);
  seconds_flag("--timeout", o.timeout_seconds);
  seconds_flag("--heartbeat-timeout", o.heartbeat_seconds, /*zero_ok=*/true);
  // Workers (ours, or started by torchrun/srun) share the run dir and create it themselves.
  if (!o.worker && !(o.nproc == 0 && launch::launched_as_worker())) writable_directory("--run-dir", j.run_dir);
  if (!o.db.empty() || given(cmd, "--db")) database_path("--db", o.db, false);
  device::parse_kind(j.device);  // an unknown device is a bad flag; availability is checked after the plan
}

// What the resolved job must satisfy beyond each flag alone: enough samples for one global batch,
// and a plan whose every stage fits the cluster's device by the memory ledger (a worker would
// otherwise die of std::bad_alloc after the launch).
void check_train_config(const train::TrainConfig& c, const launch::TrainJobSpec& spec) {
  if (c.data_size < c.plan.global_batch)
    throw ConfigError("--data-size", std::to_string(c.data_size),
                      "must be at least the global batch (" + std::to_string(c.plan.global_batch) + " samples)");
  const strategy::ClusterSpec cluster = strategy::with_world(strategy::load_cluster(spec.job.cluster), spec.nproc);
  const strategy::MemoryLedger worst = strategy::worst_stage(strategy::ledger_per_stage(c.model, c.plan, cluster));
  if (!worst.fits())
    throw ConfigError(
        "--model", c.model.name,
        fmt::format("does not fit with plan {}: the memory ledger says stage {} needs {} per worker "
                    "(parameters {}, gradients {}, optimizer {}, activations {}) but a {} device holds "
                    "{}; see `parlab plan --model {} --cluster {} --world {}`",
                    c.plan.short_name(), worst.stage, units::format_bytes(worst.total_bytes()),
                    units::format_bytes(worst.params_bytes), units::format_bytes(worst.grads_bytes),
                    units::format_bytes(worst.optimizer_bytes), units::format_bytes(worst.activations_bytes),
                    cluster.name, units::format_bytes(worst.device_bytes), spec.job.model, spec.job.cluster,
                    spec.nproc));
}

void run_supervised(TrainOptions o) {
  launch::TrainJobSpec& spec = o.spec;
  spec.nproc = o.nproc > 0 ? o.nproc : 1;
  spec.job.trace = !o.trace.empty();
  // Resolve everything here first: a bad flag or an unsupported plan fails before any process.
  spec.job = launch::pinned_job(spec.job, spec.nproc);
  const train::TrainConfig config = launch::make_train_config(spec.job, spec.nproc);
  check_train_config(config, spec);
  train::check_runtime_supports(config.model, config.plan);
  device::check_plan(device::parse_kind(spec.job.device), config.plan);
  // Before any process: no CUDA device (or a build without CUDA) is one line, exit 2. After the
  // plan check, so a plan the GPU runtime cannot train is named as such on any machine.
  device::require_available(device::parse_kind(spec.job.device));
  launch::check_faults(launch::parse_faults(spec.job.faults), spec.nproc, spec.job.steps, spec.job.checkpoint_every);
  std::optional<db::ResultsStore> store;
  if (!o.db.empty()) store.emplace(open_results("--db", o.db, /*read_only=*/false));
  if (!o.json) print_header(config, spec);

  std::optional<record::RunRecorder> recorder;
  if (store) recorder.emplace(record::RunRecorder::begin(*store, spec));
  Console console(o.json, o.every_step);
  launch::TrainCallbacks cb;
  cb.on_step = [&](const launch::StepSummary& s, int64_t steps) { console.progress(s, steps); };
  cb.on_note = [&](const std::string& line) { console.line(line); };
  cb.on_incident = [&](const launch::IncidentReport& i) {
    if (i.restarted) console.line("restart: " + i.describe());
    if (i.kind == launch::IncidentKind::kStraggler) console.line("straggler incident: " + i.what());
  };
  cb.on_checkpoint = [&](const launch::CheckpointReport& c) {
    console.line(fmt::format("checkpoint step {} -> {} ({} in {})", c.step, c.path.string(),
                             units::format_bytes(static_cast<double>(c.bytes)), units::format_seconds(c.save_seconds)));
  };
  cb.recorder = recorder ? &*recorder : nullptr;
  cb.stop = &g_stop;
  launch::TrainOutcome out;
  {
    StopSignals signals;
    out = launch::run_training(spec, cb);
  }
  console.end_progress();
  if (out.ok && out.steps.empty() && !o.json)
    fmt::print("Nothing to train: {} already holds step {} (--steps {} is the total to reach; --fresh starts over)\n",
               spec.job.run_dir.string(), out.start_step, spec.job.steps);

  if (!o.trace.empty()) {
    const auto events = launch::read_run_events(spec.job.run_dir, out.final_world);
    train::write_measured_trace(o.trace, events);
    if (!o.json) fmt::print("Trace    {} ({} events; open in Perfetto or chrome://tracing)\n", o.trace, events.size());
  }
  if (o.json) {
    print_json(summary_json(out));
  } else {
    if (!out.rank_table.empty() && !out.steps.empty()) print_rank_table(out.rank_table, out.attempts);
    print_memory_table(out.memory, config.plan);
    print_resident_table(out.memory);
    print_summary(out, spec);
    if (out.exported)
      fmt::print("Export   {} ({}; the full model, PyTorch names)\n", out.exported->string(),
                 units::format_bytes(static_cast<double>(out.exported_bytes)));
    if (recorder) fmt::print("Recorded run {} in {}\n", recorder->run(), o.db);
  }
  if (!out.ok) {
    fmt::print(stderr, "parlab train: {}\n", out.message);
    fmt::print(stderr, "parlab train: what the workers wrote is in {}\n", spec.job.run_dir.string());
    throw CLI::RuntimeError(out.interrupted ? 130 : 1);
  }
  if (!o.json && !spec.job.dump_dir.empty())
    fmt::print("Dump     step 0 tensors in {}{}\n", spec.job.dump_dir.string(), spec.nproc > 1 ? "/rank-<r>" : "");
}

void run_worker(const TrainOptions& o) {
  const launch::TrainJob job = o.job_file.empty() ? o.spec.job : launch::read_train_job(o.job_file);
  try {
    launch::run_train_worker(job);
  } catch (const launch::InjectedFailure& e) {
    fmt::print(stderr, "parlab train worker: {}\n", e.what());
    throw CLI::RuntimeError(e.code());
  }
  // torchrun/srun: rank 0 merges the ranks' events (a shared run dir) once all have finished.
  if (!o.trace.empty() && comm::from_env().rank == 0) {
    const int world = comm::from_env().world_size;
    train::write_measured_trace(o.trace, launch::read_run_events(job.run_dir, world));
  }
}

// `parlab train --help` ends with examples, the batch rule and the fault grammar.
const char* const kTrainFooter =
    "Examples:\n"
    "  parlab train --nproc 2 --model lab-mlp --steps 20\n"
    "  parlab train --nproc 4 --model tiny.toml --plan gbs=64,mb=8,bucket_mb=1 --trace run.json\n"
    "  parlab train --nproc 2 --dump-step dump/      # step 0 tensors as safetensors, per rank\n"
    "  parlab train --nproc 4 --plan zero=3 --export model.safetensors   # ZeRO-3, the full model out\n"
    "  parlab train --nproc 2 --steps 40 --checkpoint-every 5 --max-restarts 2 --fault kill:rank=1,step=7\n"
    "  parlab train --nproc 2 --min-nproc 1 --max-restarts 1 --fault lose-rank:rank=1,step=5\n"
    "  parlab train --nproc 4 --checkpoint-every 5 --max-restarts 1 --timeout 2 --fault skip-allreduce:rank=2,step=7\n"
    "  parlab train --nproc 4 --max-restarts 3 --max-same-failure 1 --fallback single --fault "
    "hang:rank=1,step=7,attempts=0\n"
    "  srun -n 4 parlab train --model lab-mlp        # one rank per task; the store at the step's first node\n"
    "The global batch stays fixed when --nproc changes (accumulation adjusts) unless the plan fixes\n"
    "microbatches; without gbs it is mb x lcm(dp, 4). Running again on a --run-dir that holds\n"
    "checkpoints resumes from the newest good one; --steps is the total to reach.\n"
    "Faults (repeatable --fault; the first attempt only, or the first K with attempts=K, 0: every attempt):\n"
    "  kill:rank=R,step=S | kill-during-checkpoint:rank=R,step=S,phase=P | corrupt-checkpoint:step=S[,shard=K] |\n"
    "  lose-rank:rank=R,step=S | skip-allreduce:rank=R,step=S | skip-send:rank=R,step=S | hang:rank=R,step=S |\n"
    "  slow:rank=R,factor=F[,step=S] | exit:rank=R,step=S[,code=C]\n"
    "Hangs and stragglers: detectors, thresholds, mitigations and fallbacks are in `parlab runbook`.";

// After parsing: the flags that need the whole command line, then a worker (started by us, torchrun or srun) or
// the supervisor that starts and restarts the workers.
void run_train(const CLI::App& cmd, TrainOptions& o, const CLI::Option& nproc) {
  check_train_flags(cmd, o);
  o.spec.job.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_seconds * 1000));
  o.spec.job.heartbeat_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.heartbeat_seconds * 1000));
  o.spec.fallback = launch::parse_fallback(o.fallback);
  if (nproc.count() > 0 && (o.nproc < 1 || o.nproc > kMaxNproc))
    throw ConfigError("--nproc", std::to_string(o.nproc), "must be between 1 and " + std::to_string(kMaxNproc));
  (void)launch::parse_faults(o.spec.job.faults);  // a malformed --fault fails before anything starts
  if (const std::string e = o.spec.job.export_file.string(); !e.empty() && !e.ends_with(".safetensors"))
    throw ConfigError("--export", e, "must name a .safetensors file (the format PyTorch's safetensors loads)");
  if (o.worker || (o.nproc == 0 && launch::launched_as_worker())) {
    if (!o.trace.empty()) o.spec.job.trace = true;
    run_worker(o);
  } else {
    run_supervised(o);
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd =
      app.add_subcommand("train", "Train a model for real: N worker processes running the plan's step programs");
  cmd->footer(kTrainFooter);
  launch::TrainJob& j = o->spec.job;
  j.checkpoint_every = 50;
  auto* nproc = cmd->add_option("--nproc,-n", o->nproc, "Worker processes to start on this machine (default 1)");
  cmd->add_option("--model,-m", j.model, "Model preset or TOML file (kind = \"mlp\")")->capture_default_str();
  cmd->add_option("--cluster,-c", j.cluster, "Cluster preset or TOML file the plan is validated against")
      ->capture_default_str();
  cmd->add_option("--plan,-p", j.plan, "Plan key=value pairs (gbs, mb, microbatches, bucket_mb, optimizer, ...)");
  cmd->add_option("--steps", j.steps, "Optimizer steps in total (a resumed run trains the rest)")
      ->capture_default_str();
  cmd->add_option("--seed", j.seed, "Seed of the initial weights, the data and the shuffles")->capture_default_str();
  cmd->add_option("--data-size", j.data_size, "Synthetic dataset samples (default 64 global batches)");
  cmd->add_option("--optimizer", j.optimizer, "adam | sgd (overrides the plan's optimizer key)")
      ->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--lr", j.lr, "Learning rate (default: AdamW 1e-3, SGD 1e-2)");
  cmd->add_option("--momentum", j.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", j.weight_decay, "Weight decay (default: AdamW 0.01, SGD 0)");
  cmd->add_option("--run-dir", j.run_dir, "Where workers write records, logs, checkpoints and flight-recorder dumps")
      ->capture_default_str();
  cmd->add_option("--checkpoint-every", j.checkpoint_every, "Checkpoint every K steps and at the last (0: off)")
      ->capture_default_str();
  cmd->add_option("--keep-last", j.keep_last, "Checkpoints to keep (plus the last known good)")->capture_default_str();
  cmd->add_option("--max-restarts", o->spec.max_restarts, "Restarts from the latest good checkpoint after a failure")
      ->capture_default_str();
  cmd->add_option("--min-nproc", o->spec.min_nproc,
                  "Fewest workers to continue with after a lost device (default --nproc)");
  cmd->add_option("--device", j.device,
                  "cpu (host; groups on --comm) | cuda (each worker binds LOCAL_RANK's GPU; NCCL, cuBLAS; every split "
                  "the CPU trains)")
      ->capture_default_str();
  cmd->add_option("--comm", j.comm,
                  "auto (shared memory inside a host, Gloo between hosts) | shm | gloo: the CPU groups' backend")
      ->check(CLI::IsMember({"auto", "shm", "gloo"}))
      ->capture_default_str();
  cmd->add_option("--fault", j.faults, "Inject a fault (repeatable): see below");
  cmd->add_option("--mtbf-hours", o->spec.mtbf_hours, "Per-device MTBF for the Young/Daly checkpoint interval")
      ->capture_default_str();
  cmd->add_flag("--fresh", o->spec.fresh, "Delete the run dir's checkpoints and start from step 0");
  cmd->add_option("--db", o->db, "Record the run (steps, checkpoints, incidents) in this results database");
  cmd->add_option("--export", j.export_file,
                  "Write the final full model, gathered from every shard, as safetensors with PyTorch tensor names");
  cmd->add_option("--dump-step", j.dump_dir,
                  "Write step 0's inputs, weights and reduced gradients as safetensors here");
  cmd->add_option("--trace", o->trace, "Write the measured timeline as a Chrome trace");
  cmd->add_option("--timeout", o->timeout_seconds,
                  "Per-collective watchdog timeout, seconds; the rendezvous waits at least the default (production: " +
                      launch::human_duration(launch::kProductionCollectiveTimeout) + ")")
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout", o->heartbeat_seconds,
                  "A rank silent this long is hung, seconds (0: off; production: " +
                      launch::human_duration(launch::kProductionHeartbeatTimeout) + ")")
      ->capture_default_str();
  cmd->add_option("--max-same-failure", o->spec.max_same_failure,
                  "Restarts after the same failure (kind and culprit rank) before the fallback plan")
      ->capture_default_str();
  std::string plans;
  for (const launch::FallbackPlan& p : launch::fallback_plans())
    plans += fmt::format("{}{} ({})", plans.empty() ? "" : ", ", p.flag, p.name);
  cmd->add_option("--fallback", o->fallback, "What a repeated failure degrades to: " + plans)->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the run summary as JSON");
  cmd->add_flag("--progress-every-step", o->every_step,
                "One progress line per step, also when stdout is a pipe (programs that plot it live); after the "
                "first 100, at most 100 lines a second (and the last step)");
  // Hidden: how the supervisor starts its workers, and fault injection for its tests.
  cmd->add_flag("--worker", o->worker)->group("");
  cmd->add_option("--job", o->job_file)->group("");
  cmd->add_flag("--trace-events", j.trace)->group("");
  cmd->add_flag("--record-samples", j.record_samples)->group("");
  cmd->callback([o, nproc, cmd] { run_train(*cmd, *o, *nproc); });
}

}  // namespace parlab::cli
