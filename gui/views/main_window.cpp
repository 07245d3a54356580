#include "gui/views/main_window.h"

#include <QLabel>
#include <QMenuBar>
#include <QScrollArea>
#include <QShortcut>
#include <QSplitter>
#include <QStatusBar>
#include <QTabWidget>

#include "gui/core/candidates_model.h"
#include "gui/core/history_model.h"
#include "gui/core/lesson_model.h"
#include "gui/core/memory_model.h"
#include "gui/core/predictions_model.h"
#include "gui/core/rubric_model.h"
#include "gui/core/speedup_model.h"
#include "gui/core/timeline_model.h"
#include "gui/views/fault_panel.h"
#include "gui/views/history_view.h"
#include "gui/views/lesson_view.h"
#include "gui/views/memory_view.h"
#include "gui/views/plan_view.h"
#include "gui/views/predict_view.h"
#include "gui/views/progress_view.h"
#include "gui/views/run_view.h"
#include "gui/views/setup_panel.h"
#include "gui/views/speedup_view.h"
#include "gui/views/timeline_view.h"

namespace parlab::gui {

const std::vector<QString>& MainWindow::view_names() {
  static const std::vector<QString> names = {"memory", "plan",    "speedup",  "timeline", "predict",
                                             "run",    "history", "progress", "lesson"};
  return names;
}

MainWindow::MainWindow(const LabOptions& options, QWidget* parent) : QMainWindow(parent), options_(options) {
  setWindowTitle(tr("parlab lab — %1").arg(options.db));
  const std::string db = options.db.toStdString();
  memory_ = new MemoryModel(this);
  speedup_ = new SpeedupModel(this);
  candidates_ = new CandidatesModel(this);
  sim_timeline_ = new TimelineModel(this);
  measured_timeline_ = new TimelineModel(this);
  history_ = new HistoryModel(this);
  predictions_ = new PredictionsModel(this);
  rubric_ = new RubricModel(this);

  auto* split = new QSplitter(this);
  setup_ = new SetupPanel();
  auto* setup_area = new QScrollArea(split);
  setup_area->setWidget(setup_);
  setup_area->setWidgetResizable(true);
  setup_area->setMinimumWidth(330);
  split->addWidget(setup_area);
  tabs_ = new QTabWidget(split);
  memory_view_ = new MemoryView(memory_, tabs_);
  plan_view_ = new PlanView(candidates_, tabs_, options);
  speedup_view_ = new SpeedupView(speedup_, db, tabs_);
  timeline_view_ = new TimelineView(sim_timeline_, measured_timeline_, tabs_);
  predict_view_ = new PredictView(options, speedup_, predictions_, tabs_);
  run_view_ = new RunView(options, tabs_);
  history_view_ = new HistoryView(history_, db, tabs_);
  progress_view_ = new ProgressView(rubric_, db, tabs_);
  LessonOptions lesson;
  lesson.lab = options;
  lesson.here_model = options.lesson_model.toStdString();
  lesson.run_steps = options.lesson_steps;
  lesson_view_ = new LessonView(lesson, tabs_);
  tabs_->addTab(memory_view_, tr("&1 Memory"));
  tabs_->addTab(plan_view_, tr("&2 Plan"));
  tabs_->addTab(speedup_view_, tr("&3 Speedup"));
  tabs_->addTab(timeline_view_, tr("&4 Timeline"));
  tabs_->addTab(predict_view_, tr("&5 Predict"));
  tabs_->addTab(run_view_, tr("&6 Run"));
  tabs_->addTab(history_view_, tr("&7 History"));
  tabs_->addTab(progress_view_, tr("&8 Progress"));
  tabs_->addTab(lesson_view_, tr("&9 Lesson"));
  split->addWidget(tabs_);
  split->setStretchFactor(1, 1);
  setCentralWidget(split);

  for (int i = 0; i < tabs_->count(); ++i) {
    auto* s = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key(Qt::Key_1 + i)), this);
    connect(s, &QShortcut::activated, this, [this, i] {
      tabs_->setCurrentIndex(i);
      tabs_->currentWidget()->setFocus();
    });
  }
  auto* to_setup = new QShortcut(QKeySequence(Qt::CTRL | Qt::Key_L), this);
  connect(to_setup, &QShortcut::activated, this, [this] { setup_->field("model")->setFocus(); });

  connect(setup_, &SetupPanel::setup_changed, this, &MainWindow::on_setup);
  connect(setup_, &SetupPanel::setup_invalid, this,
          [this](const SetupError& e) { statusBar()->showMessage(QString::fromStdString(e.message)); });
  connect(run_view_, &RunView::run_finished, this, [this](const RunOutcome&, const QString& trace) {
    speedup_view_->refresh_measured();
    history_view_->reload();
    progress_view_->refresh();
    if (!trace.isEmpty()) timeline_view_->load_measured(trace);
  });
  connect(run_view_, &RunView::calibrated, this, [this] { setup_->set_inputs(setup_->inputs()); });
  connect(run_view_->faults(), &FaultPanel::done, history_view_, &HistoryView::reload);
  connect(predict_view_, &PredictView::revealed, history_view_, &HistoryView::reload);
  connect(predict_view_, &PredictView::revealed, progress_view_, &ProgressView::refresh);
  connect(run_view_->faults(), &FaultPanel::done, progress_view_, &ProgressView::refresh);
  connect(lesson_view_, &LessonView::progressed, this, [this] {
    predictions_->load(options_.db.toStdString());
    history_view_->reload();
    progress_view_->refresh();
    speedup_view_->refresh_measured();
  });
  connect(predict_view_, &PredictView::measured_runs_recorded, speedup_view_, &SpeedupView::refresh_measured);
  connect(history_view_, &HistoryView::open_run, this, [this](const SetupInputs& in) {
    setup_->set_inputs(in);
    statusBar()->showMessage(tr("Loaded the run's plan into the setup."));
  });
  connect(plan_view_, &PlanView::use_plan, this, [this](const strategy::Plan& p) {
    SetupInputs in = setup_->inputs();
    in.set("dp", "");
    in.set("tp", std::to_string(p.tp));
    in.set("pp", std::to_string(p.pp));
    in.set("zero", std::to_string(p.zero));
    in.set("mb", std::to_string(p.microbatch));
    in.set("gbs", std::to_string(p.global_batch));
    in.set("microbatches", "");
    in.set("schedule", std::string(strategy::to_string(p.schedule)));
    in.set("v", p.schedule == strategy::Schedule::kInterleaved ? std::to_string(p.v) : "");
    in.set("recompute", std::string(strategy::to_string(p.recompute)));
    in.set("sp", p.sequence_parallel ? "on" : "off");
    setup_->set_inputs(in);
  });
  create_menu();
  statusBar()->showMessage(tr("Ctrl+1..9: views (9: the lesson), Ctrl+L: setup, Alt+T: a chart's table"));
  if (setup_->setup()) on_setup(*setup_->setup());
}

void MainWindow::create_menu() {
  QMenu* view = menuBar()->addMenu(tr("&View"));
  QAction* lesson = view->addAction(tr("The &lesson (start here)"));
  connect(lesson, &QAction::triggered, this, [this] { show_view("lesson"); });
  view->addSeparator();
  for (int i = 0; i + 1 < tabs_->count(); ++i) {
    QAction* a = view->addAction(tabs_->tabText(i));
    connect(a, &QAction::triggered, this, [this, i] { tabs_->setCurrentIndex(i); });
  }
}

bool MainWindow::lesson_pending() const { return lesson_view_->model()->progress().next_step != 0; }

void MainWindow::on_setup(const LabSetup& s) {
  memory_->set_setup(s);
  plan_view_->set_setup(s);
  speedup_view_->set_setup(s);
  timeline_view_->set_setup(s);
  predict_view_->set_setup(s);
  run_view_->set_setup(s);
  statusBar()->showMessage(tr("%1 on %2 devices: %3")
                               .arg(QString::fromStdString(s.model.name))
                               .arg(s.world())
                               .arg(QString::fromStdString(s.plan.short_name())));
}

void MainWindow::show_view(const QString& name) {
  const auto& names = view_names();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == name) tabs_->setCurrentIndex(int(i));
}

}  // namespace parlab::gui
