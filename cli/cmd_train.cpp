// parlab train: run a plan for real. `--nproc N` starts N worker processes of this binary (a
// hidden --worker mode) under a Supervisor, shows progress and ends with the per-rank time table.
// Started by torchrun/srun (RANK or SLURM_PROCID set, no --nproc), the process is one worker.
#include <fmt/core.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>

#include "cli/common.h"
#include "runtime/launch/progress.h"
#include "runtime/launch/supervisor.h"
#include "runtime/launch/worker.h"
#include "strategy/errors.h"
#include "strategy/io.h"
#include "strategy/units.h"

namespace parlab::cli {
namespace {

struct TrainOptions {
  launch::TrainJob job;
  int nproc = 0;  // 0: not given
  double timeout_seconds = 30;
  std::string trace;
  bool worker = false;
  bool json = false;
};

// The launcher's SIGINT/SIGTERM handler asks the running supervisor to stop.
std::atomic<launch::Supervisor*> g_supervisor{nullptr};
void on_stop_signal(int) {
  if (launch::Supervisor* s = g_supervisor.load()) s->request_stop();
}

// Installs the handlers for the supervisor's lifetime and restores the old ones after.
class StopSignals {
 public:
  explicit StopSignals(launch::Supervisor& s) {
    g_supervisor.store(&s);
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
    g_supervisor.store(nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

std::string ms(double seconds) { return fmt::format("{:.2f}", seconds * 1e3); }

// The same job, spelled as the hidden worker command line.
std::vector<std::string> worker_argv(const TrainOptions& o) {
  const launch::TrainJob& j = o.job;
  // --key=value: values such as "-1" must not read as flags.
  std::vector<std::string> a = {launch::self_executable().string(), "train", "--worker",
                                "--model=" + j.model, "--cluster=" + j.cluster,
                                "--steps=" + std::to_string(j.steps), "--seed=" + std::to_string(j.seed),
                                "--data-size=" + std::to_string(j.data_size),
                                "--run-dir=" + j.run_dir.string(),
                                fmt::format("--timeout={}", o.timeout_seconds),
                                fmt::format("--lr={}", j.lr), fmt::format("--momentum={}", j.momentum),
                                fmt::format("--weight-decay={}", j.weight_decay)};
  if (!j.plan.empty()) a.push_back("--plan=" + j.plan);
  if (!j.optimizer.empty()) a.push_back("--optimizer=" + j.optimizer);
  if (!j.dump_dir.empty()) a.push_back("--dump-step=" + j.dump_dir.string());
  if (j.trace) a.push_back("--trace-events");
  if (j.fail_rank >= 0)
    a.insert(a.end(), {"--fail-rank=" + std::to_string(j.fail_rank), "--fail-step=" + std::to_string(j.fail_step),
                       "--fail-code=" + std::to_string(j.fail_code)});
  return a;
}

void print_header(const train::TrainConfig& c, const launch::TrainJob& j, int nproc) {
  const model::MlpShape s = train::mlp_shape(c.model);
  const strategy::Plan& p = c.plan;
  fmt::print("Model    {}: h {}, f {}, {} blocks, {} classes ({} parameters)\n", c.model.name, s.hidden,
             s.ffn, s.blocks, s.classes, units::format_count(c.model.total_params()));
  fmt::print("Plan     {}  [{}]\n", p.short_name(), p.to_string());
  fmt::print("         global batch {} = microbatch {} x {} microbatches x dp {}; {} synthetic samples\n",
             p.global_batch, p.microbatch, p.microbatches, p.dp, c.data_size);
  const bool sgd = std::holds_alternative<train::SgdConfig>(c.optimizer);
  fmt::print("Train    {} steps, {} lr {:g}, seed {}, {} worker process(es), run dir {}\n", j.steps,
             sgd ? "SGD" : "AdamW",
             sgd ? std::get<train::SgdConfig>(c.optimizer).lr : std::get<train::AdamWConfig>(c.optimizer).lr,
             j.seed, nproc, j.run_dir.string());
}

void print_rank_table(const std::vector<launch::RankSummary>& rows) {
  Table t({"rank", "data", "forward", "backward", "exposed comm", "optimizer", "idle", "step", "comm busy",
           "hidden"});
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
  fmt::print("\nPer-rank time per step (ms, mean of {} step(s){}; hidden = all-reduce time under backward)\n{}",
             steps, steps > 0 ? ", step 0 left out when there are more" : "", t.str());
}

nlohmann::json summary_json(const launch::RunProgress& progress, const launch::SupervisorResult& result) {
  nlohmann::json steps = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const launch::StepSummary& s : progress.completed())
    steps.push_back({{"step", s.step}, {"epoch", s.epoch}, {"global_batch", s.global_batch}, {"loss", s.loss},
                     {"step_seconds", s.step_seconds}, {"samples_per_s", s.samples_per_s}});
  for (const launch::RankSummary& r : progress.rank_table())
    ranks.push_back({{"rank", r.rank}, {"steps", r.steps}, {"data_seconds", r.mean.data_seconds},
                     {"forward_seconds", r.mean.forward_seconds}, {"backward_seconds", r.mean.backward_seconds},
                     {"exposed_comm_seconds", r.mean.exposed_comm_seconds},
                     {"optimizer_seconds", r.mean.optimizer_seconds}, {"idle_seconds", r.mean.idle_seconds},
                     {"step_seconds", r.mean.step_seconds}, {"comm_seconds", r.mean.comm_seconds}});
  return {{"ok", result.ok}, {"message", result.message}, {"steps", steps}, {"ranks", ranks}};
}

void run_supervised(TrainOptions o) {
  const int nproc = o.nproc > 0 ? o.nproc : 1;
  // Resolve everything here first: a bad flag or an unsupported plan fails before any process.
  const train::TrainConfig config = launch::make_train_config(o.job, nproc);
  train::check_runtime_supports(config.model, config.plan);
  o.job.data_size = config.data_size;
  o.job.trace = !o.trace.empty();
  if (!o.json) print_header(config, o.job, nproc);

  launch::RunProgress progress(nproc, o.job.steps);
  const bool tty = ::isatty(STDOUT_FILENO) && !o.json;
  const int64_t every = std::max<int64_t>(1, o.job.steps / 10);
  auto last_line = std::chrono::steady_clock::now();
  bool open_line = false;

  launch::SupervisorOptions so;
  so.argv = worker_argv(o);
  so.nproc = nproc;
  so.run_dir = o.job.run_dir;
  so.on_record = [&](const train::StepRecord& r) {
    const auto s = progress.add(r);
    if (!s || o.json) return;
    const std::string line = launch::format_progress(*s, o.job.steps);
    const auto now = std::chrono::steady_clock::now();
    if (tty) {
      fmt::print("\r\033[K{}", line);
      std::fflush(stdout);
      open_line = true;
    } else if ((s->step + 1) % every == 0 || s->step + 1 == o.job.steps || s->step == 0 ||
               now - last_line > std::chrono::seconds(30)) {
      fmt::print("{}\n", line);
      std::fflush(stdout);
      last_line = now;
    }
  };
  launch::Supervisor supervisor(so);
  launch::SupervisorResult result;
  {
    StopSignals signals(supervisor);
    result = supervisor.run();
  }
  if (open_line) fmt::print("\n");

  if (!o.trace.empty()) {
    const auto events = launch::read_run_events(o.job.run_dir, nproc);
    train::write_measured_trace(o.trace, events);
    if (!o.json) fmt::print("Trace    {} ({} events; open in Perfetto or chrome://tracing)\n", o.trace, events.size());
  }
  if (o.json) {
    print_json(summary_json(progress, result));
  } else if (progress.completed_steps() > 0) {
    print_rank_table(progress.rank_table());
  }
  if (!result.ok) {
    fmt::print(stderr, "parlab train: {}\n", result.message);
    fmt::print(stderr, "parlab train: what the workers wrote is in {}\n", o.job.run_dir.string());
    throw CLI::RuntimeError(result.interrupted ? 130 : 1);
  }
  if (!o.json && !o.job.dump_dir.empty())
    fmt::print("Dump     step 0 tensors in {}{}\n", o.job.dump_dir.string(), nproc > 1 ? "/rank-<r>" : "");
}

void run_worker(const TrainOptions& o) {
  try {
    launch::run_train_worker(o.job);
  } catch (const launch::InjectedFailure& e) {
    fmt::print(stderr, "parlab train worker: {}\n", e.what());
    throw CLI::RuntimeError(e.code());
  }
  // torchrun/srun: rank 0 merges the ranks' events (a shared run dir) once all have finished.
  if (!o.trace.empty() && comm::from_env().rank == 0) {
    const int world = comm::from_env().world_size;
    train::write_measured_trace(o.trace, launch::read_run_events(o.job.run_dir, world));
  }
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Train a model for real: N worker processes running the plan's step programs");
  cmd->footer(
      "Examples:\n"
      "  parlab train --nproc 2 --model lab-mlp --steps 20\n"
      "  parlab train --nproc 4 --model tiny.toml --plan gbs=64,mb=8,bucket_mb=1 --trace run.json\n"
      "  parlab train --nproc 2 --dump-step dump/      # step 0 tensors as safetensors, per rank\n"
      "  srun -n 4 parlab train --model lab-mlp        # one rank per task; needs MASTER_ADDR/MASTER_PORT\n"
      "The global batch stays fixed when --nproc changes (accumulation adjusts) unless the plan fixes\n"
      "microbatches; without gbs it is mb x lcm(dp, 4).");
  launch::TrainJob& j = o->job;
  cmd->add_option("--nproc,-n", o->nproc, "Worker processes to start on this machine (default 1)");
  cmd->add_option("--model,-m", j.model, "Model preset or TOML file (kind = \"mlp\")")->capture_default_str();
  cmd->add_option("--cluster,-c", j.cluster, "Cluster preset or TOML file the plan is validated against")
      ->capture_default_str();
  cmd->add_option("--plan,-p", j.plan, "Plan key=value pairs (gbs, mb, microbatches, bucket_mb, optimizer, ...)");
  cmd->add_option("--steps", j.steps, "Optimizer steps")->capture_default_str();
  cmd->add_option("--seed", j.seed, "Seed of the initial weights, the data and the shuffles")->capture_default_str();
  cmd->add_option("--data-size", j.data_size, "Synthetic dataset samples (default 64 global batches)");
  cmd->add_option("--optimizer", j.optimizer, "adam | sgd (overrides the plan's optimizer key)")
      ->check(CLI::IsMember({"adam", "sgd"}));
  cmd->add_option("--lr", j.lr, "Learning rate (default: AdamW 1e-3, SGD 1e-2)");
  cmd->add_option("--momentum", j.momentum, "SGD momentum")->capture_default_str();
  cmd->add_option("--weight-decay", j.weight_decay, "Weight decay (default: AdamW 0.01, SGD 0)");
  cmd->add_option("--run-dir", j.run_dir, "Where workers write records, logs and flight-recorder dumps")
      ->capture_default_str();
  cmd->add_option("--dump-step", j.dump_dir, "Write step 0's inputs, weights and reduced gradients as safetensors here");
  cmd->add_option("--trace", o->trace, "Write the measured timeline as a Chrome trace");
  cmd->add_option("--timeout", o->timeout_seconds, "Per-collective and rendezvous timeout, seconds")
      ->capture_default_str();
  cmd->add_flag("--json", o->json, "Print the run summary as JSON");
  // Hidden: how the supervisor starts its workers, and fault injection for its tests.
  cmd->add_flag("--worker", o->worker)->group("");
  cmd->add_flag("--trace-events", j.trace)->group("");
  cmd->add_option("--fail-rank", j.fail_rank)->group("");
  cmd->add_option("--fail-step", j.fail_step)->group("");
  cmd->add_option("--fail-code", j.fail_code)->group("");
  cmd->callback([o] {
    if (!(o->timeout_seconds > 0))
      throw ConfigError("--timeout", fmt::format("{}", o->timeout_seconds), "must be a positive number of seconds");
    o->job.comm_timeout = std::chrono::milliseconds(static_cast<int64_t>(o->timeout_seconds * 1000));
    if (o->worker || (o->nproc == 0 && launch::launched_as_worker())) {
      if (!o->trace.empty()) o->job.trace = true;
      run_worker(*o);
    } else {
      run_supervised(*o);
    }
  });
}

}  // namespace parlab::cli
