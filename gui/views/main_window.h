#pragma once
// The lab's window: the setup panel on the left, the views as tabs on the right (Ctrl+1 ..
// Ctrl+9 switch tabs, Ctrl+L goes to the setup panel; the View menu lists them). It owns the item models and wires the
// views to the setup and to each other; it computes nothing itself.
#include <QMainWindow>
#include <vector>

#include "gui/views/lab_options.h"

class QTabWidget;

namespace parlab::gui {

class CandidatesModel;
class HistoryModel;
class HistoryView;
class LessonView;
class MemoryModel;
class MemoryView;
class PlanView;
class PredictView;
class PredictionsModel;
class ProgressView;
class RubricModel;
class RunView;
class SetupPanel;
class SpeedupModel;
class SpeedupView;
class TimelineModel;
class TimelineView;
struct LabSetup;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(const LabOptions& options, QWidget* parent = nullptr);

  // Tab names, in order: memory, plan, speedup, timeline, predict, run, history, progress, lesson.
  static const std::vector<QString>& view_names();
  void show_view(const QString& name);
  QTabWidget* tabs() const { return tabs_; }

  SetupPanel* setup_panel() const { return setup_; }
  MemoryView* memory_view() const { return memory_view_; }
  PlanView* plan_view() const { return plan_view_; }
  SpeedupView* speedup_view() const { return speedup_view_; }
  TimelineView* timeline_view() const { return timeline_view_; }
  PredictView* predict_view() const { return predict_view_; }
  RunView* run_view() const { return run_view_; }
  HistoryView* history_view() const { return history_view_; }
  ProgressView* progress_view() const { return progress_view_; }
  LessonView* lesson_view() const { return lesson_view_; }
  // The lesson is not complete yet: the lab opens on it.
  bool lesson_pending() const;

  MemoryModel* memory_model() const { return memory_; }
  SpeedupModel* speedup_model() const { return speedup_; }
  CandidatesModel* candidates_model() const { return candidates_; }
  TimelineModel* simulated_timeline() const { return sim_timeline_; }
  TimelineModel* measured_timeline() const { return measured_timeline_; }
  HistoryModel* history_model() const { return history_; }
  PredictionsModel* predictions_model() const { return predictions_; }
  RubricModel* rubric_model() const { return rubric_; }

 private:
  void on_setup(const LabSetup& setup);
  void build_layout();
  void create_shortcuts();
  void connect_signals();
  void create_menu();

  LabOptions options_;
  MemoryModel* memory_;
  SpeedupModel* speedup_;
  CandidatesModel* candidates_;
  TimelineModel* sim_timeline_;
  TimelineModel* measured_timeline_;
  HistoryModel* history_;
  PredictionsModel* predictions_;
  RubricModel* rubric_;
  SetupPanel* setup_;
  QTabWidget* tabs_;
  MemoryView* memory_view_;
  PlanView* plan_view_;
  SpeedupView* speedup_view_;
  TimelineView* timeline_view_;
  PredictView* predict_view_;
  RunView* run_view_;
  HistoryView* history_view_;
  ProgressView* progress_view_;
  LessonView* lesson_view_;
};

}  // namespace parlab::gui
