#pragma once
// Speedup view: speedup, efficiency or step time against workers for the current split —
// the analytic curve at once, the simulated one on request (off the UI thread, cancellable),
// measured points from the results DB — with each prediction's error in the table. The
// scaling lab's all-reduce model (the chapter's 120 ms example) is a preset, with its t_W
// substituted (strategy::explain_scaling). When the split or the worker count changes, the
// analytic curve of the plan before stays as a faint outline until the next change.
#include <QPointF>
#include <QWidget>
#include <optional>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;

namespace parlab::gui {

class ChartPanel;
class SimulationJob;
class SpeedupModel;
struct SimPoint;

class SpeedupView : public QWidget {
  Q_OBJECT
 public:
  enum Preset { kCurrentSetup = 0, kScalingLab = 1 };
  enum Metric { kSpeedup = 0, kEfficiency = 1, kStepTime = 2 };

  SpeedupView(SpeedupModel* model, std::string db_path, QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  // Reads measured points from the DB again (a run finished).
  void refresh_measured();
  void simulate();
  void cancel_simulation();
  void set_preset(Preset p);
  void set_metric(Metric m);
  ChartPanel* panel() const { return panel_; }
  SimulationJob* job() const { return job_; }
  QPushButton* simulate_button() const { return simulate_; }
  QString note() const;
  // The plan before the last change of split or worker count: its label and analytic curve
  // per metric (speedup, efficiency, step time in ms), as the chart drew it.
  struct Previous {
    QString label;
    std::vector<QPointF> points[3];
  };
  const std::optional<Previous>& previous() const { return previous_; }

 private:
  void refresh_chart();
  void on_point(const SimPoint& p);
  // Keeps the analytic curve now drawn as the outline when `setup` changes the split or world.
  void remember_previous(const LabSetup& setup);

  SpeedupModel* model_;
  std::string db_path_;
  std::optional<LabSetup> setup_;
  SimulationJob* job_;
  ChartPanel* panel_;
  QComboBox* preset_;
  QComboBox* metric_;
  QPushButton* simulate_;
  QPushButton* cancel_;
  QProgressBar* busy_;
  QLabel* note_;
  std::string shown_what_, shown_split_;
  std::optional<Previous> previous_;
};

}  // namespace parlab::gui
