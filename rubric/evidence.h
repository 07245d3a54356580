#pragma once
// Everything a grader reads from one results database, read once: the proofs with their chain
// status (db/proof_chain.h), experiment names, runs, incidents and the desktop lab's predictions.
// Checks read this, never the database, so a report is one consistent snapshot.
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "db/proof_chain.h"
#include "db/results_store.h"

namespace parlab::rubric {

struct Proof {
  db::StoredProof row;
  nlohmann::json inputs, evidence;  // parsed (null when the stored text is not JSON any more)
  std::string experiment;           // the experiment's name, "" when none
  db::ChainStatus chain = db::ChainStatus::kIntact;
  std::string chain_detail;
  // Whether a grader may credit it: its content matches its digest (unchained rows only when
  // GradeOptions::accept_unchained).
  bool trusted = false;
};

struct Prediction {
  std::int64_t id = 0;
  std::string quantity, source;
  int world_size = 1;
  double predicted = 0;
  std::optional<double> revealed;
  std::string predicted_at;
  std::optional<std::string> revealed_at;
};

struct Evidence {
  std::string db_path;
  int schema_version = 0;
  std::vector<Proof> proofs;  // by id
  db::ChainReport chain;
  std::vector<db::RunRecord> runs;
  std::map<db::RunId, std::vector<db::IncidentRecord>> incidents;
  std::map<db::RunId, std::map<std::string, double>> metrics;
  std::map<db::RunId, std::map<std::string, std::string>> params;
  std::vector<Prediction> predictions;
  std::string software_versions;  // distinct versions that wrote the proofs, comma-separated
  std::string machines;           // distinct machine fingerprints

  // Trusted proofs of `kind` (of `experiment` when not empty), oldest first.
  std::vector<const Proof*> trusted(const std::string& kind, const std::string& experiment = "") const;
  // Untrusted ones (tampered, or unchained when those are refused) of the same selection.
  std::vector<const Proof*> untrusted(const std::string& kind, const std::string& experiment = "") const;
  const db::RunRecord* run(db::RunId id) const;
};

// Reads the database (read-only use; the stale-run sweep is not run).
Evidence read_evidence(db::ResultsStore& store, bool accept_unchained = false);

}  // namespace parlab::rubric
