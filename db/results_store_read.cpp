// ResultsStore: the queries the CLI, the GUI and the rubric reports need.
#include <string>

#include "db/proof_chain.h"
#include "db/results_store.h"
#include "db/store_detail.h"

namespace parlab::db {

namespace {

#define PARLAB_RUN_COLUMNS                                                                      \
  "id, experiment_id, kind, model, cluster, plan, world_size, seed, software_version, status, " \
  "started_at, ended_at, host, pid, pid_start_ticks, notes"

RunRecord read_run(const Statement& s) {
  RunRecord r;
  std::string kind, plan, status;
  detail::read_columns(s, 0, r.id, r.experiment, kind, r.model, r.cluster, plan, r.world_size, r.seed,
                       r.software_version, status, r.started_at, r.ended_at, r.host, r.pid, r.pid_start_ticks, r.notes);
  r.kind = parse_run_kind(kind, "runs.kind");
  r.plan = detail::parse_json_column(plan, "runs.plan");
  r.status = parse_run_status(status, "runs.status");
  return r;
}

ExperimentRecord read_experiment(const Statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4)};
}

#define PARLAB_CHECKPOINT_COLUMNS "id, step, path, checksum, bytes, save_seconds, verified, created_at"

CheckpointRecord read_checkpoint(const Statement& s) {
  CheckpointRecord c;
  detail::read_columns(s, 0, c.id, c.step, c.path, c.checksum, c.bytes, c.save_seconds, c.verified, c.created_at);
  return c;
}

// A proof as the store hands it out: the stored content (proof_chain.h reads it) with its JSON
// columns parsed. Only the content columns are selected, so a read-only older database serves.
ProofRecord read_proof(const Statement& s) {
  StoredProof row = read_proof_content(s);
  ProofRecord p;
  p.id = row.id;
  p.run = row.run_id;
  p.experiment = row.experiment_id;
  p.kind = std::move(row.kind);
  p.inputs = detail::parse_json_column(row.inputs, "proofs.inputs");
  p.result = std::move(row.result);
  p.passed = row.passed;
  p.evidence = detail::parse_json_column(row.evidence, "proofs.evidence");
  p.created_at = std::move(row.created_at);
  return p;
}

using detail::collect_rows;

}  // namespace

std::vector<ExperimentRecord> ResultsStore::list_experiments() {
  Statement s = connection_->statement("SELECT id, name, file, description, created_at FROM experiments ORDER BY name");
  return collect_rows(s, read_experiment);
}

std::optional<ExperimentRecord> ResultsStore::find_experiment(std::string_view name) {
  Statement s =
      connection_->statement("SELECT id, name, file, description, created_at FROM experiments WHERE name = ?");
  s.bind_all(name);
  if (!s.step()) return std::nullopt;
  return read_experiment(s);
}

std::optional<RunRecord> ResultsStore::get_run(RunId run) {
  Statement s = connection_->statement("SELECT " PARLAB_RUN_COLUMNS " FROM runs WHERE id = ?");
  s.bind_all(run);
  if (!s.step()) return std::nullopt;
  return read_run(s);
}

std::vector<RunRecord> ResultsStore::runs_of_experiment(ExperimentId experiment) {
  Statement s = connection_->statement("SELECT " PARLAB_RUN_COLUMNS " FROM runs WHERE experiment_id = ? ORDER BY id");
  s.bind_all(experiment);
  return collect_rows(s, read_run);
}

std::vector<RunRecord> ResultsStore::list_runs(std::optional<RunStatus> status) {
  Statement s =
      connection_->statement("SELECT " PARLAB_RUN_COLUMNS " FROM runs WHERE ?1 IS NULL OR status = ?1 ORDER BY id");
  if (status) s.bind_all(to_string(*status));
  return collect_rows(s, read_run);
}

std::vector<std::pair<std::string, std::string>> ResultsStore::run_params(RunId run) {
  Statement s = connection_->statement("SELECT key, value FROM run_params WHERE run_id = ? ORDER BY key");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) { return std::pair(row.text(0), row.text(1)); });
}

std::vector<StepTiming> ResultsStore::step_timings(RunId run) {
  Statement s = connection_->statement(
      "SELECT step, rank, data_seconds, forward_seconds, backward_seconds, exposed_comm_seconds, "
      "optimizer_seconds, idle_seconds, step_seconds, loss, samples, end_seconds "
      "FROM step_timings WHERE run_id = ? ORDER BY step, rank");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) {
    StepTiming t;
    detail::read_columns(row, 0, t.step, t.rank, t.data_seconds, t.forward_seconds, t.backward_seconds,
                         t.exposed_comm_seconds, t.optimizer_seconds, t.idle_seconds, t.step_seconds, t.loss, t.samples,
                         t.end_seconds);
    return t;
  });
}

std::vector<CollectiveRecord> ResultsStore::collectives(RunId run) {
  Statement s = connection_->statement(
      "SELECT rank, seq, op, group_name, bytes, group_ranks, start_seconds, seconds, "
      "algbw_bytes_per_s, busbw_bytes_per_s, tag "
      "FROM collectives WHERE run_id = ? ORDER BY rank, seq");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) {
    CollectiveRecord c;
    detail::read_columns(row, 0, c.rank, c.seq, c.op, c.group_name, c.bytes, c.group_ranks, c.start_seconds, c.seconds,
                         c.algbw_bytes_per_s, c.busbw_bytes_per_s, c.tag);
    return c;
  });
}

std::vector<CheckpointRecord> ResultsStore::checkpoints(RunId run) {
  Statement s = connection_->statement("SELECT " PARLAB_CHECKPOINT_COLUMNS
                                       " FROM checkpoints WHERE run_id = ? ORDER BY step, path");
  s.bind_all(run);
  return collect_rows(s, read_checkpoint);
}

std::optional<CheckpointRecord> ResultsStore::latest_verified_checkpoint(RunId run) {
  Statement s = connection_->statement("SELECT " PARLAB_CHECKPOINT_COLUMNS
                                       " FROM checkpoints "
                                       "WHERE run_id = ? AND verified = 1 ORDER BY step DESC, id DESC LIMIT 1");
  s.bind_all(run);
  if (!s.step()) return std::nullopt;
  return read_checkpoint(s);
}

std::vector<IncidentRecord> ResultsStore::incidents(RunId run) {
  Statement s = connection_->statement(
      "SELECT id, kind, rank, step, detail, detected_at, detection_seconds, restart_seconds, "
      "steps_lost FROM incidents WHERE run_id = ? ORDER BY id");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) {
    IncidentRecord i;
    std::string kind;
    detail::read_columns(row, 0, i.id, kind, i.rank, i.step, i.detail, i.detected_at, i.detection_seconds,
                         i.restart_seconds, i.steps_lost);
    i.kind = parse_incident_kind(kind, "incidents.kind");
    return i;
  });
}

std::map<std::string, double> ResultsStore::run_metrics(RunId run) {
  Statement s = connection_->statement("SELECT key, value FROM run_metrics WHERE run_id = ?");
  s.bind_all(run);
  std::map<std::string, double> metrics;
  while (s.step()) metrics.emplace(s.text(0), s.real(1));
  return metrics;
}

std::vector<ProofRecord> ResultsStore::proofs_of_run(RunId run) {
  Statement s =
      connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS " FROM proofs WHERE run_id = ? ORDER BY id");
  s.bind_all(run);
  return collect_rows(s, read_proof);
}

std::vector<ProofRecord> ResultsStore::proofs_of_experiment(ExperimentId experiment) {
  Statement s =
      connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS " FROM proofs WHERE experiment_id = ? ORDER BY id");
  s.bind_all(experiment);
  return collect_rows(s, read_proof);
}

std::vector<ProofRecord> ResultsStore::list_proofs() {
  Statement s = connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS " FROM proofs ORDER BY id");
  return collect_rows(s, read_proof);
}

std::optional<CalibrationRecord> ResultsStore::latest_calibration(std::optional<std::string> machine) {
  Statement s = connection_->statement(
      "SELECT id, machine, created_at, json FROM calibrations "
      "WHERE ?1 IS NULL OR machine = ?1 ORDER BY created_at DESC, id DESC LIMIT 1");
  s.bind_all(machine);
  if (!s.step()) return std::nullopt;
  return CalibrationRecord{s.int64(0), s.text(1), s.text(2), detail::parse_json_column(s.text(3), "calibrations.json")};
}

}  // namespace parlab::db
