#pragma once
// Predict, then reveal: the learner commits to a predicted speedup at the current worker count
// (and a sentence why) before the result is shown. The prediction is written to the results
// DB at once (predictions table, revealed NULL); then either the simulator runs off the UI
// thread, or real `parlab train` runs start on this machine (cpu-local), at the baseline and the
// current worker count, and that speedup is written as the revealed value (with the run that
// revealed it) and shown with the prediction's error.
#include <QWidget>
#include <optional>
#include <string>

#include "gui/core/lab_setup.h"
#include "gui/core/run_controller.h"
#include "gui/views/lab_options.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;
class QTableView;

namespace parlab::gui {

class PredictionsModel;
class SimulationJob;
class SpeedupModel;
struct SimPoint;

class PredictView : public QWidget {
  Q_OBJECT
 public:
  enum RevealBy { kSimulation = 0, kRealRuns = 1 };
  PredictView(const LabOptions& options, SpeedupModel* speedup, PredictionsModel* predictions,
              QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  // What the Commit button does; false (and an inline message) for a malformed prediction.
  bool commit();
  QLineEdit* predicted_field() const { return predicted_; }
  QLineEdit* reason_field() const { return reason_; }
  QPushButton* commit_button() const { return commit_; }
  QString message() const;
  QString result() const;
  std::optional<long long> last_prediction() const { return prediction_; }
  SimulationJob* job() const { return job_; }
  void set_reveal_by(RevealBy by);
  // Revealing: a simulation or a real run still going.
  bool busy() const;

 signals:
  void revealed(long long prediction);
  // Real runs it started finished (the speedup view reads measured points again).
  void measured_runs_recorded();

 private:
  void on_point(const SimPoint& p);
  void start_next_run();
  void on_run(const RunOutcome& o);
  // Both steps known: write the revealed speedup and show the error.
  void reveal(int source, std::optional<long long> run);

  LabOptions options_;
  std::string db_path_;
  SpeedupModel* speedup_;
  PredictionsModel* predictions_;
  std::optional<LabSetup> setup_;
  SimulationJob* job_;
  QLabel* question_;
  QLineEdit* predicted_;
  QLineEdit* reason_;
  QComboBox* reveal_by_;
  RunController* runs_;
  std::vector<int> pending_runs_;
  std::optional<long long> target_run_;
  QPushButton* commit_;
  QLabel* message_;
  QProgressBar* busy_;
  QLabel* result_;
  QTableView* table_;
  std::optional<long long> prediction_;
  int baseline_ = 1, target_ = 1;
  std::optional<double> step_baseline_, step_target_;
  double gbs_baseline_ = 0, gbs_target_ = 0;
};

}  // namespace parlab::gui
