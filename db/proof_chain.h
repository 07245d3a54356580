#pragma once
// The proofs digest chain (schema v4): evidence a grader can trust.
//
// Every proof row carries who wrote it and a digest of its own content chained to the previous
// proof's digest:
//
//   software_version  parlab::kVersion of the writer
//   binary_hash       "xxh3_128:<hex>" of the writing executable's file (/proc/self/exe)
//   machine           "<host> <hex>": the host name and an xxh3_64 of /etc/machine-id, the CPU
//                     model and the core count
//   prev_digest       the digest of the proof with the next lower id ("" for the first)
//   digest            "xxh3_128:<hex>" of canonical_proof_text(row): every column above and the
//                     row's own (id, run_id, experiment_id, kind, inputs, result, passed,
//                     evidence, created_at), each as "name=<byte length>:<bytes>\n"
//
// ResultsStore::add_proof computes them inside the row's own write transaction (BEGIN
// IMMEDIATE, so concurrent writers append one at a time).
//
// What the chain shows, and what it does not: a row edited afterwards (sqlite3 shell, a script)
// no longer matches its digest -> tampered; a row deleted leaves its successor's prev_digest
// pointing at nothing -> a gap reported at the successor; rows before v4 have no digest ->
// unchained. XXH3 is not a keyed MAC: someone who recomputes every digest after an edit
// (with this source in hand) is not caught. The chain catches edits, not forgers.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "db/sqlite.h"

namespace parlab::db {

struct ProofProvenance {
  std::string software_version;
  std::string binary_hash;
  std::string machine;
};

// This process's provenance, computed once (the binary is read and hashed on the first call).
const ProofProvenance& this_process_provenance();

// One proofs row exactly as stored (JSON columns as their stored text).
struct StoredProof {
  std::int64_t id = 0;
  std::optional<std::int64_t> run_id, experiment_id;
  std::string kind, inputs, result;
  bool passed = false;
  std::string evidence, created_at;
  std::string software_version, binary_hash, machine;
  std::optional<std::string> prev_digest, digest;
};

// "xxh3_128:<hex>" of any bytes (what proofs use to pin an output, e.g. a simulation's JSON).
std::string content_digest(std::string_view bytes);

// The text a proof's digest covers (see above) and its digest.
std::string canonical_proof_text(const StoredProof& row);
std::string proof_digest(const StoredProof& row);

enum class ChainStatus {
  kIntact,     // content matches its digest and its prev_digest links to the row before it
  kGap,        // content matches, but prev_digest is not the previous row's digest: a proof
               // between them was removed (or the previous one rewritten)
  kTampered,   // content does not match its digest: changed after it was written
  kUnchained,  // no digest (written before schema v4)
};
const char* to_string(ChainStatus status);

struct ChainEntry {
  std::int64_t proof_id = 0;
  ChainStatus status = ChainStatus::kIntact;
  std::string detail;  // why, for anything but intact
  // Content trustworthy: intact or gap (its own digest still matches).
  bool content_verified() const { return status == ChainStatus::kIntact || status == ChainStatus::kGap; }
};

struct ChainReport {
  std::vector<ChainEntry> entries;  // one per proofs row, by id
  int count(ChainStatus status) const;
  const ChainEntry* find(std::int64_t proof_id) const;
};

// The proofs columns in StoredProof's order, for "SELECT " PARLAB_STORED_PROOF_COLUMNS " FROM proofs
// ...": the content columns (every schema has them) and the provenance and chain (schema v4), and
// the one reader of each (every other view of a proof is made from them).
#define PARLAB_PROOF_CONTENT_COLUMNS "id, run_id, experiment_id, kind, inputs, result, passed, evidence, created_at"
#define PARLAB_STORED_PROOF_COLUMNS \
  PARLAB_PROOF_CONTENT_COLUMNS ", software_version, binary_hash, machine, prev_digest, digest"
// Fills the content fields of a row selected with PARLAB_PROOF_CONTENT_COLUMNS first.
StoredProof read_proof_content(const Statement& row);
StoredProof read_stored_proof(const Statement& row);

// Reads every proofs row and checks it against its digest and its predecessor.
std::vector<StoredProof> read_stored_proofs(Connection& connection);
ChainReport verify_proof_chain(Connection& connection);

}  // namespace parlab::db
