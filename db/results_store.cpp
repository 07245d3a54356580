// ResultsStore: opening, run lifecycle and the stale-run sweep.
#include "db/results_store.h"

#include <string>

#include "db/migrate.h"
#include "db/process_identity.h"
#include "db/store_detail.h"
#include "parlab/version.h"

namespace parlab::db {

namespace detail {
nlohmann::json parse_json_column(const std::string& text, std::string_view where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw DbError(std::string(where) + " holds invalid JSON: " + e.what(), 0, 0);
  }
}
}  // namespace detail

using detail::write_scope;

ResultsStore ResultsStore::open(const std::filesystem::path& path, const OpenOptions& options) {
  if (options.read_only) return open_read_only(path, options);
  auto connection = std::make_unique<Connection>(path, ConnectionOptions{options.busy_timeout});
  migrate(*connection);
  ResultsStore store(std::move(connection));
  if (options.sweep_stale_runs) store.sweep_stale_runs();
  return store;
}

ResultsStore ResultsStore::open_read_only(const std::filesystem::path& path, const OpenOptions& options) {
  std::unique_ptr<Connection> connection;
  int found = 0;
  try {
    connection = std::make_unique<Connection>(path, ConnectionOptions{options.busy_timeout, true});
    found = connection->user_version();
  } catch (const DbError& e) {
    // A WAL database on read-only media: SQLite cannot create its -shm index, so read the file
    // as immutable (nothing can write it there anyway).
    if (e.code() != 14 /* SQLITE_CANTOPEN */) throw;
    connection = std::make_unique<Connection>(path, ConnectionOptions{options.busy_timeout, true, true});
    found = connection->user_version();
  }
  if (found != latest_schema_version())
    throw SchemaError(
        path.string() + ": schema version " + std::to_string(found) + ", this parlab reads " +
            std::to_string(latest_schema_version()) +
            (found < latest_schema_version() ? " (open it once with a command that writes, to upgrade it)" : ""),
        0, 0);
  return ResultsStore(std::move(connection));
}

ResultsStore::ResultsStore(std::unique_ptr<Connection> connection) : connection_(std::move(connection)) {}
ResultsStore::ResultsStore(ResultsStore&&) noexcept = default;
ResultsStore& ResultsStore::operator=(ResultsStore&&) noexcept = default;
ResultsStore::~ResultsStore() = default;

int ResultsStore::schema_version() { return connection_->user_version(); }
const std::filesystem::path& ResultsStore::path() const { return connection_->path(); }
Connection& ResultsStore::connection() { return *connection_; }

ExperimentId ResultsStore::upsert_experiment(const NewExperiment& experiment) {
  return write_scope(*connection_, [&] {
    Statement s = connection_->statement(
        "INSERT INTO experiments(name, file, description) VALUES (?, ?, ?) "
        "ON CONFLICT(name) DO UPDATE SET file = excluded.file, description = excluded.description "
        "RETURNING id");
    s.bind_all(experiment.name, experiment.file, experiment.description).step_one();
    return s.int64(0);
  });
}

namespace {

// The owner recorded on a run: the caller unless the run names another process.
ProcessIdentity owner_of(const NewRun& run) {
  if (!run.owner_pid) {
    ProcessIdentity self = current_process();
    if (run.host) self.host = *run.host;
    return self;
  }
  ProcessIdentity owner;
  owner.pid = *run.owner_pid;
  owner.host = run.host.value_or(host_name());
  owner.start_ticks = run.owner_pid_start_ticks;
  if (!owner.start_ticks && owner.host == host_name()) {
    owner.start_ticks = process_start_ticks(owner.pid);
  }
  return owner;
}

}  // namespace

RunId ResultsStore::begin_run(const NewRun& run) {
  const ProcessIdentity owner = owner_of(run);
  const std::string version = run.software_version.empty() ? kVersion : run.software_version;
  return write_scope(*connection_, [&] {
    Statement s = connection_->statement(
        "INSERT INTO runs(experiment_id, kind, model, cluster, plan, world_size, seed, "
        "software_version, host, pid, pid_start_ticks, notes) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
    s.bind_all(run.experiment, to_string(run.kind), run.model, run.cluster, run.plan.dump(), run.world_size, run.seed,
               version, owner.host, owner.pid, owner.start_ticks, run.notes)
        .step_one();
    return s.int64(0);
  });
}

void ResultsStore::mark_run_status(RunId run, RunStatus status, std::optional<std::string> notes) {
  write_scope(*connection_, [&] {
    connection_
        ->statement(
            "UPDATE runs SET status = ?2, "
            "ended_at = CASE WHEN ?2 = 'running' THEN NULL ELSE " PARLAB_DB_NOW
            " END, "
            "notes = COALESCE(?3, notes) WHERE id = ?1")
        .bind_all(run, to_string(status), notes)
        .run();
    if (connection_->changes() != 1) {
      throw DbError("mark_run_status: no run with id " + std::to_string(run), 0, 0);
    }
  });
}

std::vector<RunId> ResultsStore::sweep_stale_runs() {
  struct Candidate {
    RunId id;
    std::int64_t pid;
    std::optional<std::int64_t> start_ticks;
  };
  const std::string host = host_name();
  // Read first, outside any transaction: usually nothing is stale and no write lock is needed.
  std::vector<Candidate> stale;
  {
    Statement s = connection_->statement(
        "SELECT id, pid, pid_start_ticks FROM runs "
        "WHERE status = 'running' AND host = ? AND pid IS NOT NULL ORDER BY id");
    s.bind_all(host);
    while (s.step()) {
      Candidate c{s.int64(0), s.int64(1), s.optional_int64(2)};
      if (!process_alive(c.pid, c.start_ticks)) stale.push_back(c);
    }
  }
  if (stale.empty()) return {};
  std::vector<RunId> swept;
  write_scope(*connection_, [&] {
    for (const Candidate& c : stale) {
      const std::string why = "owner process " + std::to_string(c.pid) + " on " + host +
                              " no longer exists; marked killed by the stale-run sweep";
      // The status guard keeps a run that its owner finished meanwhile as the owner left it.
      connection_
          ->statement("UPDATE runs SET status = 'killed', ended_at = " PARLAB_DB_NOW
                      ", "
                      "notes = CASE WHEN notes = '' THEN ?2 ELSE notes || char(10) || ?2 END "
                      "WHERE id = ?1 AND status = 'running'")
          .bind_all(c.id, why)
          .run();
      if (connection_->changes() == 1) swept.push_back(c.id);
    }
  });
  return swept;
}

}  // namespace parlab::db
