// Rubric files: the built-in rubric reads and covers the chapter's criteria; a malformed one is
// refused with the file, the criterion and the field named; the small helpers the checks share.
#include <gtest/gtest.h>

#include <set>

#include "rubric/checks.h"
#include "rubric/measures.h"
#include "rubric/rubric.h"
#include "base/errors.h"

namespace parlab::rubric {
namespace {

const char* kMinimal = R"(
name = "mini"
pass_mark = 0.5
[[criterion]]
id = "seed"
points = 4
check = "seed_worked_example"
[[criterion]]
id = "kr"
points = 6
check = "kill_resume"
[criterion.thresholds]
min_trials = 3
)";

// The message of the ConfigError `text` raises (empty when it parses).
std::string error_of(const std::string& text) {
  try {
    parse_rubric(text, "my.toml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(RubricFile, TheBuiltInRubricHasEveryCriterionOfTheChapter) {
  const Rubric& r = default_rubric();
  EXPECT_DOUBLE_EQ(r.pass_mark, 0.80);
  std::set<std::string> checks;
  for (const Criterion& c : r.criteria) checks.insert(c.check);
  for (const char* need : {"seed_worked_example", "efficiency_substitution", "deterministic_simulation", "equivalence",
                           "efficiency_report", "kill_resume", "hang_fallback", "elastic_sampling",
                           "checkpoint_complete", "predictions_before_reveal"})
    EXPECT_TRUE(checks.count(need)) << need;
  // Performance points are gated on a correctness criterion.
  for (const Criterion& c : r.criteria)
    if (c.category == "performance") {
      ASSERT_FALSE(c.gate.empty()) << c.id;
      EXPECT_EQ(r.find(c.gate)->category, "correctness") << c.id;
    }
  // Points not needing a GPU add up to 100, so percentages read as points.
  double cpu_points = 0;
  for (const Criterion& c : r.criteria) cpu_points += c.requires_hardware.empty() ? c.points : 0;
  EXPECT_DOUBLE_EQ(cpu_points, 100);
}

TEST(RubricFile, DefaultsFillThresholdsAFileDoesNotSet) {
  const Rubric r = parse_rubric(kMinimal, "mini.toml");
  ASSERT_EQ(r.criteria.size(), 2u);
  EXPECT_DOUBLE_EQ(r.pass_mark, 0.5);
  EXPECT_DOUBLE_EQ(r.criteria[0].threshold("replica_gb"), 130);  // the check's default
  EXPECT_DOUBLE_EQ(r.criteria[1].threshold("min_trials"), 3);    // the file's value
  EXPECT_EQ(r.criteria[1].proof, "kill_resume_bitwise");
  EXPECT_DOUBLE_EQ(r.total_points(), 10);
}

TEST(RubricFile, MalformedFilesNameTheCriterionAndTheField) {
  std::string bad = kMinimal;
  bad.replace(bad.find("min_trials = 3"), 14, "min_trials = \"two\"");
  EXPECT_EQ(error_of(bad), "my.toml: criterion[1] (kr).thresholds.min_trials = 'two': must be a number");

  bad = kMinimal;
  bad.replace(bad.find("min_trials = 3"), 14, "min_trails = 3");
  EXPECT_NE(error_of(bad).find("criterion[1] (kr).thresholds.min_trails = 3: unknown key; allowed: min_trials"),
            std::string::npos)
      << error_of(bad);

  bad = kMinimal;
  bad.replace(bad.find("check = \"kill_resume\""), 21, "check = \"kill_and_resume\"");
  EXPECT_NE(error_of(bad).find("criterion[1] (kr).check = kill_and_resume: one of seed_worked_example"),
            std::string::npos)
      << error_of(bad);

  bad = kMinimal;
  bad.replace(bad.find("points = 6"), 10, "points = -6");
  EXPECT_NE(error_of(bad).find("criterion[1] (kr).points = -6"), std::string::npos) << error_of(bad);

  bad = kMinimal;
  bad.replace(bad.find("id = \"kr\""), 9, "id = \"seed\"");
  EXPECT_NE(error_of(bad).find("criterion[1] (seed).id = seed: already used"), std::string::npos) << error_of(bad);

  bad = kMinimal;
  bad.replace(bad.find("check = \"kill_resume\""), 21, "check = \"kill_resume\"\ngate = \"kr\"");
  EXPECT_NE(error_of(bad).find("(kr).gate = kr: a criterion cannot gate itself"), std::string::npos) << error_of(bad);

  bad = std::string(kMinimal) +
        "[[criterion]]\nid = \"perf\"\npoints = 1\ncategory = \"performance\"\ncheck = \"efficiency_report\"\ngate = "
        "\"nothing\"\n";
  EXPECT_NE(error_of(bad).find("criterion[2] (perf).gate = nothing: must name another criterion"), std::string::npos)
      << error_of(bad);

  bad = std::string(kMinimal) + "[[criterion]]\nid = \"x\"\npoints = 1\ncheck = \"proof_passed\"\n";
  EXPECT_NE(error_of(bad).find("criterion[2] (x).proof = (missing)"), std::string::npos) << error_of(bad);

  bad = kMinimal;
  bad.replace(bad.find("pass_mark = 0.5"), 15, "pass_mark = 80");
  EXPECT_NE(error_of(bad).find("my.toml: pass_mark = 80"), std::string::npos) << error_of(bad);

  EXPECT_NE(error_of("name = \"x\"\n").find("my.toml: criterion = (missing)"), std::string::npos);
  EXPECT_NE(error_of("name = \n").find("my.toml:1:"), std::string::npos);  // TOML syntax, with line:column
}

TEST(RubricHelpers, SplitOfAPlanText) {
  EXPECT_EQ(split_of("gbs=64"), "ddp");
  EXPECT_EQ(split_of(""), "ddp");
  EXPECT_EQ(split_of("zero=3,gbs=64"), "zero-3");
  EXPECT_EQ(split_of("tp=2,pp=1"), "tp2");
  EXPECT_EQ(split_of("dp=2,tp=2,pp=2"), "tp2+pp2");
  EXPECT_EQ(split_of("zero=0"), "ddp");
}

TEST(RubricHelpers, LargestRelativeDifferenceAnywhereInTheEvidence) {
  const auto j = nlohmann::json::parse(
      R"({"2": {"grad_relative_difference": 3e-7, "weight_relative_difference": 2e-6, "loss": 5},
          "4": {"loss_relative_difference": 1e-5, "nested": [{"x_relative_difference": 4e-6}]}})");
  EXPECT_DOUBLE_EQ(max_relative_difference(j), 1e-5);
  EXPECT_DOUBLE_EQ(max_relative_difference(nlohmann::json::object()), -1);
}

TEST(RubricHelpers, Median) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

}  // namespace
}  // namespace parlab::rubric
