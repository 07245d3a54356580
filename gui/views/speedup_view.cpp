#include "gui/views/speedup_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "gui/core/lab_store.h"
#include "gui/core/simulation_job.h"
#include "gui/core/speedup_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"
#include "strategy/scaling_lab.h"

namespace parlab::gui {

SpeedupView::SpeedupView(SpeedupModel* model, std::string db_path, QWidget* parent)
    : QWidget(parent), model_(model), db_path_(std::move(db_path)) {
  job_ = new SimulationJob(this);
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  preset_ = new QComboBox(this);
  preset_->addItems({tr("Current setup"), tr("Scaling lab: the chapter's 120 ms example (DDP all-reduce model)")});
  preset_->setAccessibleName(tr("speedup preset"));
  metric_ = new QComboBox(this);
  metric_->addItems({tr("speedup"), tr("efficiency"), tr("step time")});
  metric_->setAccessibleName(tr("speedup metric"));
  simulate_ = new QPushButton(tr("&Simulate the series"), this);
  cancel_ = new QPushButton(tr("Cancel"), this);
  cancel_->setEnabled(false);
  busy_ = new QProgressBar(this);
  busy_->setVisible(false);
  busy_->setMaximumWidth(200);
  auto* preset_label = new QLabel(tr("Pr&eset"), this);
  preset_label->setBuddy(preset_);
  auto* metric_label = new QLabel(tr("Sho&w"), this);
  metric_label->setBuddy(metric_);
  bar->addWidget(preset_label);
  bar->addWidget(preset_, 1);
  bar->addWidget(metric_label);
  bar->addWidget(metric_);
  bar->addWidget(simulate_);
  bar->addWidget(cancel_);
  bar->addWidget(busy_);
  layout->addLayout(bar);
  panel_ = new ChartPanel(tr("Speedup against workers"), model, this);
  layout->addWidget(panel_, 1);
  note_ = new QLabel(this);
  note_->setWordWrap(true);
  note_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(note_);

  connect(preset_, &QComboBox::currentIndexChanged, this, [this](int i) { set_preset(Preset(i)); });
  connect(metric_, &QComboBox::currentIndexChanged, this, [this] { refresh_chart(); });
  connect(simulate_, &QPushButton::clicked, this, &SpeedupView::simulate);
  connect(cancel_, &QPushButton::clicked, this, &SpeedupView::cancel_simulation);
  connect(job_, &SimulationJob::point_ready, this, &SpeedupView::on_point);
  connect(job_, &SimulationJob::progress, this, [this](int done, int total) {
    busy_->setRange(0, total);
    busy_->setValue(done);
    busy_->setFormat(
        tr("%1 of %2 simulated").arg(done / SimulationJob::kPerPoint).arg(total / SimulationJob::kPerPoint));
  });
  connect(job_, &SimulationJob::finished, this, [this](bool cancelled) {
    busy_->setVisible(false);
    cancel_->setEnabled(false);
    simulate_->setEnabled(preset_->currentIndex() == kCurrentSetup);
    if (cancelled) note_->setText(tr("Simulation cancelled; its results were dropped."));
  });
  connect(model_, &SpeedupModel::changed, this, &SpeedupView::refresh_chart);
}

QString SpeedupView::note() const { return note_->text(); }

void SpeedupView::remember_previous(const LabSetup& s) {
  const std::string what = s.model.name + " on " + s.base_cluster.name;
  const std::string split = s.plan.short_name() + " on " + std::to_string(s.world()) + " workers";
  if (what != shown_what_) {
    previous_.reset();
  } else if (split != shown_split_ && preset_->currentIndex() == kCurrentSetup && model_->rowCount() > 0) {
    Previous p;
    p.label = QString::fromStdString(shown_split_);
    const int cols[3] = {SpeedupModel::kAnalyticSpeedup, SpeedupModel::kAnalyticEfficiency,
                         SpeedupModel::kAnalyticStep};
    for (int m = 0; m < 3; ++m)
      for (int r = 0; r < model_->rowCount(); ++r)
        if (const auto v = model_->value(r, cols[m]))
          p.points[m].emplace_back(model_->rows()[size_t(r)].workers, m == kStepTime ? *v * 1e3 : *v);
    previous_ = p;
  }
  shown_what_ = what;
  shown_split_ = split;
}

void SpeedupView::set_setup(const LabSetup& setup) {
  remember_previous(setup);
  setup_ = setup;
  if (preset_->currentIndex() == kCurrentSetup) set_preset(kCurrentSetup);
}

void SpeedupView::set_preset(Preset p) {
  if (preset_->currentIndex() != p) {
    preset_->setCurrentIndex(p);  // re-enters through the signal
    return;
  }
  job_->cancel();
  if (p == kScalingLab) {
    const strategy::ScalingLabInputs in;
    model_->set_rows(scaling_lab_series(in));
    simulate_->setEnabled(false);
    QString substituted;
    for (const std::string& line : strategy::explain_scaling(in, in.workers.back()))
      substituted += "<br><code>" + QString::fromStdString(line).toHtmlEscaped() + "</code>";
    note_->setText(tr("Scaling lab (strategy/scaling_lab.h): t_W = c + o + 2(W-1)a + 2(W-1)/W S/B + s c log2 W with "
                      "c = %1 ms, o = %2 ms, a = %3 us, S = %4 MB, B = %5 GB/s, s = %6. Each worker processes a full "
                      "local batch: speedup = W t_1 / t_W. With the numbers in, at W = %7:%8")
                       .arg(in.compute_seconds * 1e3)
                       .arg(in.overhead_seconds * 1e3)
                       .arg(in.latency_seconds * 1e6)
                       .arg(in.bytes / 1e6)
                       .arg(in.link_bytes_per_s / 1e9)
                       .arg(in.straggler_fraction)
                       .arg(in.workers.back())
                       .arg(substituted));
    return;
  }
  simulate_->setEnabled(true);
  if (!setup_) {
    model_->set_rows({});
    return;
  }
  try {
    model_->set_rows(analytic_series(*setup_));
    note_->setText(tr("Speedup = throughput_W / throughput_%1 (t_1 / t_W at a fixed global batch), the split's tp x pp "
                      "kept and dp = W / (tp pp). Simulate to reveal the simulated curve; measured points come from "
                      "completed runs in the results DB with the same model, cluster and split.")
                       .arg(model_->rows().empty() ? 1 : model_->rows().front().workers));
  } catch (const std::exception& e) {
    model_->set_rows({});
    note_->setText(tr("No analytic series: %1").arg(QString::fromUtf8(e.what())));
  }
  refresh_measured();
}

void SpeedupView::refresh_measured() {
  if (!setup_ || preset_->currentIndex() != kCurrentSetup) return;
  try {
    for (const auto& [w, m] : measured_points(db_path_, *setup_))
      model_->set_step(w, SeriesSource::kMeasured, m.step_seconds, m.run, m.spread_seconds, m.rounds);
  } catch (const std::exception& e) {
    note_->setText(tr("Measured points unavailable: %1").arg(QString::fromUtf8(e.what())));
  }
}

void SpeedupView::simulate() {
  if (!setup_ || preset_->currentIndex() != kCurrentSetup) return;
  std::vector<int> workers;
  for (const SpeedupPoint& p : model_->rows()) workers.push_back(p.workers);
  if (workers.empty()) return;
  busy_->setVisible(true);
  cancel_->setEnabled(true);
  simulate_->setEnabled(false);
  job_->start(*setup_, workers, false);
}

void SpeedupView::cancel_simulation() { job_->cancel(); }

void SpeedupView::set_metric(Metric m) { metric_->setCurrentIndex(m); }

void SpeedupView::on_point(const SimPoint& p) {
  if (!p.error.empty()) {
    note_->setText(tr("Simulation at %1 workers failed: %2").arg(p.workers).arg(QString::fromStdString(p.error)));
    return;
  }
  model_->set_step(p.workers, SeriesSource::kSimulated, p.result.step_seconds);
}

void SpeedupView::refresh_chart() {
  const int m = metric_->currentIndex();
  using C = SpeedupModel;
  struct Line {
    QString name;
    int column[3];
    ChartSeries::Kind kind;
    QColor color;
  };
  const Line lines[] = {
      {tr("analytic"),
       {C::kAnalyticSpeedup, C::kAnalyticEfficiency, C::kAnalyticStep},
       ChartSeries::kLine,
       QColor(60, 110, 180)},
      {tr("simulated"),
       {C::kSimulatedSpeedup, C::kSimulatedEfficiency, C::kSimulatedStep},
       ChartSeries::kLine,
       QColor(230, 140, 40)},
      {tr("measured"),
       {C::kMeasuredSpeedup, C::kMeasuredEfficiency, C::kMeasuredStep},
       ChartSeries::kPoints,
       QColor(200, 30, 30)},
      {tr("your prediction"), {C::kPredicted, -1, -1}, ChartSeries::kPoints, QColor(40, 160, 120)},
  };
  ChartSpec spec;
  spec.x_title = tr("workers");
  spec.y_title = m == kSpeedup ? tr("speedup (x)") : m == kEfficiency ? tr("efficiency") : tr("step time (ms)");
  spec.log2_x = true;
  for (const Line& l : lines) {
    if (l.column[m] < 0) continue;
    ChartSeries s;
    s.name = l.name;
    s.kind = l.kind;
    s.color = l.color;
    s.dashed = l.name == tr("analytic");  // the simulated curve often lies right on it
    for (int r = 0; r < model_->rowCount(); ++r)
      if (const auto v = model_->value(r, l.column[m]))
        s.points.emplace_back(model_->rows()[size_t(r)].workers, m == kStepTime ? *v * 1e3 : *v);
    if (!s.points.empty()) spec.series.push_back(s);
  }
  if (previous_ && preset_->currentIndex() == kCurrentSetup && !previous_->points[m].empty()) {
    ChartSeries before;
    before.kind = ChartSeries::kOutline;
    before.name = tr("before: %1 (analytic)").arg(previous_->label);
    before.points = previous_->points[m];
    spec.series.insert(spec.series.begin(), before);
  }
  if (m == kSpeedup && model_->rowCount() > 0) {
    ChartSeries ideal;
    ideal.name = tr("ideal (linear)");
    ideal.color = QColor(170, 170, 170);
    const double w1 = model_->rows().front().workers;
    for (const SpeedupPoint& p : model_->rows()) ideal.points.emplace_back(p.workers, p.workers / w1);
    spec.series.insert(spec.series.begin(), ideal);
  }
  panel_->chart()->show_spec(spec);
}

}  // namespace parlab::gui
