#include "gui/core/simulation_job.h"

#include <QPromise>
#include <QtConcurrent/QtConcurrent>

#include "sim/simulate.h"

namespace parlab::gui {

namespace {

void run_points(QPromise<SimPoint>& promise, LabSetup setup, std::vector<int> workers, bool timeline, int steps) {
  promise.setProgressRange(0, int(workers.size()));
  int done = 0;
  for (int w : workers) {
    if (promise.isCanceled()) return;
    SimPoint p;
    p.workers = w;
    try {
      strategy::ClusterSpec cluster;
      const strategy::Plan plan = plan_at_workers(setup, w, &cluster);
      sim::SimOptions o;
      o.steps = steps;
      o.timeline = timeline;
      p.result = sim::simulate_plan(setup.model, plan, cluster, o);
    } catch (const std::exception& e) {
      p.error = e.what();
    }
    promise.addResult(std::move(p));
    promise.setProgressValue(++done);
  }
}

}  // namespace

SimulationJob::SimulationJob(QObject* parent) : QObject(parent) {}

SimulationJob::~SimulationJob() {
  // The thread finishes its current simulation and stops; nothing it delivers reaches us.
  if (watcher_) watcher_->future().cancel();
}

void SimulationJob::start(const LabSetup& setup, const std::vector<int>& workers, bool timeline, int steps) {
  cancel();
  running_ = true;
  total_ = int(workers.size());
  watcher_ = new QFutureWatcher<SimPoint>(this);
  QFutureWatcher<SimPoint>* w = watcher_;
  connect(w, &QFutureWatcher<SimPoint>::resultReadyAt, this, [this, w](int i) {
    if (w != watcher_) return;  // an abandoned job
    emit point_ready(w->resultAt(i));
  });
  connect(w, &QFutureWatcher<SimPoint>::progressValueChanged, this, [this, w](int v) {
    if (w == watcher_) emit progress(v, total_);
  });
  connect(w, &QFutureWatcher<SimPoint>::finished, this, [this, w] {
    if (w != watcher_) return;
    running_ = false;
    watcher_ = nullptr;
    w->deleteLater();
    emit finished(false);
  });
  w->setFuture(QtConcurrent::run(run_points, setup, workers, timeline, steps));
  emit progress(0, total_);
}

void SimulationJob::cancel() {
  if (!watcher_) return;
  QFutureWatcher<SimPoint>* w = watcher_;
  watcher_ = nullptr;
  w->future().cancel();
  // Deleted once its thread is done with the future; its signals are ignored from now on.
  connect(w, &QFutureWatcher<SimPoint>::finished, w, &QObject::deleteLater);
  if (w->isFinished()) w->deleteLater();
  const bool was_running = running_;
  running_ = false;
  if (was_running) emit finished(true);
}

}  // namespace parlab::gui
