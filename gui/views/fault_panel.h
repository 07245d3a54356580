#pragma once
// The fault menu: inject a kill, a skipped all-reduce or a slow rank into a real run and show
// what the launcher's detectors made of it — the verdict, the culprit, the restart — and the
// resumed run's final state hash against an uninterrupted run of the same job (run first).
#include <QWidget>
#include <optional>

#include "gui/core/lab_setup.h"
#include "gui/core/run_controller.h"
#include "gui/views/lab_options.h"

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;

namespace parlab::gui {

class FaultPanel : public QWidget {
  Q_OBJECT
 public:
  enum Fault { kKill = 0, kSkipAllreduce = 1, kSlowRank = 2 };
  FaultPanel(const LabOptions& options, QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  bool start(Fault fault);
  void cancel();
  bool running() const;
  QString result() const;
  // The run with the fault, as it last finished (its incidents in json).
  const RunOutcome& last_outcome() const { return faulted_outcome_; }
  // The uninterrupted run before it did not complete (done(false) came without a faulted run).
  bool reference_failed() const { return !reference_outcome_.ok; }
  // One fault only (the lesson's drills): the choice, the panel's own Start and its result
  // (which the lesson shows in its reveal) are hidden.
  void fix_fault(Fault fault);
  // The --fault value and the job flags each choice uses.
  static QString fault_spec(Fault fault, int steps);

 signals:
  void done(bool identical);

 private:
  RunRequest base_request() const;
  void on_reference(const RunOutcome& o);
  void on_faulted(const RunOutcome& o);

  LabOptions options_;
  std::optional<LabSetup> setup_;
  RunController* reference_;
  RunController* faulted_;
  QComboBox* fault_;
  QPushButton* start_;
  QPushButton* cancel_;
  QProgressBar* busy_;
  QLabel* result_;
  RunOutcome reference_outcome_, faulted_outcome_;
  Fault current_ = kKill;
};

}  // namespace parlab::gui
