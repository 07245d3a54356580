// The lesson's third step: model the communication path. The scaling lab's closed form first
// (strategy::scaling_lab, with t_W's numbers in), then "benchmark a small topology before
// scaling": the model here on 2 workers, analytic (strategy), simulated (sim, off the UI thread)
// and measured (real `parlab train` runs through RunController), side by side in one table.
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QProcess>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>
#include <cmath>

#include "db/results_store.h"
#include "gui/core/simulation_job.h"
#include "gui/core/speedup_model.h"
#include "gui/views/lesson_pages.h"
#include "gui/views/lesson_question.h"
#include "gui/views/run_view.h"
#include "strategy/scaling_lab.h"
#include "base/units.h"

namespace parlab::gui {

namespace {

constexpr int kLabWorkers = 8;  // the chapter's question: the 8-worker efficiency
constexpr int kHereWorkers = 2;

std::optional<double> positive_number(QLineEdit* field, const QString& what, QString* error) {
  bool ok = false;
  const double v = field->text().trimmed().toDouble(&ok);
  if (!ok || !(v > 0) || !std::isfinite(v)) {
    *error = QObject::tr("%1 = \"%2\": must be a positive number").arg(what, field->text());
    return std::nullopt;
  }
  return v;
}

QString lines_html(const std::vector<std::string>& lines) {
  QString s;
  for (const std::string& l : lines) s += "<code>" + QString::fromStdString(l).toHtmlEscaped() + "</code><br>";
  return s;
}

}  // namespace

CommPage::CommPage(const LessonOptions& options, QWidget* parent)
    : LessonPage(
          options, 3, tr("Model the communication path"),
          tr("Estimate collective bytes, link bandwidth, stage balance, and microbatch bubbles. Then benchmark a "
             "small topology before scaling the job. First the chapter's all-reduce scaling lab: a 120 ms "
             "local-compute step, a ring all-reduce of the gradients and a logarithmic straggler penalty."),
          parent) {
  efficiency_ = new QLineEdit(this);
  efficiency_->setPlaceholderText(tr("e.g. 0.9"));
  efficiency_->setAccessibleName(tr("predicted efficiency"));
  LessonQuestion* qa = add_question(tr("The all-reduce scaling lab"), rubric::lesson::kEfficiency, efficiency_,
                                    [this](QString* e) { return positive_number(efficiency_, tr("efficiency"), e); });
  qa->set_prompt(tr("What <b>efficiency</b> (t_1 / t_W, 1.0 is perfect) will <b>%1 workers</b> reach with a 120 ms "
                    "step and a 2 MB gradient all-reduce? <i>Pause and predict before revealing the answer.</i>")
                     .arg(kLabWorkers));
  db::NewPrediction ca;
  ca.model = "scaling lab (120 ms step)";
  ca.world_size = kLabWorkers;
  ca.source = db::RunKind::kAnalytic;
  qa->set_context(ca);
  connect(qa, &LessonQuestion::committed, this, &CommPage::reveal_efficiency);

  QGroupBox* box = add_assumption(tr("the local compute per step (the formula with your number)"));
  auto* form = new QFormLayout(box);
  compute_ms_ = new LessonSpinBox(box);
  compute_ms_->setRange(1, 10000);
  compute_ms_->setValue(120);
  compute_ms_->setSuffix(" ms");
  compute_ms_->setAccessibleName(tr("compute per step"));
  form->addRow(tr("Local &compute per step"), compute_ms_);
  assumption_result_ = new QLabel(box);
  assumption_result_->setWordWrap(true);
  assumption_result_->setTextFormat(Qt::RichText);
  assumption_result_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  form->addRow(assumption_result_);
  connect(compute_ms_, &QDoubleSpinBox::valueChanged, this, &CommPage::show_assumption);
  show_assumption();

  auto* here = new QWidget(this);
  auto* hl = new QVBoxLayout(here);
  hl->setContentsMargins(0, 0, 0, 0);
  calibrate_ = new QPushButton(tr("Ca&librate this machine first (once; parlab calibrate --if-needed --quick)"), here);
  calibration_ = new QProcess(this);
  hl->addWidget(calibrate_);
  speedup_ = new QLineEdit(here);
  speedup_->setPlaceholderText(tr("e.g. 1.6"));
  speedup_->setAccessibleName(tr("predicted speedup"));
  hl->addWidget(speedup_);
  LessonQuestion* qb =
      add_question(tr("Benchmark a small topology: the model here on 2 workers"), rubric::lesson::kSpeedup, here,
                   [this](QString* e) { return positive_number(speedup_, tr("speedup"), e); });
  three_ = new SpeedupModel(this);
  table_ = new QTableView(this);
  table_->setModel(three_);
  table_->setAccessibleName(tr("analytic, simulated and measured"));
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setMinimumHeight(110);
  table_->setVisible(false);
  body_->addWidget(table_);
  body_->addStretch(1);
  QString error;
  if (const auto s = here_setup(kHereWorkers, &error)) {
    qb->set_prompt(tr("What <b>speedup</b> will <b>%1</b> reach on <b>%2 worker processes</b> of this machine over one "
                      "(a throughput ratio: samples per second on 2 over samples per second on 1)? Commit, then "
                      "the lab computes it analytically, "
                      "simulates it, and runs it for real (%3 steps on 1 and on 2 workers).")
                       .arg(QString::fromStdString(s->model.name))
                       .arg(kHereWorkers)
                       .arg(options.run_steps));
    db::NewPrediction cb;
    cb.model = s->inputs.model_label();
    cb.cluster = s->base_cluster.name;
    cb.world_size = kHereWorkers;
    cb.source = db::RunKind::kMeasured;
    qb->set_context(cb);
  } else {
    qb->set_prompt(error.toHtmlEscaped());
  }
  sim_ = new SimulationJob(this);
  runs_ = new RunController(this);
  connect(qb, &LessonQuestion::committed, this, &CommPage::reveal_speedup);
  connect(sim_, &SimulationJob::point_ready, this, &CommPage::on_point);
  connect(sim_, &SimulationJob::finished, this, [this](bool cancelled) {
    if (!cancelled && !pending_runs_.empty()) start_next_run();
  });
  connect(runs_, &RunController::finished, this, &CommPage::on_run);
  connect(runs_, &RunController::step_done, this, [this](int step, int steps, double, double) {
    questions()[1]->progress(tr("Running for real on %1 worker(s): step %2 of %3 …")
                                 .arg(pending_runs_.empty() ? 0 : pending_runs_.front())
                                 .arg(step)
                                 .arg(steps));
  });
  connect(calibrate_, &QPushButton::clicked, this, &CommPage::calibrate);
  connect(calibration_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus) {
    calibrate_->setEnabled(true);
    const QString out = QString::fromUtf8(calibration_->readAllStandardError()).trimmed().section('\n', -1);
    calibrate_->setText(code == 0 ? tr("Calibration done; parlab calibrate said: %1").arg(out)
                                  : tr("Calibration failed: %1").arg(out));
  });
}

void CommPage::calibrate() {
  calibrate_->setEnabled(false);
  calibrate_->setText(tr("Calibrating this machine …"));
  const QString parlab = options_.lab.parlab.isEmpty() ? find_parlab() : options_.lab.parlab;
  calibration_->start(parlab, {"calibrate", "--if-needed", "--quick", "--db", options_.lab.db});
}

void CommPage::reveal_efficiency() {
  const strategy::ScalingLabInputs in;
  const auto rows = strategy::scaling_lab(in);
  QString table = tr("<table cellspacing=6><tr><th>W</th><th>t_W</th><th>speedup</th><th>efficiency</th></tr>");
  std::optional<double> eff;
  for (const strategy::ScalingRow& r : rows) {
    if (r.workers == kLabWorkers) eff = r.efficiency;
    table += QString("<tr><td>%1</td><td>%2</td><td>%3x</td><td>%4</td></tr>")
                 .arg(r.workers)
                 .arg(QString::fromStdString(units::format_seconds(r.step_seconds)))
                 .arg(r.speedup, 0, 'f', 2)
                 .arg(r.efficiency, 0, 'f', 3);
  }
  table += "</table>";
  if (!eff) return questions()[0]->fail(tr("the scaling lab has no %1-worker row").arg(kLabWorkers));
  const QString text =
      tr("<p>You predicted <b>%1</b>; the scaling lab (strategy/scaling_lab.h) gives <b>%2</b>:</p>%3%4")
          .arg(*questions()[0]->predicted(), 0, 'f', 3)
          .arg(*eff, 0, 'f', 3)
          .arg(lines_html(strategy::explain_scaling(in, kLabWorkers)), table);
  const QString notice =
      tr("The ring moves 2(W-1)/W of the gradient bytes whatever W is, so its time barely grows; the "
         "straggler term grows with log2 W and is what the efficiency pays for here.");
  const QString check =
      tr("Substitute W = 8 into t_W yourself (the line above has every term), divide t_1 by it, and "
         "change the compute per step below: with less compute to hide behind, the same communication "
         "costs a larger share.");
  questions()[0]->reveal(*eff, std::nullopt, text + lesson_notes(notice, check));
}

void CommPage::show_assumption() {
  strategy::ScalingLabInputs in;
  in.compute_seconds = compute_ms_->value() / 1e3;
  assumption_result_->setText(lines_html(strategy::explain_scaling(in, kLabWorkers)));
}

void CommPage::reveal_speedup() {
  QString error;
  setup_ = here_setup(kHereWorkers, &error);
  if (!setup_) return questions()[1]->fail(error);
  if (const auto why = why_not_runnable(*setup_)) return questions()[1]->fail(*why);
  const std::vector<int> ws = series_workers(*setup_);
  const int baseline = ws.empty() ? 1 : ws.front();
  std::vector<SpeedupPoint> rows;
  try {
    for (const SpeedupPoint& p : analytic_series(*setup_))
      if (p.workers == baseline || p.workers == kHereWorkers) rows.push_back(p);
  } catch (const std::exception& e) {
    return questions()[1]->fail(QString::fromUtf8(e.what()));
  }
  three_->set_rows(rows);
  table_->setVisible(true);
  pending_runs_ = {baseline, kHereWorkers};
  target_run_.reset();
  questions()[1]->progress(tr("Analytic: done. Simulating 1 and 2 workers …"));
  sim_->start(*setup_, {baseline, kHereWorkers}, false);
}

void CommPage::on_point(const SimPoint& p) {
  if (!p.error.empty()) {
    pending_runs_.clear();
    return questions()[1]->fail(tr("the simulation failed: %1").arg(QString::fromStdString(p.error)));
  }
  three_->set_step(p.workers, SeriesSource::kSimulated, p.result.step_seconds);
}

void CommPage::start_next_run() {
  questions()[1]->progress(tr("Running for real on %1 worker(s) …").arg(pending_runs_.front()));
  runs_->start(run_request_for(*setup_, options_.lab, pending_runs_.front(), options_.run_steps, 1));
}

void CommPage::on_run(const RunOutcome& o) {
  const int w = pending_runs_.empty() ? 0 : pending_runs_.front();
  const auto fail = [&](const QString& why) {
    pending_runs_.clear();
    questions()[1]->fail(tr("the run on %1 workers did not complete: %2").arg(w).arg(why));
  };
  if (!o.ok || !o.run_id) return fail(o.message);
  try {
    const double step = db::ResultsStore::open(db_path_).run_metrics(*o.run_id).at("step_seconds");
    three_->set_step(w, SeriesSource::kMeasured, step, *o.run_id);
  } catch (const std::exception& e) {
    return fail(QString::fromUtf8(e.what()));
  }
  if (w == kHereWorkers) target_run_ = *o.run_id;
  pending_runs_.erase(pending_runs_.begin());
  if (!pending_runs_.empty()) return start_next_run();
  finish_speedup();
}

void CommPage::finish_speedup() {
  const int row = three_->row_of(kHereWorkers);
  const auto analytic = three_->value(row, SpeedupModel::kAnalyticSpeedup);
  const auto simulated = three_->value(row, SpeedupModel::kSimulatedSpeedup);
  const auto measured = three_->value(row, SpeedupModel::kMeasuredSpeedup);
  if (!measured) return questions()[1]->fail(tr("no measured speedup at %1 workers").arg(kHereWorkers));
  const auto x = [](const std::optional<double>& v) { return v ? QString::number(*v, 'f', 2) + "x" : QString("-"); };
  const QString text =
      tr("<table cellspacing=8><tr><th>you predicted</th><th>analytic</th><th>simulated</th><th>measured</th></tr>"
         "<tr><td align=center><b>%1</b></td><td align=center>%2</td><td align=center>%3</td><td "
         "align=center><b>%4</b></td></tr></table>"
         "<p>The table below holds the step times behind them (the measured run is #%5 in the History view).</p>")
          .arg(x(questions()[1]->predicted()), x(analytic), x(simulated), x(measured))
          .arg(target_run_ ? *target_run_ : 0);
  const QString notice =
      tr("The analytic model and the simulator price the same step program; the measurement also pays "
         "for what neither models. Here the worker processes share this machine's cores, so the "
         "all-reduce's copies compete with compute instead of overlapping it.");
  const QString check =
      tr("Open the Timeline (Ctrl+4): simulate one step, load the measured trace, and compare the "
         "exposed all-reduce of one measured step with the simulated one on the same axis.");
  questions()[1]->reveal(*measured, target_run_, text + lesson_notes(notice, check));
}

}  // namespace parlab::gui
