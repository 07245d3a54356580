#pragma once
// RunRecorder: one measured training run in the results database (db/results_store.h), the
// RunSink (runtime/launch/run_sink.h) run_training reports to when a run is recorded.
//
// The supervisor process owns the run and is the single writer of its rows; workers report
// through their JSON-line records, which run_training already reads. Rows written:
//   runs          kind measured, model, cluster, plan JSON, world size, seed (begin())
//   run_params    nproc, min_nproc, max_restarts, checkpoint_every, keep_last, steps, plan text,
//                 faults, run_dir, timeout_seconds, heartbeat_timeout_seconds, max_same_failure,
//                 fallback_plan_configured; final_state_xxh3_64 at the end; fallback,
//                 fallback_plan, fallback_reason, fallback_world when the job degraded
//   step_timings  per step and rank: data, forward, backward, exposed comm, optimizer, idle,
//                 step seconds, the rank's mean loss, samples, when the rank finished it (a replayed
//                 step replaces its row)
//   checkpoints   step, path, checksum (xxh3_64 of manifest.json), bytes, save seconds, verified
//                 (set when a resume or the end-of-run verification read it back)
//   incidents     every failure with rank, step, detail, detection and restart seconds, steps
//                 lost (kind hang for collective timeouts and silent ranks); stragglers (kind
//                 straggler); a checkpoint a resume skipped as checkpoint_corrupt
//   run_metrics   steps_completed, attempts, restarts, final_world, wall_seconds, step_seconds,
//                 samples_per_s, checkpoint_seconds, young_daly_interval_seconds/_steps,
//                 restart_total_seconds (mean), steps_lost
//                 memory.rank<r>.<category>.peak_bytes / .ledger_bytes (and total, resident)
//   status        completed / failed / killed (interrupted), notes = the failure message
// Destroyed without finish(), the run is marked failed (an exception in the caller).
//
//   auto store = db::ResultsStore::open("results/parlab.db");
//   record::RunRecorder rec = record::RunRecorder::begin(store, spec);
//   TrainOutcome out = run_training(spec, {.recorder = &rec});   // finish() is called for you
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "db/results_store.h"
#include "runtime/launch/run_sink.h"
#include "runtime/launch/run_training.h"

namespace parlab::record {

class RunRecorder final : public launch::RunSink {
 public:
  // Inserts the run row (status running, owned by this process) and its parameters.
  static RunRecorder begin(db::ResultsStore& store, const launch::TrainJobSpec& spec,
                           std::optional<db::ExperimentId> experiment = {});
  // Records into an existing run (the caller made the row). Borrows `store`.
  RunRecorder(db::ResultsStore& store, db::RunId run);
  RunRecorder(RunRecorder&& other) noexcept;
  RunRecorder& operator=(RunRecorder&&) = delete;
  RunRecorder(const RunRecorder&) = delete;
  ~RunRecorder() override;

  // The run row a measured training job starts with.
  static db::NewRun new_run(const launch::TrainJobSpec& spec, std::optional<db::ExperimentId> experiment = {});

  db::RunId run() const { return run_; }
  db::ResultsStore& store() { return *store_; }
  std::optional<int64_t> run_id() const override { return run_; }

  // Buffered; written in one transaction per 64 records and by flush().
  void add_step(const train::StepRecord& record) override;
  void flush() override;
  void add_checkpoint(const launch::CheckpointReport& checkpoint) override;
  void checkpoint_verified(int64_t step, const std::string& path, bool verified) override;
  void checkpoint_skipped(int64_t step, const std::string& path, const std::string& reason) override;
  void add_incident(const launch::IncidentReport& incident) override;
  // The fallback plan a repeated failure led to (run params, written at once).
  void add_fallback(const launch::FallbackReport& fallback) override;
  // Metrics, final parameters and the run's status.
  void finish(const launch::TrainOutcome& outcome) override;

 private:
  void record_memory(const std::vector<train::MemoryReport>& reports);
  db::ResultsStore* store_;
  db::RunId run_;
  bool finished_ = false;
  std::vector<db::StepTiming> pending_;
  std::set<std::pair<int64_t, std::string>> checkpoints_;  // (step, path) rows written
};

// How an incident is stored: each runtime kind under the database kind of the same name.
db::IncidentKind to_db(launch::IncidentKind kind);
db::IncidentRecord to_incident_record(const launch::IncidentReport& incident);

}  // namespace parlab::record
