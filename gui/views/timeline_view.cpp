#include "gui/views/timeline_view.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <algorithm>
#include <numeric>

#include "gui/core/simulation_job.h"
#include "gui/core/timeline_model.h"
#include "gui/core/trace_reader.h"
#include "gui/views/chart_panel.h"
#include "gui/views/timeline_widget.h"

namespace parlab::gui {

namespace {
ChartPanel* timeline_panel(const QString& title, TimelineModel* model, TimelineWidget** widget, QWidget* parent) {
  auto* panel = new ChartPanel(title, model, parent);
  auto* area = new QScrollArea(panel);
  *widget = new TimelineWidget(model, area);
  area->setWidget(*widget);
  (*widget)->follow(area);
  area->setWidgetResizable(false);
  area->setFocusPolicy(Qt::NoFocus);
  panel->set_chart_widget(area);
  return panel;
}
}  // namespace

TimelineView::TimelineView(TimelineModel* simulated, TimelineModel* measured, QWidget* parent)
    : QWidget(parent), simulated_(simulated), measured_(measured) {
  job_ = new SimulationJob(this);
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  simulate_ = new QPushButton(tr("S&imulate one step"), this);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setEnabled(false);
  auto* load = new QPushButton(tr("&Load a measured trace…"), this);
  busy_ = new QProgressBar(this);
  busy_->setRange(0, SimulationJob::kPerPoint);  // the simulator's own progress (ops executed)
  busy_->setFormat(QStringLiteral("%p%"));
  busy_->setVisible(false);
  busy_->setMaximumWidth(160);
  status_ = new QLabel(this);
  bar->addWidget(simulate_);
  bar->addWidget(cancel_);
  bar->addWidget(busy_);
  bar->addWidget(load);
  auto* step_label = new QLabel(tr("Measured s&tep"), this);
  step_ = new QSpinBox(this);
  step_->setEnabled(false);
  step_->setAccessibleName(tr("measured step"));
  step_label->setBuddy(step_);
  bar->addWidget(step_label);
  bar->addWidget(step_);
  bar->addWidget(status_, 1);
  layout->addLayout(bar);
  alignment_ = new QLabel(this);
  alignment_->setWordWrap(true);
  layout->addWidget(alignment_);
  auto* split = new QSplitter(Qt::Vertical, this);
  sim_panel_ = timeline_panel(tr("Simulated step (Ctrl+wheel or +/- to zoom, hover or Left/Right for details)"),
                              simulated, &sim_widget_, split);
  measured_panel_ = timeline_panel(tr("Measured (a run's --trace)"), measured, &measured_widget_, split);
  split->addWidget(sim_panel_);
  split->addWidget(measured_panel_);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  layout->addWidget(split, 1);
  details_ = new QLabel(this);
  details_->setWordWrap(true);
  details_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(details_);

  connect(simulate_, &QPushButton::clicked, this, &TimelineView::simulate);
  connect(cancel_, &QPushButton::clicked, this, &TimelineView::cancel);
  connect(load, &QPushButton::clicked, this, [this] {
    const QString f = QFileDialog::getOpenFileName(this, tr("Open a Chrome trace"), QString(), "JSON (*.json)");
    if (!f.isEmpty()) load_measured(f);
  });
  connect(job_, &SimulationJob::point_ready, this, &TimelineView::on_point);
  connect(job_, &SimulationJob::progress, this, [this](int done, int total) {
    busy_->setRange(0, total);
    busy_->setValue(done);
  });
  connect(job_, &SimulationJob::activity, this,
          [this](const QString& what) { status_->setText(tr("Simulating: %1").arg(what)); });
  connect(job_, &SimulationJob::finished, this, [this](bool cancelled) {
    busy_->setVisible(false);
    cancel_->setEnabled(false);
    simulate_->setEnabled(true);
    if (cancelled) status_->setText(tr("Simulation cancelled."));
  });
  connect(step_, &QSpinBox::valueChanged, this, [this](int step) {
    if (measured_step_ && step != *measured_step_) show_measured_step(step);
  });
  for (TimelineWidget* w : {sim_widget_, measured_widget_})
    connect(w, &TimelineWidget::current_changed, this, [this](int, const QString& d) { details_->setText(d); });
}

QString TimelineView::status() const { return status_->text(); }

void TimelineView::set_setup(const LabSetup& setup) {
  setup_ = setup;
  job_->cancel();
  simulated_->clear();
  status_->setText(setup.model.has_layers() ? tr("%1 on %2 ranks: press Simulate.")
                                                  .arg(QString::fromStdString(setup.plan.short_name()))
                                                  .arg(setup.world())
                                            : tr("A bare parameter count has no step program to simulate."));
  simulate_->setEnabled(setup.model.has_layers());
}

void TimelineView::simulate() {
  if (!setup_ || !setup_->model.has_layers()) return;
  busy_->setVisible(true);
  cancel_->setEnabled(true);
  simulate_->setEnabled(false);
  status_->setText(tr("Simulating …"));
  job_->start(*setup_, {setup_->world()}, true, 1);
}

void TimelineView::cancel() { job_->cancel(); }

void TimelineView::on_point(const SimPoint& p) {
  if (!p.error.empty()) {
    status_->setText(tr("Simulation failed: %1").arg(QString::fromStdString(p.error)));
    return;
  }
  // The last simulated step: the steps run back to back from t = 0 (warm-up first).
  const auto& each = p.result.step_seconds_each;
  const double from = each.empty() ? 0 : std::accumulate(each.begin(), each.end() - 1, 0.0);
  const double to = each.empty() ? p.result.simulated_seconds : from + each.back();
  simulated_->set_events(p.result.timeline, from, to + 1e-12);
  share_axis();
  status_->setText(tr("Simulated step: %1 ms on %2 ranks, %3 ops; largest rank bubble %4%")
                       .arg(p.result.step_seconds * 1e3, 0, 'f', 3)
                       .arg(p.workers)
                       .arg(simulated_->rowCount())
                       .arg(100 * p.result.walked_bubble_fraction, 0, 'f', 1));
}

void TimelineView::load_measured(const QString& path) {
  try {
    all_measured_ = read_chrome_trace_file(path.toStdString());
  } catch (const std::exception& e) {
    all_measured_.clear();
    measured_steps_.clear();
    measured_step_.reset();
    measured_->clear();
    step_->setEnabled(false);
    alignment_->clear();
    status_->setText(QString::fromUtf8(e.what()));
    return;
  }
  measured_steps_ = traced_steps(all_measured_);
  if (measured_steps_.empty()) {
    // A trace without step numbers: shown whole, on its own axis.
    measured_step_.reset();
    step_->setEnabled(false);
    measured_->set_all(all_measured_);
    measured_widget_->set_axis_seconds(0);
    sim_widget_->set_axis_seconds(0);
    alignment_->setText(tr("This trace carries no step numbers: shown whole, on its own time axis."));
    return;
  }
  step_->setEnabled(true);
  const QSignalBlocker block(step_);
  step_->setRange(measured_steps_.front(), measured_steps_.back());
  // The middle step: past the first steps' warm-up, before the last one's wind-down.
  show_measured_step(measured_steps_[measured_steps_.size() / 2]);
}

void TimelineView::show_measured_step(int step) {
  if (std::find(measured_steps_.begin(), measured_steps_.end(), step) == measured_steps_.end()) return;
  measured_step_ = step;
  {
    const QSignalBlocker block(step_);
    step_->setValue(step);
  }
  measured_->set_all(traced_step(all_measured_, step));
  share_axis();
}

QString TimelineView::alignment_text() const { return alignment_->text(); }

void TimelineView::share_axis() {
  if (!measured_step_) return;
  const double axis = std::max(simulated_->span_seconds(), measured_->span_seconds());
  sim_widget_->set_axis_seconds(axis);
  measured_widget_->set_axis_seconds(axis);
  alignment_->setText(tr("Measured step %1 (of steps %2..%3 in the trace, %4 ms) against the simulated step (%5 ms), "
                         "both from 0 on one "
                         "%6 ms axis.")
                          .arg(*measured_step_)
                          .arg(measured_steps_.front())
                          .arg(measured_steps_.back())
                          .arg(measured_->span_seconds() * 1e3, 0, 'f', 2)
                          .arg(simulated_->rowCount() ? QString::number(simulated_->span_seconds() * 1e3, 'f', 2)
                                                      : tr("not simulated yet"))
                          .arg(axis * 1e3, 0, 'g', 4));
}

}  // namespace parlab::gui
