#include "rubric/evidence.h"

#include <set>

namespace parlab::rubric {
namespace {

nlohmann::json parse_or_null(const std::string& text) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

std::string join(const std::set<std::string>& items) {
  std::string s;
  for (const auto& i : items) s += (s.empty() ? "" : ", ") + i;
  return s;
}

// The store's predictions (db reads the rows) in the grader's terms.
std::vector<Prediction> read_predictions(db::ResultsStore& store) {
  std::vector<Prediction> out;
  for (db::PredictionRecord& r : store.list_predictions())
    out.push_back({r.id, std::move(r.quantity), std::string(db::to_string(r.source)), r.world_size, r.predicted,
                   r.revealed, std::move(r.predicted_at), std::move(r.revealed_at)});
  return out;
}

}  // namespace

std::vector<const Proof*> Evidence::trusted(const std::string& kind, const std::string& experiment) const {
  std::vector<const Proof*> out;
  for (const Proof& p : proofs)
    if (p.trusted && p.row.kind == kind && (experiment.empty() || p.experiment == experiment)) out.push_back(&p);
  return out;
}

std::vector<const Proof*> Evidence::untrusted(const std::string& kind, const std::string& experiment) const {
  std::vector<const Proof*> out;
  for (const Proof& p : proofs)
    if (!p.trusted && p.row.kind == kind && (experiment.empty() || p.experiment == experiment)) out.push_back(&p);
  return out;
}

const db::RunRecord* Evidence::run(db::RunId id) const {
  for (const db::RunRecord& r : runs)
    if (r.id == id) return &r;
  return nullptr;
}

Evidence read_evidence(db::ResultsStore& store, bool accept_unchained) {
  Evidence e;
  e.db_path = store.path().string();
  e.schema_version = store.schema_version();
  std::map<db::ExperimentId, std::string> names;
  for (const auto& x : store.list_experiments()) names[x.id] = x.name;
  e.chain = db::verify_proof_chain(store.connection());
  std::set<std::string> versions, machines;
  for (db::StoredProof& row : db::read_stored_proofs(store.connection())) {
    Proof p;
    p.inputs = parse_or_null(row.inputs);
    p.evidence = parse_or_null(row.evidence);
    if (row.experiment_id && names.count(*row.experiment_id)) p.experiment = names[*row.experiment_id];
    if (const db::ChainEntry* c = e.chain.find(row.id)) p.chain = c->status, p.chain_detail = c->detail;
    p.trusted = (db::ChainEntry{row.id, p.chain, ""}.content_verified() ||
                 (accept_unchained && p.chain == db::ChainStatus::kUnchained)) &&
                !p.inputs.is_null() && !p.evidence.is_null();
    if (!row.software_version.empty()) versions.insert(row.software_version);
    if (!row.machine.empty()) machines.insert(row.machine);
    p.row = std::move(row);
    e.proofs.push_back(std::move(p));
  }
  e.software_versions = join(versions);
  e.machines = join(machines);
  e.runs = store.list_runs();
  for (const auto& r : e.runs) {
    auto inc = store.incidents(r.id);
    if (!inc.empty()) e.incidents[r.id] = std::move(inc);
    auto m = store.run_metrics(r.id);
    if (!m.empty()) e.metrics[r.id] = std::move(m);
    for (auto& [k, v] : store.run_params(r.id)) e.params[r.id][k] = std::move(v);
  }
  if (e.schema_version >= 3) e.predictions = read_predictions(store);
  return e;
}

}  // namespace parlab::rubric
