#pragma once
// Timeline view: one simulated step per rank (sim::simulate_plan's timeline: the same events
// the Chrome trace export writes) and, when a measured run wrote a trace, one chosen measured
// step beside it on the same time axis (both start at 0; the view says which step it took).
// Each has its table toggle; simulating runs off the UI thread.
#include <QWidget>
#include <optional>
#include <vector>

#include "gui/core/lab_setup.h"
#include "trace/trace.h"

class QLabel;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace parlab::gui {

class ChartPanel;
class SimulationJob;
class TimelineModel;
class TimelineWidget;
struct SimPoint;

class TimelineView : public QWidget {
  Q_OBJECT
 public:
  TimelineView(TimelineModel* simulated, TimelineModel* measured, QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  void simulate();
  void cancel();
  // A measured Chrome trace (a run's --trace file); an unreadable file shows why.
  void load_measured(const QString& path);
  SimulationJob* job() const { return job_; }
  TimelineWidget* simulated_widget() const { return sim_widget_; }
  ChartPanel* simulated_panel() const { return sim_panel_; }
  QString status() const;
  // The measured step shown (the runtime's step number); nullopt before a trace with steps.
  std::optional<int> measured_step() const { return measured_step_; }
  void show_measured_step(int step);
  QString alignment_text() const;
  TimelineWidget* measured_widget() const { return measured_widget_; }

 private:
  void on_point(const SimPoint& p);
  // Both timelines on one axis: the longer of the two spans.
  void share_axis();

  TimelineModel* simulated_;
  TimelineModel* measured_;
  std::optional<LabSetup> setup_;
  SimulationJob* job_;
  TimelineWidget* sim_widget_;
  TimelineWidget* measured_widget_;
  ChartPanel* sim_panel_;
  ChartPanel* measured_panel_;
  QPushButton* simulate_;
  QPushButton* cancel_;
  QProgressBar* busy_;
  QLabel* status_;
  QLabel* details_;
  QSpinBox* step_;
  QLabel* alignment_;
  std::vector<trace::Event> all_measured_;
  std::vector<int> measured_steps_;
  std::optional<int> measured_step_;
};

}  // namespace parlab::gui
