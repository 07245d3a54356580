#include "runtime/launch/worker.h"

#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "runtime/comm/flight_recorder.h"
#include "runtime/launch/supervisor.h"
#include "runtime/train/dump.h"
#include "strategy/errors.h"
#include "strategy/io.h"

namespace parlab::launch {
namespace {

const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// The error line the supervisor reads to name the root cause of a failed job.
void write_error_record(const std::filesystem::path& file, int rank, bool comm, const std::string& message) {
  std::ofstream out(file, std::ios::app);
  out << nlohmann::json{{"type", "error"},
                        {"rank", rank},
                        {"comm", comm},
                        {"seconds", comm::wall_clock_seconds()},
                        {"message", message}}
             .dump()
      << '\n';
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

WorkerWorld connect_worker(const comm::GlooOptions& options) {
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
    w.tcp = comm::make_tcp_rendezvous(w.env, local ? "127.0.0.1" : "0.0.0.0", options.timeout);
    store = w.tcp.store;
    if (!local) {
      char host[256] = {};
      if (::gethostname(host, sizeof host - 1) == 0) o.hostname = host;
    }
  }
  if (const char* ifname = env_or_null("GLOO_SOCKET_IFNAME")) o.interface = ifname;
  w.comm = comm::make_gloo_communicator(store, w.env.rank, w.env.world_size, o);
  return w;
}

InjectedFailure::InjectedFailure(int rank, int64_t step, int code)
    : RuntimeError("injected failure: rank " + std::to_string(rank) + " exits with code " +
                   std::to_string(code) + " before step " + std::to_string(step)),
      code_(code) {}

train::TrainConfig make_train_config(const TrainJob& job, int world) {
  train::TrainConfig c;
  c.model = strategy::load_model(job.model);
  (void)train::mlp_shape(c.model);  // refuse non-mlp models before anything else
  std::string plan_text = job.plan;
  if (!job.optimizer.empty()) {
    if (job.optimizer != "adam" && job.optimizer != "sgd")
      throw ConfigError("--optimizer", job.optimizer, "one of adam, sgd");
    plan_text += (plan_text.empty() ? "" : ",") + std::string("optimizer=") + job.optimizer;
  }
  c.plan = train::resolve_train_plan(c.model, plan_text, world, strategy::load_cluster(job.cluster));
  c.optimizer = train::optimizer_config(c.plan.optimizer, job.lr, job.momentum, job.weight_decay);
  c.data_size = job.data_size > 0 ? job.data_size : 64 * c.plan.global_batch;
  c.seed = job.seed;
  c.comm_timeout = job.comm_timeout;
  if (job.steps < 1) throw ConfigError("--steps", std::to_string(job.steps), "must be at least 1");
  return c;
}

void run_train_worker(const TrainJob& job) {
  follow_supervisor();
  const comm::RendezvousEnv env = comm::from_env();
  std::filesystem::create_directories(job.run_dir);
  const std::filesystem::path records = rank_records_path(job.run_dir, env.rank);
  std::unique_ptr<train::JsonlSink> sink;
  try {
    sink = std::make_unique<train::JsonlSink>(
        records, job.trace ? rank_events_path(job.run_dir, env.rank) : std::filesystem::path{});
    comm::GlooOptions go;
    go.timeout = job.comm_timeout;
    go.dump_dir = job.run_dir;  // flight-recorder dumps of a failed collective land here
    WorkerWorld world = connect_worker(go);
    const train::TrainConfig config = make_train_config(job, world.comm->size());
    train::TrainerOptions to;
    to.sink = sink.get();
    to.record_events = job.trace;
    if (!job.dump_dir.empty())
      to.dump_dir = train::dump_dir_for_rank(job.dump_dir, env.rank, world.comm->size());
    train::Trainer trainer(config, *world.comm, to);
    for (int64_t s = 0; s < job.steps; ++s) {
      if (env.rank == job.fail_rank && s == job.fail_step) throw InjectedFailure(env.rank, s, job.fail_code);
      trainer.step();
    }
    comm::CollectiveOptions bo;
    bo.timeout = job.comm_timeout;
    bo.tag = "end of training";
    world.comm->barrier(bo)->wait();
  } catch (const comm::CollectiveError& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const comm::CommunicatorAborted& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const comm::RendezvousError& e) {
    write_error_record(records, env.rank, true, e.what());
    throw;
  } catch (const std::exception& e) {
    write_error_record(records, env.rank, false, e.what());
    throw;
  }
}

}  // namespace parlab::launch
