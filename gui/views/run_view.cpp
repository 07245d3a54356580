#include "gui/views/run_view.h"

#include <QCoreApplication>
#include <QDateTime>
#include <QDir>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "gui/core/live_steps_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"
#include "gui/views/fault_panel.h"

namespace parlab::gui {

QString find_parlab() {
  const QByteArray env = qgetenv("PARLAB_BIN");
  if (!env.isEmpty()) return QString::fromLocal8Bit(env);
  const QString here = QCoreApplication::applicationDirPath();
  for (const QString& p : {here + "/parlab", here + "/../cli/parlab"})
    if (QFileInfo(p).isExecutable()) return QFileInfo(p).canonicalFilePath();
  const QString path = QStandardPaths::findExecutable("parlab");
  return path.isEmpty() ? QStringLiteral("parlab") : path;
}

QString runs_dir_of(const LabOptions& o) {
  if (!o.runs_dir.isEmpty()) return o.runs_dir;
  return QFileInfo(o.db).path() + "/runs";  // relative when the DB path is: runs start in our directory
}

std::optional<QString> why_not_runnable(const LabSetup& s) {
  if (s.model.kind != strategy::ModelKind::kMlp)
    return QObject::tr(
               "Real runs train the lab MLP (kind = \"mlp\": lab-mlp, a TOML such as "
               "experiments/models/lab-mlp-small.toml); %1 is planned and simulated only.")
        .arg(QString::fromStdString(s.model.name));
  if (s.base_cluster.name != "cpu-local")
    return QObject::tr("Real runs use this machine: choose the cpu-local cluster (now %1).")
        .arg(QString::fromStdString(s.base_cluster.name));
  return std::nullopt;
}

RunView::RunView(const LabOptions& options, QWidget* parent) : QWidget(parent), options_(options) {
  controller_ = new RunController(this);
  steps_ = new LiveStepsModel(this);
  auto* layout = new QVBoxLayout(this);
  command_ = new QLabel(this);
  command_->setWordWrap(true);
  command_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(command_);
  auto* bar = new QHBoxLayout();
  auto* form = new QFormLayout();
  steps_field_ = new QSpinBox(this);
  steps_field_->setRange(1, 100000);
  steps_field_->setValue(20);
  seed_field_ = new QSpinBox(this);
  seed_field_->setRange(0, 1 << 30);
  seed_field_->setValue(1);
  form->addRow(tr("S&teps"), steps_field_);
  form->addRow(tr("See&d"), seed_field_);
  bar->addLayout(form);
  run_ = new QPushButton(tr("&Run for real"), this);
  cancel_ = new QPushButton(tr("Ca&ncel"), this);
  cancel_->setEnabled(false);
  progress_ = new QProgressBar(this);
  progress_->setFormat(tr("step %v of %m"));
  progress_->setValue(0);
  calibrate_button_ = new QPushButton(tr("Ca&librate this machine"), this);
  calibrate_button_->setToolTip(
      tr("parlab calibrate --quick: measure compute, memory bandwidth and loopback Gloo, and "
         "write the calibrated cpu-local the setup reads"));
  calibration_ = new QProcess(this);
  calibration_->setProcessChannelMode(QProcess::MergedChannels);
  bar->addWidget(run_);
  bar->addWidget(cancel_);
  bar->addWidget(calibrate_button_);
  bar->addWidget(progress_, 1);
  layout->addLayout(bar);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  status_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(status_);
  auto* charts = new QHBoxLayout();
  loss_panel_ = new ChartPanel(tr("Loss per step (live)"), steps_, this);
  time_panel_ = new ChartPanel(tr("Step time, ms (live)"), steps_, this);
  charts->addWidget(loss_panel_);
  charts->addWidget(time_panel_);
  layout->addLayout(charts, 2);
  log_ = new QPlainTextEdit(this);
  log_->setReadOnly(true);
  log_->setMaximumBlockCount(2000);
  log_->setAccessibleName(tr("run output"));
  log_->setMaximumHeight(110);
  layout->addWidget(log_);
  faults_ = new FaultPanel(options_, this);
  layout->addWidget(faults_);

  progress_->setRange(0, steps_field_->value());
  connect(steps_field_, &QSpinBox::valueChanged, this, [this](int steps) {
    if (!controller_->running()) progress_->setRange(0, steps);
  });
  connect(calibrate_button_, &QPushButton::clicked, this, &RunView::calibrate);
  connect(calibration_, &QProcess::readyRead, this, [this] {
    for (const QByteArray& line : calibration_->readAll().split('\n'))
      if (!line.isEmpty()) log_->appendPlainText(QString::fromUtf8(line));
  });
  connect(calibration_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus st) {
    calibrate_button_->setEnabled(true);
    cancel_->setEnabled(controller_->running());
    const bool ok = st == QProcess::NormalExit && code == 0;
    status_->setText(ok ? tr("Calibrated: cpu-local now holds this machine's measured figures.")
                        : tr("Calibration did not finish (status %1); see the output above.").arg(code));
    if (ok) emit calibrated();
  });
  connect(run_, &QPushButton::clicked, this, &RunView::start_run);
  connect(cancel_, &QPushButton::clicked, this, &RunView::cancel);
  connect(controller_, &RunController::step_done, this, [this](int step, int steps, double loss, double seconds) {
    progress_->setRange(0, steps);
    progress_->setValue(step);
    steps_->add(step, loss, seconds);
  });
  connect(controller_, &RunController::output_line, log_, &QPlainTextEdit::appendPlainText);
  connect(controller_, &RunController::finished, this, &RunView::on_finished);
  connect(steps_, &LiveStepsModel::changed, this, &RunView::refresh_charts);
  refresh_charts();
}

QString RunView::status() const { return status_->text(); }

void RunView::set_setup(const LabSetup& setup) {
  setup_ = setup;
  faults_->set_setup(setup);
  const auto why = why_not_runnable(setup);
  run_->setEnabled(!why && !controller_->running());
  if (why) {
    command_->setText(*why);
    return;
  }
  const auto r = request();
  command_->setText(tr("Runs on this machine: <code>parlab %1</code>").arg(r->arguments().join(' ').toHtmlEscaped()));
}

RunRequest run_request_for(const LabSetup& setup, const LabOptions& options, int workers, int steps, int seed) {
  RunRequest r;
  r.parlab = options.parlab.isEmpty() ? find_parlab() : options.parlab;
  r.db = options.db;
  r.model = QString::fromStdString(setup.inputs.model);
  r.cluster = QString::fromStdString(setup.inputs.cluster);
  SetupInputs in = setup.inputs;
  in.set("dp", "");  // workers / (tp pp), as the series scale it
  // The series and the trainer resolve the same text through one plan policy (strategy::resolve).
  r.plan = QString::fromStdString(in.plan_text());
  r.nproc = workers;
  r.steps = steps;
  r.seed = seed;
  r.run_dir = runs_dir_of(options) + "/lab-" + QDateTime::currentDateTimeUtc().toString("yyyyMMdd-hhmmss-zzz");
  r.trace = r.run_dir + ".trace.json";
  return r;
}

std::optional<RunRequest> RunView::request() const {
  if (!setup_ || why_not_runnable(*setup_)) return std::nullopt;
  return run_request_for(*setup_, options_, setup_->world(), steps_field_->value(), seed_field_->value());
}

bool RunView::start_run() {
  if (controller_->running()) return false;
  const auto r = request();
  if (!r) {
    status_->setText(setup_ ? *why_not_runnable(*setup_) : tr("No valid setup."));
    return false;
  }
  QDir().mkpath(runs_dir_of(options_));
  steps_->clear();
  log_->clear();
  progress_->setRange(0, r->steps);
  progress_->setValue(0);
  trace_ = r->trace;
  status_->setText(tr("Running %1 worker(s) …").arg(r->nproc));
  run_->setEnabled(false);
  cancel_->setEnabled(true);
  controller_->start(*r);
  return true;
}

bool RunView::calibrating() const { return calibration_->state() != QProcess::NotRunning; }

void RunView::calibrate() {
  if (calibrating() || controller_->running()) return;
  log_->clear();
  status_->setText(tr("Calibrating this machine (a minute or so) …"));
  calibrate_button_->setEnabled(false);
  cancel_->setEnabled(true);
  calibration_->start(options_.parlab.isEmpty() ? find_parlab() : options_.parlab,
                      {"calibrate", "--quick", "--db", options_.db});
}

void RunView::cancel() {
  if (calibrating()) {
    calibration_->terminate();
    return;
  }
  if (!controller_->running()) return;
  status_->setText(tr("Cancelling: stopping the workers …"));
  controller_->cancel();
}

void RunView::on_finished(const RunOutcome& o) {
  cancel_->setEnabled(false);
  run_->setEnabled(setup_ && !why_not_runnable(*setup_));
  const QString run = o.run_id ? tr("run %1").arg(*o.run_id) : tr("the run");
  if (o.ok)
    status_->setText(tr("Completed: %1 recorded in %2; final state hash %3.").arg(run, options_.db, o.final_hash));
  else if (o.cancelled)
    status_->setText(
        tr("Cancelled: the workers were stopped; %1 is marked killed and keeps the steps it recorded.").arg(run));
  else
    status_->setText(tr("Failed: %1").arg(o.message));
  emit run_finished(o, QFileInfo::exists(trace_) ? trace_ : QString());
}

void RunView::refresh_charts() {
  ChartSpec loss, time;
  loss.x_title = time.x_title = tr("step");
  loss.y_title = tr("loss");
  time.y_title = tr("ms");
  ChartSeries l{tr("loss"), ChartSeries::kLine, {}, QColor(60, 110, 180)};
  ChartSeries t{tr("step time"), ChartSeries::kLine, {}, QColor(230, 140, 40)};
  for (const auto& r : steps_->rows()) {
    l.points.emplace_back(r.step, r.loss);
    t.points.emplace_back(r.step, r.step_seconds * 1e3);
  }
  loss.series.push_back(l);
  time.series.push_back(t);
  loss_panel_->chart()->show_spec(loss);
  time_panel_->chart()->show_spec(time);
}

}  // namespace parlab::gui
