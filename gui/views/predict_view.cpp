#include "gui/views/predict_view.h"

#include <QComboBox>
#include <QFormLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "db/results_store.h"
#include "gui/core/lab_store.h"
#include "gui/core/predictions_model.h"
#include "gui/core/simulation_job.h"
#include "gui/core/speedup_model.h"
#include "gui/views/run_view.h"

namespace parlab::gui {

PredictView::PredictView(const LabOptions& options, SpeedupModel* speedup, PredictionsModel* predictions,
                         QWidget* parent)
    : QWidget(parent),
      options_(options),
      db_path_(options.db.toStdString()),
      speedup_(speedup),
      predictions_(predictions) {
  job_ = new SimulationJob(this);
  runs_ = new RunController(this);
  auto* layout = new QVBoxLayout(this);
  question_ = new QLabel(this);
  question_->setWordWrap(true);
  layout->addWidget(question_);
  auto* form = new QFormLayout();
  predicted_ = new QLineEdit(this);
  predicted_->setPlaceholderText(tr("e.g. 1.8"));
  predicted_->setAccessibleName(tr("predicted speedup"));
  reason_ = new QLineEdit(this);
  reason_->setPlaceholderText(tr("one sentence: what will limit it?"));
  reason_->setAccessibleName(tr("reason"));
  form->addRow(tr("&Predicted speedup (x)"), predicted_);
  form->addRow(tr("&Why"), reason_);
  reveal_by_ = new QComboBox(this);
  reveal_by_->addItems({tr("the simulator"), tr("real runs on this machine (cpu-local, 10 steps each)")});
  reveal_by_->setAccessibleName(tr("reveal by"));
  form->addRow(tr("&Reveal by"), reveal_by_);
  layout->addLayout(form);
  message_ = new QLabel(this);
  message_->setStyleSheet("color: #b00020;");
  message_->setWordWrap(true);
  layout->addWidget(message_);
  commit_ = new QPushButton(tr("&Commit the prediction, then reveal"), this);
  layout->addWidget(commit_);
  busy_ = new QProgressBar(this);
  busy_->setRange(0, 0);
  busy_->setVisible(false);
  layout->addWidget(busy_);
  result_ = new QLabel(this);
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(result_);
  layout->addWidget(new QLabel(tr("<b>Your predictions</b> (stored in the results DB as rubric evidence)"), this));
  table_ = new QTableView(this);
  table_->setModel(predictions);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAccessibleName(tr("predictions"));
  layout->addWidget(table_, 1);
  connect(commit_, &QPushButton::clicked, this, &PredictView::commit);
  connect(predicted_, &QLineEdit::returnPressed, this, &PredictView::commit);
  connect(job_, &SimulationJob::point_ready, this, &PredictView::on_point);
  connect(runs_, &RunController::finished, this, &PredictView::on_run);
  connect(job_, &SimulationJob::finished, this, [this] {
    busy_->setVisible(false);
    commit_->setEnabled(true);
  });
  predictions_->load(db_path_);
}

QString PredictView::message() const { return message_->text(); }
QString PredictView::result() const { return result_->text(); }

void PredictView::set_setup(const LabSetup& setup) {
  if (runs_->running()) {
    pending_runs_.clear();  // a reveal for the old setup would compare two different splits
    runs_->cancel();
  }
  setup_ = setup;
  job_->cancel();
  const std::vector<int> ws = series_workers(setup);
  baseline_ = ws.empty() ? setup.world() : ws.front();
  target_ = setup.world();
  question_->setText(tr("<b>%1</b> on <b>%2</b>, split %3.<br>What speedup will <b>%4 workers</b> reach over "
                        "<b>%5</b> (a throughput ratio)? Commit before you look.")
                         .arg(QString::fromStdString(setup.model.name), QString::fromStdString(setup.cluster.name),
                              QString::fromStdString(setup.plan.short_name()))
                         .arg(target_)
                         .arg(baseline_));
  commit_->setEnabled(setup.model.has_layers());
}

bool PredictView::commit() {
  message_->clear();
  if (!setup_) {
    message_->setText(tr("No valid setup: fix the setup panel first."));
    return false;
  }
  bool ok = false;
  const QString text = predicted_->text().trimmed();
  const double predicted = text.toDouble(&ok);
  if (!ok || !(predicted > 0) || !std::isfinite(predicted)) {
    message_->setText(tr("predicted speedup = \"%1\": must be a positive number such as 1.8").arg(text));
    return false;
  }
  const bool real = reveal_by_->currentIndex() == kRealRuns;
  if (real) {
    if (const auto why = why_not_runnable(*setup_)) {
      message_->setText(*why);
      return false;
    }
  }
  try {
    auto store = db::ResultsStore::open(db_path_);
    prediction_ =
        store.add_prediction(prediction_for(*setup_, target_, predicted, reason_->text().trimmed().toStdString(),
                                            real ? db::RunKind::kMeasured : db::RunKind::kSimulated));
  } catch (const std::exception& e) {
    message_->setText(tr("Could not store the prediction: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  predictions_->load(db_path_);
  speedup_->set_prediction(target_, predicted);
  step_baseline_.reset();
  step_target_.reset();
  busy_->setVisible(true);
  commit_->setEnabled(false);
  std::vector<int> ws = {baseline_};
  if (target_ != baseline_) ws.push_back(target_);
  if (real) {
    result_->setText(
        tr("Prediction %1 stored. Training on %2 and %3 workers …").arg(*prediction_).arg(baseline_).arg(target_));
    pending_runs_ = ws;
    target_run_.reset();
    start_next_run();
    return true;
  }
  result_->setText(
      tr("Prediction %1 stored. Simulating %2 and %3 workers …").arg(*prediction_).arg(baseline_).arg(target_));
  job_->start(*setup_, ws, false);
  return true;
}

void PredictView::set_reveal_by(RevealBy by) { reveal_by_->setCurrentIndex(by); }
bool PredictView::busy() const { return job_->running() || runs_->running() || !pending_runs_.empty(); }

void PredictView::start_next_run() { runs_->start(run_request_for(*setup_, options_, pending_runs_.front(), 10, 1)); }

void PredictView::on_run(const RunOutcome& o) {
  const int w = pending_runs_.empty() ? 0 : pending_runs_.front();
  const auto fail = [&](const QString& why) {
    pending_runs_.clear();
    busy_->setVisible(false);
    commit_->setEnabled(true);
    result_->setText(tr("The run on %1 workers did not complete, the prediction stays unrevealed: %2").arg(w).arg(why));
  };
  if (!o.ok || !o.run_id) return fail(o.message);
  double step = 0;
  try {
    const auto metrics = db::ResultsStore::open(db_path_).run_metrics(*o.run_id);
    step = metrics.at("step_seconds");
  } catch (const std::exception& e) {
    return fail(QString::fromUtf8(e.what()));
  }
  const double gbs = double(plan_at_workers(*setup_, w).global_batch);
  if (w == baseline_) step_baseline_ = step, gbs_baseline_ = gbs;
  if (w == target_) step_target_ = step, gbs_target_ = gbs, target_run_ = *o.run_id;
  pending_runs_.erase(pending_runs_.begin());
  emit measured_runs_recorded();
  if (!pending_runs_.empty()) return start_next_run();
  busy_->setVisible(false);
  commit_->setEnabled(true);
  reveal(int(SeriesSource::kMeasured), target_run_);
}

void PredictView::on_point(const SimPoint& p) {
  if (!p.error.empty()) {
    result_->setText(
        tr("The simulation failed, the prediction stays unrevealed: %1").arg(QString::fromStdString(p.error)));
    return;
  }
  speedup_->set_step(p.workers, SeriesSource::kSimulated, p.result.step_seconds);
  const double gbs = double(plan_at_workers(*setup_, p.workers).global_batch);
  if (p.workers == baseline_) step_baseline_ = p.result.step_seconds, gbs_baseline_ = gbs;
  if (p.workers == target_) step_target_ = p.result.step_seconds, gbs_target_ = gbs;
  if (!step_baseline_ || !step_target_ || !prediction_) return;
  reveal(int(SeriesSource::kSimulated), std::nullopt);
}

void PredictView::reveal(int source, std::optional<long long> run) {
  // The same definition as the speedup view's (speedup_of): a throughput ratio.
  const SeriesSource src = SeriesSource(source);
  std::vector<SpeedupPoint> pair(2);
  pair[0].workers = baseline_;
  pair[0].global_batch = gbs_baseline_;
  pair[0].step_seconds[source] = *step_baseline_;
  pair[1].workers = target_;
  pair[1].global_batch = gbs_target_;
  pair[1].step_seconds[source] = *step_target_;
  const double value = *speedup_of(pair, 1, src);
  try {
    db::ResultsStore::open(db_path_).reveal_prediction(*prediction_, value, run);
  } catch (const std::exception& e) {
    result_->setText(tr("Could not store the revealed value: %1").arg(QString::fromUtf8(e.what())));
    return;
  }
  predictions_->load(db_path_);
  const double predicted = predicted_->text().trimmed().toDouble();
  result_->setText(tr("<b>Revealed:</b> %1 %2x (%3 ms at %4 workers, %5 ms at %6). You predicted %7x: "
                      "error <b>%8%</b>.")
                       .arg(src == SeriesSource::kMeasured ? tr("the real runs measured") : tr("the simulator says"))
                       .arg(value, 0, 'f', 2)
                       .arg(*step_target_ * 1e3, 0, 'f', 2)
                       .arg(target_)
                       .arg(*step_baseline_ * 1e3, 0, 'f', 2)
                       .arg(baseline_)
                       .arg(predicted, 0, 'f', 2)
                       .arg(100 * (predicted / value - 1), 0, 'f', 1));
  emit revealed(*prediction_);
}

}  // namespace parlab::gui
