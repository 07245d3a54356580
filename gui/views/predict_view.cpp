#include "gui/views/predict_view.h"

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

namespace parlab::gui {

PredictView::PredictView(std::string db_path, SpeedupModel* speedup, PredictionsModel* predictions, QWidget* parent)
    : QWidget(parent), db_path_(std::move(db_path)), speedup_(speedup), predictions_(predictions) {
  job_ = new SimulationJob(this);
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
  layout->addLayout(form);
  message_ = new QLabel(this);
  message_->setStyleSheet("color: #b00020;");
  message_->setWordWrap(true);
  layout->addWidget(message_);
  commit_ = new QPushButton(tr("&Commit the prediction, then reveal the simulation"), this);
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
  connect(job_, &SimulationJob::finished, this, [this] {
    busy_->setVisible(false);
    commit_->setEnabled(true);
  });
  predictions_->load(db_path_);
}

QString PredictView::message() const { return message_->text(); }
QString PredictView::result() const { return result_->text(); }

void PredictView::set_setup(const LabSetup& setup) {
  setup_ = setup;
  job_->cancel();
  const std::vector<int> ws = series_workers(setup);
  baseline_ = ws.empty() ? setup.world() : ws.front();
  target_ = setup.world();
  question_->setText(tr("<b>%1</b> on <b>%2</b>, split %3.<br>What speedup will <b>%4 workers</b> reach over "
                        "<b>%5</b> (throughput ratio, the simulator's answer)? Commit before you look.")
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
  try {
    auto store = db::ResultsStore::open(db_path_);
    prediction_ = store.add_prediction(prediction_for(*setup_, target_, predicted, reason_->text().trimmed().toStdString()));
  } catch (const std::exception& e) {
    message_->setText(tr("Could not store the prediction: %1").arg(QString::fromUtf8(e.what())));
    return false;
  }
  predictions_->load(db_path_);
  speedup_->set_prediction(target_, predicted);
  step_baseline_.reset();
  step_target_.reset();
  result_->setText(tr("Prediction %1 stored. Simulating %2 and %3 workers …").arg(*prediction_).arg(baseline_).arg(target_));
  busy_->setVisible(true);
  commit_->setEnabled(false);
  std::vector<int> ws = {baseline_};
  if (target_ != baseline_) ws.push_back(target_);
  job_->start(*setup_, ws, false);
  return true;
}

void PredictView::on_point(const SimPoint& p) {
  if (!p.error.empty()) {
    result_->setText(tr("The simulation failed, the prediction stays unrevealed: %1").arg(QString::fromStdString(p.error)));
    return;
  }
  speedup_->set_step(p.workers, SeriesSource::kSimulated, p.result.step_seconds);
  const double gbs = double(plan_at_workers(*setup_, p.workers).global_batch);
  if (p.workers == baseline_) step_baseline_ = p.result.step_seconds, gbs_baseline_ = gbs;
  if (p.workers == target_) step_target_ = p.result.step_seconds, gbs_target_ = gbs;
  if (!step_baseline_ || !step_target_ || !prediction_) return;
  // The same definition as the speedup view's (speedup_of): a throughput ratio.
  std::vector<SpeedupPoint> pair(2);
  pair[0].workers = baseline_;
  pair[0].global_batch = gbs_baseline_;
  pair[0].step_seconds[int(SeriesSource::kSimulated)] = *step_baseline_;
  pair[1].workers = target_;
  pair[1].global_batch = gbs_target_;
  pair[1].step_seconds[int(SeriesSource::kSimulated)] = *step_target_;
  const double value = *speedup_of(pair, 1, SeriesSource::kSimulated);
  try {
    db::ResultsStore::open(db_path_).reveal_prediction(*prediction_, value);
  } catch (const std::exception& e) {
    result_->setText(tr("Could not store the revealed value: %1").arg(QString::fromUtf8(e.what())));
    return;
  }
  predictions_->load(db_path_);
  const double predicted = predicted_->text().trimmed().toDouble();
  result_->setText(tr("<b>Revealed:</b> the simulator says %1x (%2 ms at %3 workers, %4 ms at %5). You predicted %6x: "
                      "error <b>%7%</b>.")
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
