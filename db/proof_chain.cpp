#include "db/proof_chain.h"

#include <unistd.h>
#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "db/process_identity.h"
#include "db/store_detail.h"
#include "parlab/version.h"

namespace parlab::db {
namespace {

std::string hex128(XXH128_hash_t h) {
  char b[40];
  std::snprintf(b, sizeof b, "%016llx%016llx", static_cast<unsigned long long>(h.high64),
                static_cast<unsigned long long>(h.low64));
  return b;
}

// The executable's bytes, hashed in blocks (a parlab binary is tens of MB).
std::string hash_own_binary() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  if (!in) return "unknown";
  XXH3_state_t* state = XXH3_createState();
  XXH3_128bits_reset(state);
  std::vector<char> block(1 << 20);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    if (in.gcount() > 0) XXH3_128bits_update(state, block.data(), static_cast<size_t>(in.gcount()));
  }
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return "xxh3_128:" + hex128(h);
}

std::string first_line_of(const char* path, const std::string& prefix = "") {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (prefix.empty() || line.rfind(prefix, 0) == 0) return line;
  return "";
}

std::string machine_fingerprint() {
  const std::string identity = first_line_of("/etc/machine-id") + "\n" + first_line_of("/proc/cpuinfo", "model name") +
                               "\n" + std::to_string(std::thread::hardware_concurrency());
  char b[24];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(XXH3_64bits(identity.data(), identity.size())));
  return host_name() + " " + b;
}

void field(std::string& out, const char* name, const std::string& value) {
  out += name;
  out += '=';
  out += std::to_string(value.size());
  out += ':';
  out += value;
  out += '\n';
}

std::string optional_text(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "null"; }

}  // namespace

const ProofProvenance& this_process_provenance() {
  static const ProofProvenance p{kVersion, hash_own_binary(), machine_fingerprint()};
  return p;
}

std::string canonical_proof_text(const StoredProof& r) {
  std::string out;
  field(out, "id", std::to_string(r.id));
  field(out, "run_id", optional_text(r.run_id));
  field(out, "experiment_id", optional_text(r.experiment_id));
  field(out, "kind", r.kind);
  field(out, "inputs", r.inputs);
  field(out, "result", r.result);
  field(out, "passed", r.passed ? "1" : "0");
  field(out, "evidence", r.evidence);
  field(out, "created_at", r.created_at);
  field(out, "software_version", r.software_version);
  field(out, "binary_hash", r.binary_hash);
  field(out, "machine", r.machine);
  field(out, "prev_digest", r.prev_digest.value_or(""));
  return out;
}

std::string content_digest(std::string_view bytes) {
  return "xxh3_128:" + hex128(XXH3_128bits(bytes.data(), bytes.size()));
}

std::string proof_digest(const StoredProof& r) { return content_digest(canonical_proof_text(r)); }

const char* to_string(ChainStatus s) {
  switch (s) {
    case ChainStatus::kIntact:
      return "intact";
    case ChainStatus::kGap:
      return "gap";
    case ChainStatus::kTampered:
      return "tampered";
    case ChainStatus::kUnchained:
      return "unchained";
  }
  return "?";
}

int ChainReport::count(ChainStatus status) const {
  int n = 0;
  for (const ChainEntry& e : entries) n += e.status == status;
  return n;
}

const ChainEntry* ChainReport::find(std::int64_t proof_id) const {
  for (const ChainEntry& e : entries)
    if (e.proof_id == proof_id) return &e;
  return nullptr;
}

StoredProof read_proof_content(const Statement& s) {
  StoredProof r;
  detail::read_columns(s, 0, r.id, r.run_id, r.experiment_id, r.kind, r.inputs, r.result, r.passed, r.evidence,
                       r.created_at);
  return r;
}

StoredProof read_stored_proof(const Statement& s) {
  StoredProof r = read_proof_content(s);
  detail::read_columns(s, 9, r.software_version, r.binary_hash, r.machine, r.prev_digest, r.digest);
  return r;
}

std::vector<StoredProof> read_stored_proofs(Connection& c) {
  Statement s = c.statement("SELECT " PARLAB_STORED_PROOF_COLUMNS " FROM proofs ORDER BY id");
  return detail::collect_rows(s, read_stored_proof);
}

ChainReport verify_proof_chain(Connection& c) {
  ChainReport report;
  std::string previous;  // digest of the row before ("" before the first chained row)
  std::int64_t previous_id = 0;
  for (const StoredProof& r : read_stored_proofs(c)) {
    ChainEntry e;
    e.proof_id = r.id;
    if (!r.digest) {
      e.status = ChainStatus::kUnchained;
      e.detail = "no digest: written before schema v4, so nothing shows it is unchanged";
    } else if (proof_digest(r) != *r.digest) {
      e.status = ChainStatus::kTampered;
      e.detail = "its content no longer matches the digest it was written with: changed afterwards";
    } else if (r.prev_digest.value_or("") != previous) {
      e.status = ChainStatus::kGap;
      e.detail = previous_id ? "it does not follow proof #" + std::to_string(previous_id) +
                                   ": a proof between them was removed or the earlier one rewritten"
                             : "it names a predecessor that is not in the file: an earlier proof was removed";
    }
    report.entries.push_back(e);
    previous = r.digest.value_or("");
    previous_id = r.id;
  }
  return report;
}

}  // namespace parlab::db
