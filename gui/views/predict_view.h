#pragma once
// Predict, then reveal: the learner commits to a predicted speedup at the current worker count
// (and a sentence why) before the simulation is shown. The prediction is written to the results
// DB at once (predictions table, revealed NULL); then the simulator runs off the UI thread at
// the baseline and the current worker count, and the simulated speedup is written as the
// revealed value and shown with the prediction's error.
#include <QWidget>
#include <optional>
#include <string>

#include "gui/core/lab_setup.h"

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
  PredictView(std::string db_path, SpeedupModel* speedup, PredictionsModel* predictions, QWidget* parent = nullptr);
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

 signals:
  void revealed(long long prediction);

 private:
  void on_point(const SimPoint& p);

  std::string db_path_;
  SpeedupModel* speedup_;
  PredictionsModel* predictions_;
  std::optional<LabSetup> setup_;
  SimulationJob* job_;
  QLabel* question_;
  QLineEdit* predicted_;
  QLineEdit* reason_;
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
