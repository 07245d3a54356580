#include "rubric/lesson.h"

#include <algorithm>

#include "db/results_store.h"

namespace parlab::rubric {

const std::vector<LessonStep>& lesson_steps() {
  static const std::vector<LessonStep> steps = {
      {1, "Find what cannot fit", {lesson::kVerdicts}},
      {2, "Choose the smallest split", {lesson::kSplitLarge, lesson::kSplitHere}},
      {3, "Model the communication path", {lesson::kEfficiency, lesson::kSpeedup}},
      {4, "The opening failure", {lesson::kHang}},
      {5, "Kill and resume", {lesson::kBitIdentical}},
  };
  return steps;
}

LessonProgress lesson_progress(const std::vector<Prediction>& predictions) {
  LessonProgress out;
  out.next_step = 0;
  for (const LessonStep& step : lesson_steps()) {
    LessonStepProgress sp{step.number, step.title, true, {}, {}};
    for (const std::string& q : step.quantities) {
      // Timestamps are ISO-8601 UTC with milliseconds: text order is time order.
      const auto credited = std::find_if(predictions.rbegin(), predictions.rend(), [&](const Prediction& p) {
        return p.quantity == q && p.revealed_at && p.predicted_at < *p.revealed_at;
      });
      if (credited != predictions.rend()) {
        sp.predictions.push_back(credited->id);
        continue;
      }
      sp.complete = false;
      sp.missing.push_back(q);
      const auto pending = std::find_if(predictions.rbegin(), predictions.rend(),
                                        [&](const Prediction& p) { return p.quantity == q && !p.revealed_at; });
      if (pending != predictions.rend()) out.pending.push_back(*pending);
    }
    out.completed += sp.complete;
    if (!sp.complete && out.next_step == 0) out.next_step = step.number;
    out.steps.push_back(std::move(sp));
  }
  return out;
}

LessonProgress lesson_progress(db::ResultsStore& store) {
  std::vector<Prediction> ps;
  for (db::PredictionRecord& r : store.list_predictions())
    ps.push_back({r.id, std::move(r.quantity), std::string(db::to_string(r.source)), r.world_size, r.predicted,
                  r.revealed, std::move(r.predicted_at), std::move(r.revealed_at)});
  return lesson_progress(ps);
}

}  // namespace parlab::rubric
