// ResultsStore: what a run produced. Every insert names its run; foreign keys reject an unknown
// run id. Each call commits on its own unless the caller holds a Transaction.
#include <string>

#include "db/proof_chain.h"
#include "db/results_store.h"
#include "db/store_detail.h"

namespace parlab::db {

using detail::write_scope;

void ResultsStore::set_run_param(RunId run, std::string_view key, std::string_view value) {
  write_scope(*connection_, [&] {
    connection_
        ->statement(
            "INSERT INTO run_params(run_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value")
        .bind_all(run, key, value)
        .run();
  });
}

void ResultsStore::set_run_params(RunId run, std::span<const std::pair<std::string, std::string>> params) {
  write_scope(*connection_, [&] {
    for (const auto& [key, value] : params) set_run_param(run, key, value);
  });
}

void ResultsStore::add_step_timing(RunId run, const StepTiming& t) {
  write_scope(*connection_, [&] {
    connection_
        ->statement(
            "INSERT OR REPLACE INTO step_timings(run_id, step, rank, data_seconds, "
            "forward_seconds, backward_seconds, exposed_comm_seconds, optimizer_seconds, "
            "idle_seconds, step_seconds, loss, samples, end_seconds) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind_all(run, t.step, t.rank, t.data_seconds, t.forward_seconds, t.backward_seconds, t.exposed_comm_seconds,
                  t.optimizer_seconds, t.idle_seconds, t.step_seconds, t.loss, t.samples, t.end_seconds)
        .run();
  });
}

void ResultsStore::add_step_timings(RunId run, std::span<const StepTiming> timings) {
  write_scope(*connection_, [&] {
    for (const StepTiming& t : timings) add_step_timing(run, t);
  });
}

void ResultsStore::add_collective(RunId run, const CollectiveRecord& c) {
  write_scope(*connection_, [&] {
    connection_
        ->statement(
            "INSERT INTO collectives(run_id, rank, seq, op, group_name, bytes, group_ranks, "
            "start_seconds, seconds, algbw_bytes_per_s, busbw_bytes_per_s, tag) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind_all(run, c.rank, c.seq, c.op, c.group_name, c.bytes, c.group_ranks, c.start_seconds, c.seconds,
                  c.algbw_bytes_per_s, c.busbw_bytes_per_s, c.tag)
        .run();
  });
}

void ResultsStore::add_collectives(RunId run, std::span<const CollectiveRecord> collectives) {
  write_scope(*connection_, [&] {
    for (const CollectiveRecord& c : collectives) add_collective(run, c);
  });
}

std::int64_t ResultsStore::add_checkpoint(RunId run, const CheckpointRecord& c) {
  return write_scope(*connection_, [&] {
    Statement s = connection_->statement(
        "INSERT INTO checkpoints(run_id, step, path, checksum, bytes, save_seconds, verified) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id");
    s.bind_all(run, c.step, c.path, c.checksum, c.bytes, c.save_seconds, c.verified).step_one();
    return s.int64(0);
  });
}

void ResultsStore::set_checkpoint_verified(RunId run, std::int64_t step, std::string_view path, bool verified) {
  write_scope(*connection_, [&] {
    connection_->statement("UPDATE checkpoints SET verified = ? WHERE run_id = ? AND step = ? AND path = ?")
        .bind_all(verified, run, step, path)
        .run();
    if (connection_->changes() != 1) {
      throw DbError("set_checkpoint_verified: run " + std::to_string(run) + " has no checkpoint " + std::string(path) +
                        " at step " + std::to_string(step),
                    0, 0);
    }
  });
}

std::int64_t ResultsStore::add_incident(RunId run, const IncidentRecord& i) {
  return write_scope(*connection_, [&] {
    Statement s = connection_->statement(
        "INSERT INTO incidents(run_id, kind, rank, step, detail, detected_at, detection_seconds, "
        "restart_seconds, steps_lost) "
        "VALUES (?, ?, ?, ?, ?, COALESCE(NULLIF(?, ''), " PARLAB_DB_NOW "), ?, ?, ?) RETURNING id");
    s.bind_all(run, to_string(i.kind), i.rank, i.step, i.detail, i.detected_at, i.detection_seconds, i.restart_seconds,
               i.steps_lost)
        .step_one();
    return s.int64(0);
  });
}

void ResultsStore::set_run_metric(RunId run, std::string_view key, double value) {
  write_scope(*connection_, [&] {
    connection_
        ->statement(
            "INSERT INTO run_metrics(run_id, key, value) VALUES (?, ?, ?) "
            "ON CONFLICT(run_id, key) DO UPDATE SET value = excluded.value")
        .bind_all(run, key, value)
        .run();
  });
}

std::int64_t ResultsStore::add_proof(const ProofRecord& p) {
  const ProofProvenance& who = this_process_provenance();
  return write_scope(*connection_, [&] {
    // Inside the write lock: the chain's tail cannot move between this read and the insert.
    std::string previous;
    {
      Statement last = connection_->statement("SELECT digest FROM proofs ORDER BY id DESC LIMIT 1");
      if (last.step()) previous = last.optional_text(0).value_or("");
    }
    StoredProof row;
    row.run_id = p.run;
    row.experiment_id = p.experiment;
    row.kind = p.kind;
    row.inputs = p.inputs.dump();
    row.result = p.result;
    row.passed = p.passed;
    row.evidence = p.evidence.dump();
    row.software_version = who.software_version;
    row.binary_hash = who.binary_hash;
    row.machine = who.machine;
    row.prev_digest = previous;
    {
      Statement s = connection_->statement(
          "INSERT INTO proofs(run_id, experiment_id, kind, inputs, result, passed, evidence, "
          "software_version, binary_hash, machine, prev_digest) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id, created_at");
      s.bind_all(row.run_id, row.experiment_id, row.kind, row.inputs, row.result, row.passed, row.evidence,
                 row.software_version, row.binary_hash, row.machine, previous)
          .step_one();
      row.id = s.int64(0);
      row.created_at = s.text(1);
    }
    connection_->statement("UPDATE proofs SET digest = ? WHERE id = ?").bind_all(proof_digest(row), row.id).run();
    return row.id;
  });
}

std::int64_t ResultsStore::add_calibration(std::string_view machine, const nlohmann::json& calibration) {
  return write_scope(*connection_, [&] {
    Statement s = connection_->statement("INSERT INTO calibrations(machine, json) VALUES (?, ?) RETURNING id");
    s.bind_all(machine, calibration.dump()).step_one();
    return s.int64(0);
  });
}

}  // namespace parlab::db
