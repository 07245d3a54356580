#pragma once
// Plan view: the planner's ranked candidates for the setup's model, cluster and world (a
// table), the choice and its explanation in the seed's terms — the smallest split that fits
// and where more communication stops paying. The search runs off the UI thread (PlannerJob).
#include <QWidget>
#include <optional>

#include "gui/core/lab_setup.h"
#include "gui/core/planner_job.h"

class QLabel;
class QPushButton;
class QTableView;
class QTextBrowser;

namespace parlab::gui {

class CandidatesModel;

class PlanView : public QWidget {
  Q_OBJECT
 public:
  PlanView(CandidatesModel* model, QWidget* parent = nullptr);
  void set_setup(const LabSetup& setup);
  PlannerJob* job() const { return job_; }
  QString explanation() const;
  QTableView* table() const { return table_; }

 signals:
  // "Use this plan": the selected candidate's plan for the setup panel.
  void use_plan(const parlab::strategy::Plan& plan);

 private:
  void on_done(const PlannerOutcome& outcome);

  CandidatesModel* model_;
  PlannerJob* job_;
  QLabel* status_;
  QTableView* table_;
  QTextBrowser* explanation_;
  QPushButton* use_;
};

}  // namespace parlab::gui
