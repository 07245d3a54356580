#pragma once
// Plan view: the planner's ranked candidates for the setup's model, cluster and world (a
// table), the choice and its explanation in the seed's terms — the smallest split that fits
// and where more communication stops paying. The search runs off the UI thread (PlannerJob).
// "Measure the top candidates" trains the planner's top plans and the best of each other family
// for real (the decide experiment, a child `parlab experiment run`) and shows its regret and
// rank correlation. "Price on this machine" prices the candidates again on profiles of their own
// rank shapes (a child `parlab plan --profile`), as `parlab plan` chooses where ranks share cores.
#include <QWidget>
#include <optional>

#include "gui/core/lab_setup.h"
#include "gui/core/planner_job.h"
#include "gui/views/lab_options.h"

class QLabel;
class QPushButton;
class QTableView;
class QTextBrowser;

namespace parlab::gui {

class CandidatesModel;
class DecideJob;
class MachinePricingJob;

class PlanView : public QWidget {
  Q_OBJECT
 public:
  PlanView(CandidatesModel* model, QWidget* parent = nullptr, LabOptions options = {});
  void set_setup(const LabSetup& setup);
  PlannerJob* job() const { return job_; }
  DecideJob* decide_job() const { return decide_; }
  QPushButton* measure_button() const { return measure_; }
  QPushButton* price_button() const { return price_; }
  MachinePricingJob* pricing_job() const { return pricing_; }
  QString decision() const;  // the last measurement's headline (or why it could not run)
  QString explanation() const;
  QTableView* table() const { return table_; }

 signals:
  // "Use this plan": the selected candidate's plan for the setup panel.
  void use_plan(const parlab::strategy::Plan& plan);

 private:
  void on_done(const PlannerOutcome& outcome);
  void measure_candidates();
  void price_on_machine();

  CandidatesModel* model_;
  PlannerJob* job_;
  QLabel* status_;
  QTableView* table_;
  QTextBrowser* explanation_;
  QPushButton* use_;
  QPushButton* measure_;
  QPushButton* price_;
  QLabel* decision_;
  DecideJob* decide_;
  MachinePricingJob* pricing_;
  LabOptions options_;
  std::optional<LabSetup> setup_;
};

}  // namespace parlab::gui
