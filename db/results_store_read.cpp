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
  r.id = s.int64(0);
  r.experiment = s.optional_int64(1);
  r.kind = parse_run_kind(s.text(2), "runs.kind");
  r.model = s.text(3);
  r.cluster = s.text(4);
  r.plan = detail::parse_json_column(s.text(5), "runs.plan");
  r.world_size = static_cast<int>(s.int64(6));
  r.seed = static_cast<std::uint64_t>(s.int64(7));
  r.software_version = s.text(8);
  r.status = parse_run_status(s.text(9), "runs.status");
  r.started_at = s.text(10);
  r.ended_at = s.optional_text(11);
  r.host = s.text(12);
  r.pid = s.optional_int64(13);
  r.pid_start_ticks = s.optional_int64(14);
  r.notes = s.text(15);
  return r;
}

ExperimentRecord read_experiment(const Statement& s) {
  return {s.int64(0), s.text(1), s.text(2), s.text(3), s.text(4)};
}

#define PARLAB_CHECKPOINT_COLUMNS \
  "id, step, path, checksum, bytes, save_seconds, verified, created_at"

CheckpointRecord read_checkpoint(const Statement& s) {
  CheckpointRecord c;
  c.id = s.int64(0);
  c.step = s.int64(1);
  c.path = s.text(2);
  c.checksum = s.text(3);
  c.bytes = s.int64(4);
  c.save_seconds = s.real(5);
  c.verified = s.int64(6) != 0;
  c.created_at = s.text(7);
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
  Statement s = connection_->statement(
      "SELECT id, name, file, description, created_at FROM experiments ORDER BY name");
  return collect_rows(s, read_experiment);
}

std::optional<ExperimentRecord> ResultsStore::find_experiment(std::string_view name) {
  Statement s = connection_->statement(
      "SELECT id, name, file, description, created_at FROM experiments WHERE name = ?");
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
  Statement s = connection_->statement("SELECT " PARLAB_RUN_COLUMNS
                                       " FROM runs WHERE experiment_id = ? ORDER BY id");
  s.bind_all(experiment);
  return collect_rows(s, read_run);
}

std::vector<RunRecord> ResultsStore::list_runs(std::optional<RunStatus> status) {
  Statement s = connection_->statement("SELECT " PARLAB_RUN_COLUMNS
                                       " FROM runs WHERE ?1 IS NULL OR status = ?1 ORDER BY id");
  if (status) s.bind_all(to_string(*status));
  return collect_rows(s, read_run);
}

std::vector<std::pair<std::string, std::string>> ResultsStore::run_params(RunId run) {
  Statement s =
      connection_->statement("SELECT key, value FROM run_params WHERE run_id = ? ORDER BY key");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) { return std::pair(row.text(0), row.text(1)); });
}

std::vector<StepTiming> ResultsStore::step_timings(RunId run) {
  Statement s = connection_->statement(
      "SELECT step, rank, data_seconds, forward_seconds, backward_seconds, exposed_comm_seconds, "
      "optimizer_seconds, idle_seconds, step_seconds, loss, samples "
      "FROM step_timings WHERE run_id = ? ORDER BY step, rank");
  s.bind_all(run);
  return collect_rows(s, [](const Statement& row) {
    StepTiming t;
    t.step = row.int64(0);
    t.rank = static_cast<int>(row.int64(1));
    t.data_seconds = row.real(2);
    t.forward_seconds = row.real(3);
    t.backward_seconds = row.real(4);
    t.exposed_comm_seconds = row.real(5);
    t.optimizer_seconds = row.real(6);
    t.idle_seconds = row.real(7);
    t.step_seconds = row.real(8);
    t.loss = row.optional_real(9);
    t.samples = row.int64(10);
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
    c.rank = static_cast<int>(row.int64(0));
    c.seq = row.int64(1);
    c.op = row.text(2);
    c.group_name = row.text(3);
    c.bytes = row.int64(4);
    c.group_ranks = static_cast<int>(row.int64(5));
    c.start_seconds = row.optional_real(6);
    c.seconds = row.real(7);
    c.algbw_bytes_per_s = row.optional_real(8);
    c.busbw_bytes_per_s = row.optional_real(9);
    c.tag = row.text(10);
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
  Statement s = connection_->statement(
      "SELECT " PARLAB_CHECKPOINT_COLUMNS
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
    i.id = row.int64(0);
    i.kind = parse_incident_kind(row.text(1), "incidents.kind");
    if (const auto rank = row.optional_int64(2)) i.rank = static_cast<int>(*rank);
    i.step = row.optional_int64(3);
    i.detail = row.text(4);
    i.detected_at = row.text(5);
    i.detection_seconds = row.optional_real(6);
    i.restart_seconds = row.optional_real(7);
    i.steps_lost = row.optional_int64(8);
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
  Statement s = connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS
                                       " FROM proofs WHERE run_id = ? ORDER BY id");
  s.bind_all(run);
  return collect_rows(s, read_proof);
}

std::vector<ProofRecord> ResultsStore::proofs_of_experiment(ExperimentId experiment) {
  Statement s = connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS
                                       " FROM proofs WHERE experiment_id = ? ORDER BY id");
  s.bind_all(experiment);
  return collect_rows(s, read_proof);
}

std::vector<ProofRecord> ResultsStore::list_proofs() {
  Statement s = connection_->statement("SELECT " PARLAB_PROOF_CONTENT_COLUMNS " FROM proofs ORDER BY id");
  return collect_rows(s, read_proof);
}

std::optional<CalibrationRecord> ResultsStore::latest_calibration(
    std::optional<std::string> machine) {
  Statement s = connection_->statement(
      "SELECT id, machine, created_at, json FROM calibrations "
      "WHERE ?1 IS NULL OR machine = ?1 ORDER BY created_at DESC, id DESC LIMIT 1");
  s.bind_all(machine);
  if (!s.step()) return std::nullopt;
  return CalibrationRecord{s.int64(0), s.text(1), s.text(2),
                           detail::parse_json_column(s.text(3), "calibrations.json")};
}

}  // namespace parlab::db
