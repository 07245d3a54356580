#pragma once
// Simulations off the UI thread: sim::simulate_plan for one or more worker counts of the
// current setup, run by QtConcurrent, each result delivered through a QFutureWatcher signal as
// it finishes. Cancel abandons what has not been delivered: the worker thread stops before the
// next worker count, and a simulation already in flight (a child process, sim/isolate.h) runs
// out in the background and its result is dropped.
//
// Progress is per worker count for now. When sim::SimOptions gets a progress callback, set it
// in run_points() (simulation_job.cpp) and forward it with promise.setProgressValue(): the
// watcher's progressValueChanged already drives the busy bar.
#include <QFutureWatcher>
#include <QObject>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"
#include "sim/result.h"

namespace parlab::gui {

struct SimPoint {
  int workers = 0;
  sim::SimResult result;
  std::string error;  // the simulator's message when it failed (result unset)
};

class SimulationJob : public QObject {
  Q_OBJECT
 public:
  explicit SimulationJob(QObject* parent = nullptr);
  ~SimulationJob() override;

  // Starts simulating `setup` at each of `workers` (abandoning a previous job). `timeline`
  // keeps every op (for the timeline view).
  void start(const LabSetup& setup, const std::vector<int>& workers, bool timeline, int steps = 2);
  void cancel();
  bool running() const { return running_; }

 signals:
  void point_ready(const parlab::gui::SimPoint& point);
  void progress(int done, int total);
  void finished(bool cancelled);

 private:
  QFutureWatcher<SimPoint>* watcher_ = nullptr;
  bool running_ = false;
  int total_ = 0;
};

}  // namespace parlab::gui
