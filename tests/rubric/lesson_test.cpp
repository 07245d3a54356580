// The guided lesson's progress from predictions rows: a step is complete when each of its
// questions was predicted before its reveal; the lab resumes at the first incomplete step and
// the grader's lesson criterion credits the steps from the same rows.
#include <gtest/gtest.h>

#include "rubric/grade.h"
#include "rubric/lesson.h"

namespace parlab::rubric {
namespace {

Prediction answered(std::int64_t id, const std::string& quantity, const std::string& at,
                    const std::string& revealed_at) {
  return {id, quantity, "simulated", 1, 1.0, 1.0, at, revealed_at};
}

std::vector<Prediction> answers_through(int last_step) {
  std::vector<Prediction> ps;
  std::int64_t id = 1;
  for (const LessonStep& s : lesson_steps())
    if (s.number <= last_step)
      for (const std::string& q : s.quantities) {
        const std::int64_t n = id++;  // one read of id per answer (the order of arguments is unspecified)
        ps.push_back(
            answered(n, q, "2026-12-01T10:00:0" + std::to_string(n % 10) + ".000Z", "2026-12-01T10:01:00.000Z"));
      }
  return ps;
}

TEST(Lesson, FiveStepsEachWithItsQuestions) {
  ASSERT_EQ(lesson_steps().size(), 5u);
  for (size_t i = 0; i < lesson_steps().size(); ++i) {
    EXPECT_EQ(lesson_steps()[i].number, int(i + 1));
    EXPECT_FALSE(lesson_steps()[i].quantities.empty());
    for (const std::string& q : lesson_steps()[i].quantities)
      EXPECT_EQ(q.rfind("lesson." + std::to_string(i + 1) + ".", 0), 0u) << q;
  }
}

TEST(Lesson, ResumesAtTheFirstIncompleteStep) {
  EXPECT_EQ(lesson_progress(std::vector<Prediction>{}).next_step, 1);
  const LessonProgress two = lesson_progress(answers_through(2));
  EXPECT_EQ(two.completed, 2);
  EXPECT_EQ(two.next_step, 3);
  EXPECT_TRUE(two.steps[1].complete);
  EXPECT_EQ(two.steps[1].predictions.size(), 2u);
  EXPECT_FALSE(two.steps[2].complete);
  EXPECT_EQ(two.steps[2].missing.size(), 2u);
  const LessonProgress all = lesson_progress(answers_through(5));
  EXPECT_EQ(all.completed, 5);
  EXPECT_EQ(all.next_step, 0);
}

TEST(Lesson, HalfAStepOrARevealBeforeThePredictionIsNotCredited) {
  std::vector<Prediction> ps = answers_through(2);
  // Step 3: the efficiency answered, the speedup committed but not revealed yet.
  ps.push_back(answered(10, lesson::kEfficiency, "2026-12-01T10:02:00.000Z", "2026-12-01T10:02:01.000Z"));
  Prediction pending{11, lesson::kSpeedup, "measured", 2, 1.6, std::nullopt, "2026-12-01T10:03:00.000Z", std::nullopt};
  ps.push_back(pending);
  LessonProgress lp = lesson_progress(ps);
  EXPECT_EQ(lp.next_step, 3);
  ASSERT_EQ(lp.pending.size(), 1u);
  EXPECT_EQ(lp.pending.front().id, 11);
  // Revealed before it was predicted: not an answer.
  ps.back().revealed = 1.7;
  ps.back().revealed_at = "2026-12-01T10:02:59.000Z";
  lp = lesson_progress(ps);
  EXPECT_FALSE(lp.steps[2].complete);
  EXPECT_TRUE(lp.pending.empty());
}

}  // namespace
}  // namespace parlab::rubric
