// The equivalence check is data-driven: every split that has a proof is judged on its own, so
// proofs of splits added later (ZeRO, tensor, pipeline) are graded the day they appear. The
// evidence here is built in memory in the shape the equivalence experiment records; the
// end-to-end tests grade real runs.
#include <gtest/gtest.h>

#include "rubric/checks.h"
#include "rubric/grade.h"

namespace parlab::rubric {
namespace {

Proof equivalence_proof(std::int64_t id, const std::string& plan, double worst, bool passed) {
  Proof p;
  p.row.id = id;
  p.row.kind = "equivalence";
  p.row.passed = passed;
  p.trusted = true;
  p.inputs = {{"plan", plan}, {"workers", {1, 2, 4}}, {"tolerance", 1e-4}};
  p.evidence = {{"2", {{"grad_relative_difference", worst / 2}, {"weight_relative_difference", worst}}},
                {"4", {{"grad_relative_difference", worst / 3}, {"loss_relative_difference", worst / 4}}}};
  return p;
}

CriterionResult judge(const Evidence& e, const std::string& rubric_tail = "") {
  const Rubric r =
      parse_rubric("[[criterion]]\nid = \"eq\"\npoints = 1\ncheck = \"equivalence\"\n" + rubric_tail, "t.toml");
  CriterionResult out;
  find_check("equivalence")->judge(r.criteria[0], e, GradeOptions{}, out);
  return out;
}

TEST(EquivalenceCheck, EverySplitRunIsJudgedOnItsOwn) {
  Evidence e;
  e.proofs.push_back(equivalence_proof(1, "gbs=64", 3e-7, true));
  e.proofs.push_back(equivalence_proof(2, "zero=1,gbs=64", 5e-7, true));
  EXPECT_EQ(judge(e).status, Status::kPassed);
  ASSERT_EQ(judge(e).parts.size(), 2u);

  // A ZeRO-3 proof whose weights differ beyond the tolerance fails the criterion, even if its
  // writer marked it passed: the grader reads the differences itself.
  e.proofs.push_back(equivalence_proof(3, "zero=3,gbs=64", 2e-2, true));
  const CriterionResult r = judge(e);
  EXPECT_EQ(r.status, Status::kFailed);
  ASSERT_EQ(r.parts.size(), 3u);
  for (const Part& p : r.parts) EXPECT_EQ(p.passed, p.name != "zero-3") << p.name << ": " << p.detail;

  // A later, passing zero-3 proof replaces it (the latest proof of each split counts).
  e.proofs.push_back(equivalence_proof(4, "zero=3,gbs=64", 1e-6, true));
  EXPECT_EQ(judge(e).status, Status::kPassed);
}

TEST(EquivalenceCheck, RequiredSplitsMustBePresentAndUntrustedProofsEarnNothing) {
  Evidence e;
  e.proofs.push_back(equivalence_proof(1, "gbs=64", 3e-7, true));
  EXPECT_EQ(judge(e, "require_splits = [\"ddp\", \"zero-3\"]\n").status, Status::kFailed);
  Proof tampered = equivalence_proof(2, "zero=3,gbs=64", 1e-7, true);
  tampered.trusted = false;
  tampered.chain = db::ChainStatus::kTampered;
  e.proofs.push_back(tampered);
  const CriterionResult r = judge(e, "require_splits = [\"ddp\", \"zero-3\"]\n");
  EXPECT_EQ(r.status, Status::kFailed);
  ASSERT_EQ(r.integrity.size(), 1u);
  EXPECT_NE(r.integrity[0].find("proof #2 (equivalence) is tampered"), std::string::npos);
}

TEST(EquivalenceCheck, OneProofOverSeveralPlansCountsOncePerPlan) {
  Evidence e;
  Proof p = equivalence_proof(1, "", 0, true);
  p.inputs = {{"plans", {"gbs=64", "zero=2,gbs=64"}}, {"tolerance", 1e-4}};
  p.evidence = {{"gbs=64", {{"2", {{"weight_relative_difference", 1e-7}}}}},
                {"zero=2,gbs=64", {{"2", {{"weight_relative_difference", 5e-3}}}}}};
  p.row.passed = false;
  e.proofs.push_back(p);
  const CriterionResult r = judge(e);
  ASSERT_EQ(r.parts.size(), 2u);
  EXPECT_TRUE(r.parts[0].passed);   // ddp
  EXPECT_FALSE(r.parts[1].passed);  // zero-2
}

}  // namespace
}  // namespace parlab::rubric
