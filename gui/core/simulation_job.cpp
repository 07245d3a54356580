#include "gui/core/simulation_job.h"

#include <QPromise>
#include <QtConcurrent/QtConcurrent>
#include <algorithm>

#include "sim/simulate.h"

namespace parlab::gui {

namespace {

void run_points(QPromise<SimPoint>& promise, LabSetup setup, std::vector<int> workers, bool timeline, int steps,
                std::shared_ptr<std::atomic<bool>> cancel) {
  constexpr int kPer = SimulationJob::kPerPoint;
  promise.setProgressRange(0, int(workers.size()) * kPer);
  for (size_t i = 0; i < workers.size(); ++i) {
    if (promise.isCanceled() || cancel->load()) return;
    const int base = int(i) * kPer;
    SimPoint p;
    p.workers = workers[i];
    try {
      strategy::ClusterSpec cluster;
      const strategy::Plan plan = plan_at_workers(setup, p.workers, &cluster);
      sim::SimOptions o;
      o.steps = steps;
      o.timeline = timeline;
      o.cancel = cancel.get();
      o.on_progress = [&](double fraction, std::string_view what) {
        // QFutureInterface ignores values below the current one, so the bar never goes back.
        const int within = std::clamp(int(fraction * kPer), 0, kPer - 1);
        promise.setProgressValueAndText(base + within, QString::fromUtf8(what.data(), qsizetype(what.size())));
      };
      p.result = sim::simulate_plan(setup.model, plan, cluster, o);
    } catch (const sim::SimulationCancelled&) {
      return;  // asked for: nothing to deliver, nothing to clean up (the child is gone)
    } catch (const std::exception& e) {
      p.error = e.what();
    }
    promise.addResult(std::move(p));
    promise.setProgressValue(base + kPer);
  }
}

}  // namespace

SimulationJob::SimulationJob(QObject* parent) : QObject(parent) {}

SimulationJob::~SimulationJob() {
  // The simulation in flight stops; nothing it delivers reaches us.
  if (cancel_flag_) cancel_flag_->store(true);
  if (watcher_) watcher_->future().cancel();
}

void SimulationJob::start(const LabSetup& setup, const std::vector<int>& workers, bool timeline, int steps) {
  cancel();
  running_ = true;
  total_ = int(workers.size()) * kPerPoint;
  cancel_flag_ = std::make_shared<std::atomic<bool>>(false);
  watcher_ = new QFutureWatcher<SimPoint>(this);
  QFutureWatcher<SimPoint>* w = watcher_;
  connect(w, &QFutureWatcher<SimPoint>::resultReadyAt, this, [this, w](int i) {
    if (w != watcher_) return;  // an abandoned job
    emit point_ready(w->resultAt(i));
  });
  connect(w, &QFutureWatcher<SimPoint>::progressValueChanged, this, [this, w](int v) {
    if (w == watcher_) emit progress(v, total_);
  });
  connect(w, &QFutureWatcher<SimPoint>::progressTextChanged, this, [this, w](const QString& what) {
    if (w == watcher_) emit activity(what);
  });
  connect(w, &QFutureWatcher<SimPoint>::finished, this, [this, w] {
    if (w != watcher_) return;
    running_ = false;
    watcher_ = nullptr;
    w->deleteLater();
    emit finished(false);
  });
  last_ = QtConcurrent::run(run_points, setup, workers, timeline, steps, cancel_flag_);
  w->setFuture(last_);
  emit progress(0, total_);
}

void SimulationJob::cancel() {
  if (!watcher_) return;
  QFutureWatcher<SimPoint>* w = watcher_;
  watcher_ = nullptr;
  cancel_flag_->store(true);  // the simulation in flight stops (its child process is killed)
  w->future().cancel();
  // Deleted once its thread is done with the future; its signals are ignored from now on.
  connect(w, &QFutureWatcher<SimPoint>::finished, w, &QObject::deleteLater);
  if (w->isFinished()) w->deleteLater();
  const bool was_running = running_;
  running_ = false;
  if (was_running) emit finished(true);
}

}  // namespace parlab::gui
