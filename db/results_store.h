#pragma once
// ResultsStore: the one SQLite file where experiments, runs and everything they measured land.
//
// Many processes write at once (the supervisor and every worker rank), so each write is its own
// short BEGIN IMMEDIATE transaction committed at once: whatever a run wrote before it crashed is
// kept. Calls made while a Transaction is open on the store join it instead (batch them that way).
// Every write names the run it belongs to. One ResultsStore per thread; open as many as needed.
//
//   auto store = ResultsStore::open("results/parlab.db");
//   RunId run = store.begin_run({.kind = RunKind::kMeasured, .model = "gpt-tiny", ...});
//   for (...) store.add_step_timing(run, timing);       // committed per step
//   store.mark_run_status(run, RunStatus::kCompleted);
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "db/db_error.h"
#include "db/records.h"
#include "db/sqlite.h"
#include "db/transaction.h"

namespace parlab::db {

// Where the lab keeps its database unless told otherwise (relative to the working directory).
inline constexpr const char* kDefaultDatabasePath = "results/parlab.db";

struct OpenOptions {
  std::chrono::milliseconds busy_timeout{10'000};
  // Mark runs left 'running' by processes of this host that no longer exist as 'killed'.
  bool sweep_stale_runs = true;
  // Only read (listing, comparing): the file must exist and be at the current schema version; it
  // is neither migrated nor swept, so a read-only file or disk serves.
  bool read_only = false;
};

class ResultsStore {
 public:
  // Opens the database at `path` (":memory:" for a private in-memory one), creating the file
  // and its parent directories and migrating it to the current schema. Throws DbError, or
  // SchemaError for a file from a newer parlab or not from parlab at all.
  static ResultsStore open(const std::filesystem::path& path, const OpenOptions& options = {});

  // open() with options.read_only: no migration, no sweep, a WAL file on read-only media read as
  // immutable.
  static ResultsStore open_read_only(const std::filesystem::path& path, const OpenOptions& options);

  ResultsStore(ResultsStore&&) noexcept;
  ResultsStore& operator=(ResultsStore&&) noexcept;
  ~ResultsStore();

  // ---- runs --------------------------------------------------------------------------------
  // Inserts or updates (by name) an experiment and returns its id.
  ExperimentId upsert_experiment(const NewExperiment& experiment);
  // Inserts a run with status 'running', owned by `run.owner_pid` (default: this process).
  RunId begin_run(const NewRun& run);
  // Sets the status; any status but 'running' also stamps ended_at. `notes`, when given,
  // replaces the run's notes (say why it failed). Throws DbError when the run does not exist.
  void mark_run_status(RunId run, RunStatus status, std::optional<std::string> notes = {});
  // Marks runs still 'running' whose owning process on this host no longer exists as 'killed'
  // (ended_at stamped, notes say why) and returns their ids. Runs owned by other hosts are left
  // alone: their processes cannot be checked from here.
  std::vector<RunId> sweep_stale_runs();

  // ---- what a run produced (each call commits unless a Transaction is open) -----------------
  void set_run_param(RunId run, std::string_view key, std::string_view value);
  void set_run_params(RunId run, std::span<const std::pair<std::string, std::string>> params);
  // A step replayed after a restart replaces the row its lost attempt wrote (same step, rank).
  void add_step_timing(RunId run, const StepTiming& timing);
  void add_step_timings(RunId run, std::span<const StepTiming> timings);  // one transaction
  void add_collective(RunId run, const CollectiveRecord& collective);
  void add_collectives(RunId run, std::span<const CollectiveRecord> collectives);
  std::int64_t add_checkpoint(RunId run, const CheckpointRecord& checkpoint);
  void set_checkpoint_verified(RunId run, std::int64_t step, std::string_view path, bool verified);
  std::int64_t add_incident(RunId run, const IncidentRecord& incident);
  void set_run_metric(RunId run, std::string_view key, double value);
  // A proof about a run, an experiment or both (at least one must be set).
  std::int64_t add_proof(const ProofRecord& proof);
  std::int64_t add_calibration(std::string_view machine, const nlohmann::json& calibration);
  // A prediction committed before its result is shown (revealed stays NULL); returns its id.
  std::int64_t add_prediction(const NewPrediction& prediction);
  // The value that revealed it (and the run that produced it), stamped now. Throws DbError when
  // the prediction does not exist or was already revealed: a reveal is written once.
  void reveal_prediction(std::int64_t prediction, double revealed, std::optional<RunId> run = {});

  // ---- queries -----------------------------------------------------------------------------
  std::vector<ExperimentRecord> list_experiments();  // by name
  std::optional<ExperimentRecord> find_experiment(std::string_view name);
  std::optional<RunRecord> get_run(RunId run);
  std::vector<RunRecord> runs_of_experiment(ExperimentId experiment);      // oldest first
  std::vector<RunRecord> list_runs(std::optional<RunStatus> status = {});  // oldest first
  std::vector<std::pair<std::string, std::string>> run_params(RunId run);  // by key
  std::vector<StepTiming> step_timings(RunId run);                         // by step, then rank
  std::vector<CollectiveRecord> collectives(RunId run);                    // by rank, then seq
  std::vector<CheckpointRecord> checkpoints(RunId run);                    // by step, then path
  std::optional<CheckpointRecord> latest_verified_checkpoint(RunId run);
  std::vector<IncidentRecord> incidents(RunId run);  // in order recorded
  std::map<std::string, double> run_metrics(RunId run);
  std::vector<ProofRecord> proofs_of_run(RunId run);
  std::vector<ProofRecord> proofs_of_experiment(ExperimentId experiment);
  std::vector<ProofRecord> list_proofs();            // every proof, in order recorded
  std::vector<PredictionRecord> list_predictions();  // in order made
  std::optional<PredictionRecord> get_prediction(std::int64_t prediction);
  // The newest calibration of `machine`, or of any machine when none is named.
  std::optional<CalibrationRecord> latest_calibration(std::optional<std::string> machine = {});

  int schema_version();
  const std::filesystem::path& path() const;
  // For Transaction and for queries this API does not cover yet (bind values; never splice).
  Connection& connection();

 private:
  explicit ResultsStore(std::unique_ptr<Connection> connection);

  std::unique_ptr<Connection> connection_;
};

}  // namespace parlab::db
