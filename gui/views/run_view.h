#pragma once
// Run for real on cpu-local: `parlab train` as a child process (RunController) with the setup's
// model, world and split, recording into the lab's results DB. A progress bar per step, the
// live loss and step time, Cancel (the run ends killed, its steps kept), and the fault panel.
#include <QWidget>
#include <optional>

#include "gui/core/lab_setup.h"
#include "gui/core/run_controller.h"
#include "gui/views/lab_options.h"

class QLabel;
class QProcess;
class QPlainTextEdit;
class QProgressBar;
class QPushButton;
class QSpinBox;

namespace parlab::gui {

class ChartPanel;
class FaultPanel;
class LiveStepsModel;

class RunView : public QWidget {
  Q_OBJECT
 public:
  RunView(const LabOptions& options, QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  // Starts the run (what the Run button does); false with a reason in status() when it cannot.
  bool start_run();
  void cancel();
  RunController* controller() const { return controller_; }
  LiveStepsModel* steps_model() const { return steps_; }
  QSpinBox* steps_field() const { return steps_field_; }
  QProgressBar* progress() const { return progress_; }
  QString status() const;
  ChartPanel* loss_panel() const { return loss_panel_; }
  FaultPanel* faults() const { return faults_; }
  // `parlab calibrate --quick` as a child process: measures this machine and writes the
  // calibrated cpu-local, which the setup then reads (calibrated() is emitted on success).
  void calibrate();
  bool calibrating() const;
  // The request a run of the current setup would make.
  std::optional<RunRequest> request() const;

 signals:
  void run_finished(const parlab::gui::RunOutcome& outcome, const QString& trace);
  void calibrated();

 private:
  void build_layout();
  void connect_signals();
  void refresh_charts();
  void on_finished(const RunOutcome& o);

  LabOptions options_;
  std::optional<LabSetup> setup_;
  RunController* controller_;
  LiveStepsModel* steps_;
  QLabel* command_;
  QSpinBox* steps_field_;
  QSpinBox* seed_field_;
  QPushButton* run_;
  QPushButton* cancel_;
  QPushButton* calibrate_button_;
  QProcess* calibration_;
  QProgressBar* progress_;
  QLabel* status_;
  ChartPanel* loss_panel_;
  ChartPanel* time_panel_;
  QPlainTextEdit* log_;
  FaultPanel* faults_;
  QString trace_;
};

// `parlab train` for the setup's split at `workers` (dp derived, the global batch pinned to
// the one the analytic and simulated series use there, so a measured point compares like with
// like), with a fresh run directory under the lab's runs folder.
RunRequest run_request_for(const LabSetup& setup, const LabOptions& options, int workers, int steps, int seed);

// Whether the setup can run for real here, and why not.
std::optional<QString> why_not_runnable(const LabSetup& setup);

}  // namespace parlab::gui
