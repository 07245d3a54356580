#include "gui/core/planner_job.h"

#include <QtConcurrent/QtConcurrent>

namespace parlab::gui {

PlannerJob::PlannerJob(QObject* parent) : QObject(parent) {}
PlannerJob::~PlannerJob() { cancel(); }

void PlannerJob::start(const LabSetup& setup) {
  cancel();
  auto* w = new QFutureWatcher<PlannerOutcome>(this);
  watcher_ = w;
  connect(w, &QFutureWatcher<PlannerOutcome>::finished, this, [this, w] {
    w->deleteLater();
    if (w != watcher_) return;
    watcher_ = nullptr;
    emit done(w->result());
  });
  const strategy::ModelSpec model = setup.model;
  const strategy::ClusterSpec cluster = setup.cluster;
  strategy::PlannerOptions options;
  options.global_batch = setup.plan.global_batch;
  w->setFuture(QtConcurrent::run([model, cluster, options] {
    PlannerOutcome o;
    try {
      o.report = strategy::search_plans(model, cluster, options);
    } catch (const std::exception& e) {
      o.error = e.what();
    }
    return o;
  }));
}

void PlannerJob::cancel() {
  if (!watcher_) return;
  // The search has no cancellation point: it finishes in the pool and its result is dropped.
  watcher_ = nullptr;
}

}  // namespace parlab::gui
