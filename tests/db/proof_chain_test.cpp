// The proofs digest chain: every add_proof row is chained; edits, deletions and pre-v4 rows are
// told apart; the digest is checked against one computed here from the stored bytes.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdio>

#include "db/proof_chain.h"
#include "db/results_store.h"
#include "parlab/version.h"
#include "tests/db/db_test_util.h"

namespace parlab::db {
namespace {

using testing::ScratchDir;

std::int64_t add(ResultsStore& store, ExperimentId e, const std::string& kind, bool passed) {
  ProofRecord p;
  p.experiment = e;
  p.kind = kind;
  p.inputs = {{"nproc", 2}};
  p.result = kind + " result";
  p.passed = passed;
  p.evidence = {{"hash", "abc"}};
  return store.add_proof(p);
}

std::string column(ResultsStore& store, const char* col, std::int64_t id) {
  Statement s = store.connection().statement(std::string("SELECT ") + col + " FROM proofs WHERE id = ?");
  s.bind_all(id).step_one();
  return s.optional_text(0).value_or("<null>");
}

TEST(ProofChain, RowsCarryProvenanceAndLinkToTheirPredecessor) {
  ScratchDir dir;
  auto store = ResultsStore::open(dir / "p.db");
  const auto e = store.upsert_experiment({.name = "x"});
  const auto a = add(store, e, "kill_resume_bitwise", true);
  const auto b = add(store, e, "equivalence", true);
  EXPECT_EQ(column(store, "software_version", a), kVersion);
  EXPECT_EQ(column(store, "binary_hash", a).rfind("xxh3_128:", 0), 0u);
  EXPECT_EQ(column(store, "prev_digest", a), "");
  EXPECT_EQ(column(store, "prev_digest", b), column(store, "digest", a));

  // The digest, recomputed here from the stored bytes by the documented recipe.
  Statement s = store.connection().statement(
      "SELECT id, run_id, experiment_id, kind, inputs, result, passed, evidence, created_at, software_version, "
      "binary_hash, machine, prev_digest, digest FROM proofs WHERE id = ?");
  s.bind_all(b).step_one();
  const char* names[] = {"id",       "run_id",     "experiment_id",    "kind",        "inputs",  "result",     "passed",
                         "evidence", "created_at", "software_version", "binary_hash", "machine", "prev_digest"};
  std::string text;
  for (int i = 0; i < 13; ++i) {
    const std::string v = s.is_null(i) ? (i == 12 ? "" : "null") : s.text(i);
    text += std::string(names[i]) + "=" + std::to_string(v.size()) + ":" + v + "\n";
  }
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  char hex[40];
  std::snprintf(hex, sizeof hex, "%016llx%016llx", (unsigned long long)h.high64, (unsigned long long)h.low64);
  EXPECT_EQ(s.text(13), std::string("xxh3_128:") + hex);

  const ChainReport r = verify_proof_chain(store.connection());
  ASSERT_EQ(r.entries.size(), 2u);
  EXPECT_EQ(r.count(ChainStatus::kIntact), 2);
}

TEST(ProofChain, AnEditIsTamperedADeletionIsAGapAtItsSuccessor) {
  ScratchDir dir;
  auto store = ResultsStore::open(dir / "p.db");
  const auto e = store.upsert_experiment({.name = "x"});
  const auto a = add(store, e, "a", true);
  const auto b = add(store, e, "b", false);
  const auto c = add(store, e, "c", true);
  const auto d = add(store, e, "d", true);
  // What a learner might try in the sqlite3 shell: turn a failed proof into a passed one.
  store.connection().statement("UPDATE proofs SET passed = 1 WHERE id = ?").bind_all(b).run();
  store.connection().statement("DELETE FROM proofs WHERE id = ?").bind_all(c).run();
  const ChainReport r = verify_proof_chain(store.connection());
  ASSERT_EQ(r.entries.size(), 3u);
  EXPECT_EQ(r.find(a)->status, ChainStatus::kIntact);
  EXPECT_EQ(r.find(b)->status, ChainStatus::kTampered);
  EXPECT_FALSE(r.find(b)->content_verified());
  EXPECT_EQ(r.find(d)->status, ChainStatus::kGap);
  EXPECT_TRUE(r.find(d)->content_verified());  // its own content is still what was written
  // A JSON edit that keeps the meaning (whitespace) is an edit all the same.
  store.connection().statement("UPDATE proofs SET evidence = ? WHERE id = ?").bind_all("{\"hash\": \"abc\"}", a).run();
  EXPECT_EQ(verify_proof_chain(store.connection()).find(a)->status, ChainStatus::kTampered);
}

TEST(ProofChain, RowsWithoutADigestAreUnchained) {
  ScratchDir dir;
  auto store = ResultsStore::open(dir / "p.db");
  const auto e = store.upsert_experiment({.name = "x"});
  store.connection()
      .statement("INSERT INTO proofs(experiment_id, kind, passed) VALUES (?, 'old', 1)")
      .bind_all(e)
      .run();
  const auto b = add(store, e, "new", true);
  const ChainReport r = verify_proof_chain(store.connection());
  EXPECT_EQ(r.entries.front().status, ChainStatus::kUnchained);
  EXPECT_EQ(r.find(b)->status, ChainStatus::kIntact);  // an unchained predecessor has digest ""
}

}  // namespace
}  // namespace parlab::db
