// ResultsStore: the desktop lab's predictions (schema v3). A prediction is written when the
// learner commits to it and revealed once, later: the order of the two timestamps is the
// evidence that it was a prediction.
#include <string>

#include "db/results_store.h"
#include "db/store_detail.h"

namespace parlab::db {

namespace {

#define PARLAB_PREDICTION_COLUMNS                                                            \
  "id, run_id, experiment_id, learner, quantity, source, model, cluster, plan, world_size, " \
  "predicted, reason, predicted_at, revealed, revealed_at"

PredictionRecord read_prediction(const Statement& s) {
  PredictionRecord p;
  std::string source, plan;
  detail::read_columns(s, 0, p.id, p.run, p.experiment, p.learner, p.quantity, source, p.model, p.cluster, plan,
                       p.world_size, p.predicted, p.reason, p.predicted_at, p.revealed, p.revealed_at);
  p.source = parse_run_kind(source, "predictions.source");
  p.plan = detail::parse_json_column(plan, "predictions.plan");
  return p;
}

}  // namespace

std::int64_t ResultsStore::add_prediction(const NewPrediction& p) {
  return detail::write_scope(*connection_, [&] {
    Statement s = connection_->statement(
        "INSERT INTO predictions(run_id, experiment_id, learner, quantity, source, model, cluster, "
        "plan, world_size, predicted, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id");
    s.bind_all(p.run, p.experiment, p.learner, p.quantity, to_string(p.source), p.model, p.cluster, p.plan.dump(),
               p.world_size, p.predicted, p.reason)
        .step_one();
    return s.int64(0);
  });
}

void ResultsStore::reveal_prediction(std::int64_t prediction, double revealed, std::optional<RunId> run) {
  detail::write_scope(*connection_, [&] {
    connection_
        ->statement("UPDATE predictions SET revealed = ?, revealed_at = " PARLAB_DB_NOW
                    ", run_id = COALESCE(?, run_id) WHERE id = ? AND revealed IS NULL")
        .bind_all(revealed, run, prediction)
        .run();
    if (connection_->changes() != 1)
      throw DbError("reveal_prediction: no unrevealed prediction " + std::to_string(prediction), 0, 0);
  });
}

std::vector<PredictionRecord> ResultsStore::list_predictions() {
  Statement s = connection_->statement("SELECT " PARLAB_PREDICTION_COLUMNS " FROM predictions ORDER BY id");
  return detail::collect_rows(s, read_prediction);
}

std::optional<PredictionRecord> ResultsStore::get_prediction(std::int64_t prediction) {
  Statement s = connection_->statement("SELECT " PARLAB_PREDICTION_COLUMNS " FROM predictions WHERE id = ?");
  s.bind_all(prediction);
  if (!s.step()) return std::nullopt;
  return read_prediction(s);
}

}  // namespace parlab::db
