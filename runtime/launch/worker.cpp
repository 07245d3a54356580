#include "runtime/launch/worker.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "runtime/checkpoint/checkpoint.h"
#include "runtime/comm/flight_recorder.h"
#include "runtime/device/device.h"
#include "runtime/comm/route.h"
#include "runtime/comm/store_token.h"
#include "runtime/launch/detectors.h"
#include "runtime/launch/faults.h"
#include "runtime/launch/liveness.h"
#include "runtime/launch/protocol.h"
#include "runtime/launch/supervisor.h"
#include "runtime/train/dump.h"
#include "runtime/train/export.h"
#include "runtime/train/memory_report.h"
#include "runtime/train/trainer_checkpoint.h"
#include "base/errors.h"
#include "strategy/io.h"
#include "base/key_values.h"

namespace parlab::launch {
namespace {

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The error line the supervisor reads to name the root cause of a failed job.
// `fatal`: a configuration error, which a restart cannot fix; `hang`: a collective timeout's.
void write_error_record(const std::filesystem::path& file, int rank, bool comm, const std::string& message,
                        bool fatal = false, std::optional<protocol::Hang> hang = std::nullopt) {
  const protocol::Error e{.from = {rank, comm::wall_clock_seconds()},
                          .comm = comm,
                          .fatal = fatal,
                          .message = message,
                          .hang = std::move(hang)};
  std::ofstream out(file, std::ios::app);
  out << protocol::encode(e).dump() << '\n';
}

// The ranks of this job on this host: LOCAL_WORLD_SIZE (the supervisor, torchrun), else Slurm's
// SLURM_NTASKS_PER_NODE where it is one number; 0 where neither says.
int local_ranks_from_env() {
  for (const char* name : {"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = env_or_null(name)) {
      char* end = nullptr;
      const long n = std::strtol(v, &end, 10);
      if (*end == '\0' && n > 0) return static_cast<int>(n);
    }
  return 0;
}

bool is_loopback(const std::string& host) {
  return host.empty() || host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

}  // namespace

bool launched_as_worker() { return env_or_null("RANK") || env_or_null("SLURM_PROCID"); }

void follow_supervisor() {
  const char* pid_text = env_or_null("PARLAB_SUPERVISOR_PID");
  if (!pid_text) return;
  const pid_t supervisor = static_cast<pid_t>(std::atol(pid_text));
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  // The supervisor may have died before the prctl took effect: then we were re-parented.
  if (::getppid() != supervisor)
    throw RuntimeError("the supervisor (pid " + std::string(pid_text) + ") is gone; not training alone");
}

WorkerWorld connect_worker(const comm::GlooOptions& options, const std::filesystem::path& run_dir,
                           comm::CommChoice choice) {
  WorkerWorld w;
  w.env = comm::from_env();
  comm::GlooOptions o = options;
  std::shared_ptr<comm::Store> store;
  if (const char* dir = env_or_null("PARLAB_RENDEZVOUS_DIR")) {
    store = comm::make_file_store(dir);
  } else {
    // Several hosts (MASTER_ADDR not loopback): rank 0 serves every interface and each rank's
    // Gloo pairs listen on its host name, or on GLOO_SOCKET_IFNAME as in PyTorch.
    const bool local = is_loopback(w.env.master_addr);
    comm::resolve_store_token(w.env, run_dir);
    w.tcp = comm::make_tcp_rendezvous(w.env, local ? "127.0.0.1" : "0.0.0.0", options.timeout);
    store = w.tcp.store;
    if (!local) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) == 0) o.hostname = host;
      // A host name that resolves to loopback (containers, network namespaces) would be
      // advertised to peers that cannot reach it: listen on the interface that routes to
      // rank 0 instead, unless GLOO_SOCKET_IFNAME chooses.
      if (!env_or_null("GLOO_SOCKET_IFNAME") && comm::resolves_to_loopback(o.hostname)) {
        if (const auto ifname = comm::interface_towards(w.env.master_addr)) {
          o.interface = *ifname;
          std::fprintf(stderr,
                       "rank %d: host name %s resolves to loopback; Gloo uses interface %s (the route to "
                       "MASTER_ADDR %s; set GLOO_SOCKET_IFNAME to choose)\n",
                       w.env.rank, o.hostname.c_str(), ifname->c_str(), w.env.master_addr.c_str());
        }
      }
    }
  }
  if (const char* ifname = env_or_null("GLOO_SOCKET_IFNAME")) o.interface = ifname;
  const char* host_id = env_or_null("PARLAB_HOST_ID");
  w.comm = comm::make_communicator(store, w.env.rank, w.env.world_size, o, choice, host_id ? host_id : "");
  w.store = std::move(store);
  return w;
}

InjectedFailure::InjectedFailure(int rank, int64_t step, int code)
    : RuntimeError("injected failure: rank " + std::to_string(rank) + " exits with code " + std::to_string(code) +
                   " before step " + std::to_string(step)),
      code_(code) {}

strategy::Plan given_plan(const TrainJob& job) {
  strategy::Plan p = strategy::parse_plan(job.plan);
  auto set = [&p](const char* key) {
    if (!p.was_given(key)) p.given.push_back(key);
  };
  if (!job.optimizer.empty()) {  // --optimizer overrides the plan's key
    if (job.optimizer != "adam" && job.optimizer != "sgd")
      throw ConfigError("--optimizer", job.optimizer, "one of adam, sgd");
    p.optimizer = job.optimizer == "sgd" ? strategy::OptimizerKind::kSgd : strategy::OptimizerKind::kAdam;
    set("optimizer");
  }
  if (job.global_batch > 0 && !p.was_given("gbs") && !p.was_given("microbatches")) {
    p.global_batch = job.global_batch;
    set("gbs");
  }
  return p;
}

TrainJob pin_global_batch(const TrainJob& job, int world) {
  TrainJob j = job;
  const strategy::Plan given = strategy::parse_plan(job.plan);
  if (j.global_batch == 0 && !given.was_given("gbs") && !given.was_given("microbatches"))
    j.global_batch = make_train_config(job, world).plan.global_batch;
  return j;
}

train::TrainConfig make_train_config(const TrainJob& job, int world) {
  train::TrainConfig c;
  c.model = strategy::load_model(job.model);
  (void)train::mlp_shape(c.model);  // refuse non-mlp models before anything else
  c.plan = train::resolve_train_plan(c.model, given_plan(job), world, strategy::load_cluster(job.cluster));
  // The job's --lr, else the model preset's AdamW default (lab-mlp: 2e-4), else the optimizer's.
  const double preset_lr = c.plan.optimizer == strategy::OptimizerKind::kAdam ? c.model.default_lr : 0;
  c.optimizer =
      train::optimizer_config(c.plan.optimizer, job.lr > 0 ? job.lr : preset_lr, job.momentum, job.weight_decay);
  c.data_size = job.data_size > 0 ? job.data_size : 64 * c.plan.global_batch;
  c.seed = job.seed;
  c.comm_timeout = job.comm_timeout;
  if (job.steps < 1) throw ConfigError("--steps", std::to_string(job.steps), "must be at least 1");
  if (job.checkpoint_every < 0)
    throw ConfigError("--checkpoint-every", std::to_string(job.checkpoint_every), "must be >= 0 (0: no checkpoints)");
  if (job.keep_last < 1) throw ConfigError("--keep-last", std::to_string(job.keep_last), "must be at least 1");
  return c;
}

namespace {

// What keeps the supervisor informed that this rank is alive (liveness.h); the hang fault stops it.
struct Liveness {
  HeartbeatThread* heartbeat = nullptr;  // null: heartbeats are off
  DumpOnTerminate* dumper = nullptr;
};

// The records channel and what a rank needs to report on it.
struct Reporter {
  train::JsonlSink& sink;
  int rank = 0;

  // One message (protocol.h), stamped with this rank and the wall clock.
  template <class Message>
  void send(Message m) {
    m.from = {rank, comm::wall_clock_seconds()};
    sink.write_line(protocol::encode(m));
  }
  // The fault line the supervisor times detection from.
  void fault(const FaultSpec& f, int64_t step) {
    send(protocol::Fault{.kind = f.kind, .step = step, .spec = f.to_string(), .lost = f.kind == FaultKind::kLoseRank});
  }
  // Says what is about to happen, then dies the way a lost process does: no cleanup at all.
  [[noreturn]] void die(const FaultSpec& f, int64_t step, const std::string& where) {
    fault(f, step);
    std::fprintf(stderr, "rank %d: injected fault %s%s: SIGKILL\n", rank, f.to_string().c_str(), where.c_str());
    std::fflush(stderr);
    ::raise(SIGKILL);
    std::abort();  // not reached
  }
  // Stops responding without dying: no heartbeat, no records, no flight-recorder dump on SIGTERM,
  // outside any collective (its communicators sit idle), until the supervisor kills it.
  [[noreturn]] void freeze(const FaultSpec& f, int64_t step, Liveness& live) {
    fault(f, step);
    std::fprintf(stderr, "rank %d: injected fault %s: stops responding before step %lld\n", rank, f.to_string().c_str(),
                 static_cast<long long>(step));
    std::fflush(stderr);
    if (live.heartbeat) live.heartbeat->stop();
    live.dumper->freeze();
    for (;;) ::pause();
  }
};

std::chrono::milliseconds rendezvous_timeout(const TrainJob& job) {
  return std::max(job.comm_timeout, kLabCollectiveTimeout);
}

// A collective of the checkpoint protocol waits for the slowest rank's whole shard write.
std::chrono::milliseconds checkpoint_timeout(const TrainJob& job) {
  return std::max(job.comm_timeout, std::chrono::milliseconds(300'000));
}

void report_resume(Reporter& out, const train::ResumeResult& r, double started) {
  protocol::Resume m{.step = r.step,
                     .resumed = r.resumed,
                     .summary = r.summary(),
                     .path = r.resumed ? r.load.checkpoint->path().string() : "",
                     .written_by_world = r.written_by_world,
                     .load_seconds = comm::wall_clock_seconds() - started};
  for (const checkpoint::SkippedCheckpoint& k : r.load.skipped)
    m.skipped.push_back({k.step, k.path.string(), k.reason});
  out.send(std::move(m));
  std::printf("rank %d: %s\n", out.rank, r.summary().c_str());
  std::fflush(stdout);
}

// Rank 0, after a committed save: the record the supervisor turns into a checkpoint row, then a
// corrupt-checkpoint fault when one names this step.
void after_save(Reporter& out, const checkpoint::SaveResult& r, const std::vector<FaultSpec>& faults) {
  const std::string checksum =
      std::string(checkpoint::kHashAlgorithm) + ":" +
      checkpoint::hash_to_hex(checkpoint::xxh3_64_of_file(r.path / checkpoint::kManifestFileName));
  out.send(protocol::Checkpoint{.step = r.step,
                                .path = r.path.string(),
                                .bytes = r.total_bytes,
                                .checksum = checksum,
                                .save_seconds = r.timings.total_seconds,
                                .timings = r.timings});
  for (const FaultSpec& f : faults) {
    if (f.kind != FaultKind::kCorruptCheckpoint || f.step != r.step) continue;
    const std::filesystem::path file = r.path / checkpoint::shard_file_name(f.shard);
    const uint64_t offset = checkpoint::corrupt_byte(file);
    out.send(protocol::Fault{
        .kind = f.kind, .step = f.step, .spec = f.to_string(), .file = file.string(), .offset = offset});
  }
}

// Steps until job.steps in total, with checkpoints and the faults of this rank.
void train_loop(const TrainJob& job, train::Trainer& trainer, train::CommCoordinator& coord, Reporter& out,
                const std::vector<FaultSpec>& faults, Liveness& live) {
  const int rank = coord.rank();
  int64_t saving = -1;  // the step whose checkpoint is being written
  checkpoint::SaveOptions so(checkpoint_root(job.run_dir), job.keep_last);
  for (const FaultSpec& f : faults)
    if (f.kind == FaultKind::kKillDuringCheckpoint && f.rank == rank)
      so.hook = [&out, &saving, faults](checkpoint::SavePhase phase, int r) {
        for (const FaultSpec& g : faults)
          if (g.kind == FaultKind::kKillDuringCheckpoint && g.rank == r && g.phase == phase && g.step == saving)
            out.die(g, saving, std::string(" during the checkpoint save (") + checkpoint::save_phase_name(phase) + ")");
      };
  const int64_t first_step = trainer.state().step;
  while (trainer.state().step < job.steps) {
    const int64_t s = trainer.state().step;
    for (const FaultSpec& f : faults) {
      if (f.rank != rank) continue;
      if ((f.kind == FaultKind::kKill || f.kind == FaultKind::kLoseRank) && f.step == s)
        out.die(f, s, " before step " + std::to_string(s));
      if (f.kind == FaultKind::kHang && f.step == s) out.freeze(f, s, live);
      if (f.kind == FaultKind::kExit && f.step == s) throw InjectedFailure(rank, s, f.code);
      // The trainer skips the collectives itself (TrainerOptions::faults); this says when.
      if ((f.kind == FaultKind::kSkipAllReduce || f.kind == FaultKind::kSkipSend) && f.step == s) out.fault(f, s);
      if (f.kind == FaultKind::kSlow && s == std::max(f.step, first_step)) out.fault(f, s);
    }
    trainer.step();
    if (is_checkpoint_step(s + 1, job.checkpoint_every, job.steps)) {
      saving = s + 1;
      const checkpoint::SaveResult r = train::save_trainer(trainer, so, coord);
      if (rank == 0) after_save(out, r, faults);
    }
  }
}

}  // namespace

int attempt_from_env() {
  const char* v = env_or_null("PARLAB_ATTEMPT");
  if (!v) return 0;
  const int a = std::atoi(v);
  if (a < 0) throw ConfigError("PARLAB_ATTEMPT", v, "must be a non-negative integer");
  return a;
}

std::filesystem::path checkpoint_root(const std::filesystem::path& run_dir) { return run_dir / "checkpoints"; }
std::filesystem::path final_state_path(const std::filesystem::path& run_dir) { return run_dir / "final-state.json"; }

nlohmann::json to_json(const TrainJob& j) {
  return {{"model", j.model},
          {"cluster", j.cluster},
          {"plan", j.plan},
          {"global_batch", j.global_batch},
          {"steps", j.steps},
          {"seed", j.seed},
          {"data_size", j.data_size},
          {"optimizer", j.optimizer},
          {"lr", j.lr},
          {"momentum", j.momentum},
          {"weight_decay", j.weight_decay},
          {"run_dir", j.run_dir.string()},
          {"dump_dir", j.dump_dir.string()},
          {"trace", j.trace},
          {"timeout_ms", j.comm_timeout.count()},
          {"checkpoint_every", j.checkpoint_every},
          {"keep_last", j.keep_last},
          {"faults", j.faults},
          {"record_samples", j.record_samples},
          {"heartbeat_timeout_ms", j.heartbeat_timeout.count()},
          {"export_file", j.export_file.string()},
          {"device", j.device},
          {"comm", j.comm}};
}

TrainJob train_job_from_json(const nlohmann::json& j) {
  TrainJob t;
  std::string key;
  try {
    // Every key is required: the file is written by to_json above, never by hand.
    auto get = [&](const char* k, auto& out) {
      key = k;
      out = j.at(k).get<std::remove_reference_t<decltype(out)>>();
    };
    get("model", t.model);
    get("cluster", t.cluster);
    get("plan", t.plan);
    get("global_batch", t.global_batch);
    get("steps", t.steps);
    get("seed", t.seed);
    get("data_size", t.data_size);
    get("optimizer", t.optimizer);
    get("lr", t.lr);
    get("momentum", t.momentum);
    get("weight_decay", t.weight_decay);
    std::string run_dir, dump_dir;
    get("run_dir", run_dir);
    get("dump_dir", dump_dir);
    t.run_dir = run_dir;
    t.dump_dir = dump_dir;
    get("trace", t.trace);
    int64_t timeout_ms = 0;
    get("timeout_ms", timeout_ms);
    t.comm_timeout = std::chrono::milliseconds(timeout_ms);
    get("checkpoint_every", t.checkpoint_every);
    get("keep_last", t.keep_last);
    get("faults", t.faults);
    get("record_samples", t.record_samples);
    get("device", t.device);
    get("comm", t.comm);
    (void)comm::parse_comm_choice(t.comm, "comm");
    int64_t heartbeat_ms = 0;
    get("heartbeat_timeout_ms", heartbeat_ms);
    t.heartbeat_timeout = std::chrono::milliseconds(heartbeat_ms);
    std::string export_file;
    get("export_file", export_file);
    t.export_file = export_file;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("train job." + key, j.contains(key) ? j.at(key).dump() : "(missing)", e.what());
  }
  return t;
}

TrainJob read_train_job(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) throw ConfigError("--job", file.string(), "cannot be read");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) throw ConfigError("--job", file.string(), "is not valid JSON");
  return train_job_from_json(j);
}

void write_train_job(const std::filesystem::path& file, const TrainJob& job) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::trunc);
  out << to_json(job).dump(2) << '\n';
  if (!out) throw RuntimeError("cannot write the job file " + file.string());
}

namespace {

// Unwatches at scope exit, before the communicators it names are destroyed.
struct Watching {
  DumpOnTerminate& dumper;
  Watching(DumpOnTerminate& d, std::vector<const comm::Communicator*> comms) : dumper(d) {
    dumper.watch(std::move(comms));
  }
  ~Watching() { dumper.unwatch(); }
  Watching(const Watching&) = delete;
  Watching& operator=(const Watching&) = delete;
};

// The faults of this rank that the trainer itself injects.
train::InjectedFaults trainer_faults(const std::vector<FaultSpec>& faults, int rank) {
  train::InjectedFaults f;
  for (const FaultSpec& x : faults) {
    if (x.rank != rank) continue;
    if (x.kind == FaultKind::kSkipAllReduce) f.skip_collectives_step = x.step;
    if (x.kind == FaultKind::kSkipSend) f.skip_send_step = x.step;
    if (x.kind == FaultKind::kSlow) {
      f.compute_slowdown = x.factor;
      f.slow_from_step = x.step;
    }
  }
  return f;
}

// Started by torchrun or srun (no supervisor prints a header): rank 0 says how the ranks met and
// which backend each of its groups uses.
void print_launch_header(const WorkerWorld& w, const std::map<std::string, std::string>& comms) {
  std::string where =
      w.env.master_addr.empty() ? "a file store" : w.env.master_addr + ":" + std::to_string(w.env.master_port);
  if (!w.env.master_derived.empty()) where += " (" + w.env.master_derived + ", as PyTorch Lightning derives them)";
  std::string groups;
  for (const auto& [group, backend] : comms) groups += (groups.empty() ? "" : ", ") + group + " " + backend;
  std::printf("Launch   %s, %d ranks; rendezvous at %s\ngroups   %s (rank 0's)\n", w.env.launcher.c_str(),
              w.env.world_size, where.c_str(), groups.c_str());
  std::fflush(stdout);
}

// Connect, build, resume, train, finish: everything that needs the communicators, which every
// failure dumps (all groups, not only the one that failed) before it leaves their scope.
void train_worker(const TrainJob& job, train::JsonlSink& sink, Liveness& live) {
  const int attempt = attempt_from_env();
  const std::vector<FaultSpec> faults = faults_for_attempt(job.faults, attempt);
  comm::GlooOptions go;
  // Connecting waits at least the lab default: a short collective watchdog (tests use 2 s) must
  // not turn a slow start on a loaded machine into a failed rendezvous.
  go.timeout = rendezvous_timeout(job);
  go.attempt = attempt;
  go.dump_dir = flight_dump_dir(job.run_dir);  // a failed collective dumps its group's recorder here
  WorkerWorld world = connect_worker(go, job.run_dir, comm::parse_comm_choice(job.comm));
  Watching watch_world(*live.dumper, {world.comm.get()});
  const int rank = world.comm->rank();
  const train::TrainConfig config = make_train_config(job, world.comm->size());
  train::TrainerOptions to;
  to.sink = &sink;
  to.record_events = job.trace;
  to.record_samples = job.record_samples;
  to.faults = trainer_faults(faults, rank);
  if (!job.dump_dir.empty()) to.dump_dir = train::dump_dir_for_rank(job.dump_dir, rank, world.comm->size());
  // --device cuda: LOCAL_RANK's GPU computes, NCCL carries the program's collectives.
  device::CudaRank gpu;
  if (device::parse_kind(job.device) != device::Kind::kCuda && train::core_homes_enabled())
    to.core_home = train::CoreHome::for_rank(config.plan, world.env.local_rank, local_ranks_from_env());
  if (device::parse_kind(job.device) == device::Kind::kCuda) {
    device::check_plan(device::Kind::kCuda, config.plan);
    gpu = device::open_cuda_rank(world.store, rank, world.comm->size(), world.env.local_rank,
                                 {.timeout = go.timeout, .attempt = attempt, .dump_dir = go.dump_dir});
    to.collectives = gpu.world.get();
    to.make_device_model = gpu.make_model;
    to.make_device_optimizer = gpu.make_optimizer;
  }
  // What the process holds before the trainer allocates anything (libraries, the runtime, the
  // Gloo world): the baseline the memory report sets the resident peak against.
  const int64_t resident_baseline = train::resident_bytes();
  train::Trainer trainer(config, *world.comm, to);
  Watching watch_all(*live.dumper, trainer.communicators());
  Reporter out{sink, rank};
  protocol::Started started{.world = world.comm->size(), .attempt = attempt, .pid = ::getpid()};
  started.comms[world.comm->group_name()] = std::string(world.comm->backend_name());
  for (const comm::Communicator* c : trainer.communicators())
    started.comms[c->group_name()] = std::string(c->backend_name());
  out.send(started);
  if (rank == 0 && !env_or_null("PARLAB_SUPERVISOR_PID")) print_launch_header(world, started.comms);
  try {
    train::CommCoordinator coord(*world.comm, checkpoint_timeout(job));
    const double load_start = comm::wall_clock_seconds();
    report_resume(out, train::resume_trainer(trainer, checkpoint::LoadOptions(checkpoint_root(job.run_dir)), coord),
                  load_start);
    train_loop(job, trainer, coord, out, faults, live);
    if (!job.export_file.empty()) {
      const uint64_t bytes = train::export_safetensors(trainer, job.export_file);
      if (out.rank == 0) out.send(protocol::Export{.path = job.export_file.string(), .bytes = bytes});
    }
    // Collective under ZeRO (the shards are gathered): every rank computes it, rank 0 reports it.
    const train::StateFingerprint fp = train::state_fingerprint(trainer);
    if (out.rank == 0) {
      out.send(protocol::Final{.state = fp});
      std::ofstream(final_state_path(job.run_dir)) << fp.to_json().dump(2) << '\n';
    }
    comm::CollectiveOptions bo;
    bo.timeout = job.comm_timeout;
    bo.tag = "end of training";
    world.comm->barrier(bo)->wait();
    // Last, so the resident peak (VmHWM) covers everything the rank did: the fingerprint's and
    // the export's gathers come after the steps.
    train::MemoryReport memory = train::memory_report(trainer, strategy::load_cluster(job.cluster));
    memory.resident_baseline_bytes = resident_baseline;
    out.send(protocol::Memory{.report = memory});
  } catch (const comm::CollectiveError&) {
    live.dumper->dump_all();
    throw;
  } catch (const comm::CommunicatorAborted&) {
    live.dumper->dump_all();
    throw;
  }
}

// What the supervisor needs from a timed-out collective to name the hang: op, seq, group, tag.
protocol::Hang hang_of(const comm::CollectiveTimeout& e) {
  return {.detector = std::string(kCollectiveTimeoutDetector),
          .collective = protocol::TimedOutCollective{.op = std::string(comm::to_string(e.op())),
                                                     .seq = e.seq(),
                                                     .group = e.group(),
                                                     .tag = e.tag(),
                                                     .bytes = e.bytes(),
                                                     .collective = e.info().describe(),
                                                     .timeout_seconds = e.timeout_seconds()}};
}

}  // namespace

void run_train_worker(const TrainJob& job) {
  // First, before any thread exists: SIGTERM (the supervisor's teardown) dumps the flight
  // recorders instead of killing the rank mid-sentence.
  DumpOnTerminate dumper(flight_dump_dir(job.run_dir));
  follow_supervisor();
  const comm::RendezvousEnv env = comm::from_env();
  std::filesystem::create_directories(job.run_dir);
  const std::filesystem::path records = rank_records_path(job.run_dir, env.rank);
  std::unique_ptr<train::JsonlSink> sink;
  std::unique_ptr<HeartbeatThread> heartbeat;
  if (job.heartbeat_timeout.count() > 0)
    heartbeat = std::make_unique<HeartbeatThread>(rank_heartbeat_path(job.run_dir, env.rank),
                                                  heartbeat_interval(job.heartbeat_timeout));
  Liveness live{heartbeat.get(), &dumper};
  try {
    sink = std::make_unique<train::JsonlSink>(
        records, job.trace ? rank_events_path(job.run_dir, env.rank) : std::filesystem::path{});
    train_worker(job, *sink, live);
  } catch (const comm::CollectiveTimeout& e) {
    write_error_record(records, env.rank, true, e.what(), false, hang_of(e));
    throw;
  } catch (const comm::CollectiveError& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const comm::CommunicatorAborted& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const comm::RendezvousError& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const ConfigError& e) {
    write_error_record(records, env.rank, false, e.what(), true);
    throw;
  } catch (const std::exception& e) {
    write_error_record(records, env.rank, false, e.what());
    throw;
  }
}

}  // namespace parlab::launch
