#pragma once
// The chapter as a guided lesson (the desktop lab's Lesson view): five steps, each asking the
// learner first and revealing with the lab's own engines. A step's answers are predictions
// rows whose quantity names the step ("lesson.3.speedup"); a step is complete when each of its
// quantities has a prediction recorded before its reveal. So progress lives in the results
// database with no table of its own: the lab resumes at the first incomplete step, and the
// grader credits completed steps from the same rows (criterion check "lesson_progress").
#include <cstdint>
#include <string>
#include <vector>

#include "rubric/evidence.h"

namespace parlab::db {
class ResultsStore;
}

namespace parlab::rubric {

struct LessonStep {
  int number = 0;  // 1-based
  std::string title;
  std::vector<std::string> quantities;  // each must be predicted, then revealed
};

// The chapter's five steps, in order.
const std::vector<LessonStep>& lesson_steps();

// Quantity names the steps use ("lesson.<step>.<what>").
namespace lesson {
inline constexpr const char* kVerdicts = "lesson.1.verdicts";       // which of the rule's 4 verdicts hold (bit mask)
inline constexpr const char* kSplitLarge = "lesson.2.split.large";  // splits the smallest fitting plan needs (bit mask)
inline constexpr const char* kSplitHere = "lesson.2.split.here";
inline constexpr const char* kEfficiency = "lesson.3.efficiency";       // the scaling lab's 8-worker efficiency
inline constexpr const char* kSpeedup = "lesson.3.speedup";             // the measured 2-worker speedup here
inline constexpr const char* kHang = "lesson.4.hang";                   // what the other ranks do (choice index)
inline constexpr const char* kBitIdentical = "lesson.5.bit_identical";  // 1: the resumed weights are bit-identical
}  // namespace lesson

struct LessonStepProgress {
  int number = 0;
  std::string title;
  bool complete = false;
  std::vector<std::int64_t> predictions;  // the credited rows, one per quantity found
  std::vector<std::string> missing;       // quantities without a prediction revealed after it
};

struct LessonProgress {
  std::vector<LessonStepProgress> steps;
  int completed = 0;
  int next_step = 1;  // the first incomplete step; 0 when every step is complete
  // An unrevealed prediction per quantity (the learner committed, the reveal had not come): the
  // lab shows it instead of asking again.
  std::vector<Prediction> pending;
};

LessonProgress lesson_progress(const std::vector<Prediction>& predictions);
LessonProgress lesson_progress(db::ResultsStore& store);

}  // namespace parlab::rubric
