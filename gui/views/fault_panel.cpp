#include "gui/views/fault_panel.h"

#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QJsonArray>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "gui/views/run_view.h"

namespace parlab::gui {

namespace {
// Short (two runs back to back); the straggler detector needs two 20-step windows.
int steps_for(FaultPanel::Fault f) { return f == FaultPanel::kSlowRank ? 60 : 12; }
}  // namespace

QString FaultPanel::fault_spec(Fault f, int steps) {
  const int at = steps / 2 + 1;
  switch (f) {
    case kKill:
      return QString("kill:rank=1,step=%1").arg(at);
    case kSkipAllreduce:
      return QString("skip-allreduce:rank=1,step=%1").arg(at);
    default:
      return QString("slow:rank=1,factor=4");
  }
}

FaultPanel::FaultPanel(const LabOptions& options, QWidget* parent) : QWidget(parent), options_(options) {
  reference_ = new RunController(this);
  faulted_ = new RunController(this);
  auto* outer = new QVBoxLayout(this);
  outer->setContentsMargins(0, 0, 0, 0);
  auto* box =
      new QGroupBox(tr("Inject a fault (rank 1; an uninterrupted run of the same job first, for the hash)"), this);
  auto* layout = new QVBoxLayout(box);
  auto* bar = new QHBoxLayout();
  fault_ = new QComboBox(box);
  fault_->addItems({tr("kill rank 1 mid-run (checkpoint, restart, resume)"),
                    tr("rank 1 skips an all-reduce (the watchdog names the hang)"),
                    tr("rank 1 runs 4x slower (the straggler detector)")});
  fault_->setAccessibleName(tr("fault"));
  start_ = new QPushButton(tr("Run with the &fault"), box);
  cancel_ = new QPushButton(tr("Cancel"), box);
  cancel_->setEnabled(false);
  busy_ = new QProgressBar(box);
  busy_->setRange(0, 0);
  busy_->setVisible(false);
  busy_->setMaximumWidth(140);
  bar->addWidget(fault_, 1);
  bar->addWidget(start_);
  bar->addWidget(cancel_);
  bar->addWidget(busy_);
  layout->addLayout(bar);
  result_ = new QLabel(box);
  result_->setWordWrap(true);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(result_);
  outer->addWidget(box);
  connect(start_, &QPushButton::clicked, this, [this] { start(Fault(fault_->currentIndex())); });
  connect(cancel_, &QPushButton::clicked, this, &FaultPanel::cancel);
  connect(reference_, &RunController::finished, this, &FaultPanel::on_reference);
  connect(faulted_, &RunController::finished, this, &FaultPanel::on_faulted);
}

QString FaultPanel::result() const { return result_->text(); }
bool FaultPanel::running() const { return reference_->running() || faulted_->running(); }

void FaultPanel::set_setup(const LabSetup& setup) {
  setup_ = setup;
  const auto why = why_not_runnable(setup);
  const bool ok = !why && setup.world() >= 2;
  start_->setEnabled(ok && !running());
  if (!ok && !running())
    result_->setText(why ? *why : tr("Faults need at least 2 workers (rank 1 is the culprit)."));
  else if (!running())
    result_->clear();
}

RunRequest FaultPanel::base_request() const {
  RunRequest r;
  r.parlab = options_.parlab.isEmpty() ? find_parlab() : options_.parlab;
  r.db = options_.db;
  r.model = QString::fromStdString(setup_->inputs.model);
  r.cluster = QString::fromStdString(setup_->inputs.cluster);
  r.plan = QString::fromStdString(setup_->inputs.plan_text());  // resolved as the lab resolved it
  r.nproc = setup_->world();
  r.steps = steps_for(current_);
  r.checkpoint_every = 3;
  r.json = true;
  return r;
}

bool FaultPanel::start(Fault fault) {
  if (!setup_ || running() || why_not_runnable(*setup_) || setup_->world() < 2) return false;
  current_ = fault;
  QDir().mkpath(runs_dir_of(options_));
  RunRequest r = base_request();
  r.run_dir = runs_dir_of(options_) + "/fault-ref-" + QDateTime::currentDateTimeUtc().toString("yyyyMMdd-hhmmss-zzz");
  start_->setEnabled(false);
  cancel_->setEnabled(true);
  busy_->setVisible(true);
  result_->setText(tr("1/2: the uninterrupted run …"));
  reference_->start(r);
  return true;
}

void FaultPanel::cancel() {
  reference_->cancel();
  faulted_->cancel();
}

void FaultPanel::on_reference(const RunOutcome& o) {
  reference_outcome_ = o;
  if (!o.ok) {
    busy_->setVisible(false);
    cancel_->setEnabled(false);
    start_->setEnabled(true);
    result_->setText(tr("The uninterrupted run did not complete: %1").arg(o.message));
    faulted_outcome_ = o;  // whoever waits on done() reads why
    emit done(false);
    return;
  }
  RunRequest r = base_request();
  r.run_dir = runs_dir_of(options_) + "/fault-" + QDateTime::currentDateTimeUtc().toString("yyyyMMdd-hhmmss-zzz");
  r.faults = {fault_spec(current_, steps_for(current_))};
  r.max_restarts = current_ == kSlowRank ? 0 : 1;
  if (current_ == kSkipAllreduce) r.timeout_seconds = 3;  // the watchdog's bound on a collective
  result_->setText(tr("2/2: the run with --fault %1 …").arg(r.faults.front()));
  faulted_->start(r);
}

void FaultPanel::fix_fault(Fault fault) {
  fault_->setCurrentIndex(fault);
  fault_->setVisible(false);
  start_->setVisible(false);
  result_->setVisible(false);  // the lesson shows the verdict in its reveal (result())
}

void FaultPanel::on_faulted(const RunOutcome& o) {
  faulted_outcome_ = o;
  busy_->setVisible(false);
  cancel_->setEnabled(false);
  start_->setEnabled(true);
  QString text = tr("<b>--fault %1</b>: the job %2.<br>")
                     .arg(fault_spec(current_, steps_for(current_)).toHtmlEscaped(),
                          o.ok ? tr("completed") : tr("did not complete (%1)").arg(o.message.toHtmlEscaped()));
  const QJsonArray incidents = o.json.value("incidents").toArray();
  if (incidents.isEmpty()) text += tr("No incident was detected.<br>");
  for (const auto& v : incidents) {
    const QJsonObject i = v.toObject();
    text += tr("Verdict: <b>%1</b>, culprit <b>rank %2</b> at step %3%4")
                .arg(i.value("kind").toString())
                .arg(i.value("rank").toInt())
                .arg(i.value("failed_at_step").toInt())
                .arg(i.contains("detector") ? tr(" (detector: %1)").arg(i.value("detector").toString()) : QString());
    if (i.contains("detection_seconds"))
      text += tr("; detected after %1 s").arg(i.value("detection_seconds").toDouble(), 0, 'f', 2);
    if (i.contains("resumed_step"))
      text += tr("; restarted and resumed at step %1 (%2 step(s) lost, %3 s fault to first step)")
                  .arg(i.value("resumed_step").toInt())
                  .arg(i.value("steps_lost").toInt())
                  .arg(i.value("restart_total_seconds").toDouble(), 0, 'f', 2);
    if (i.contains("analysis")) text += "<br>" + i.value("analysis").toString().toHtmlEscaped();
    text += "<br><small>" + i.value("detail").toString().toHtmlEscaped() + "</small><br>";
  }
  const QString ref = reference_outcome_.final_hash, got = o.final_hash;
  const bool identical = !ref.isEmpty() && ref == got;
  text +=
      tr("Final state hash: uninterrupted <code>%1</code>, with the fault <code>%2</code> — <b>%3</b>")
          .arg(ref.isEmpty() ? "-" : ref, got.isEmpty() ? "-" : got, identical ? tr("bit-identical") : tr("different"));
  result_->setText(text);
  emit done(identical);
}

}  // namespace parlab::gui
