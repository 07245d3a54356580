#pragma once
// strategy::search_plans off the UI thread (a large model on a large cluster searches for
// seconds). The newest request wins: a result for an older setup is dropped.
#include <QFutureWatcher>
#include <QObject>
#include <string>

#include "gui/core/lab_setup.h"
#include "strategy/planner.h"

namespace parlab::gui {

struct PlannerOutcome {
  std::optional<strategy::PlanReport> report;
  std::string error;
};

class PlannerJob : public QObject {
  Q_OBJECT
 public:
  explicit PlannerJob(QObject* parent = nullptr);
  ~PlannerJob() override;
  // Searches plans for the setup's model on its cluster at its world and global batch.
  void start(const LabSetup& setup);
  void cancel();
  bool running() const { return watcher_ != nullptr; }

 signals:
  void done(const parlab::gui::PlannerOutcome& outcome);

 private:
  QFutureWatcher<PlannerOutcome>* watcher_ = nullptr;
};

}  // namespace parlab::gui
