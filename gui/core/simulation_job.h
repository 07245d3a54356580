#pragma once
// Simulations off the UI thread: sim::simulate_plan for one or more worker counts of the
// current setup, run by QtConcurrent, each result delivered through a QFutureWatcher signal as
// it finishes. Cancel stops the simulation in flight (sim::SimOptions::cancel kills its child
// process within ~50 ms) and drops everything not yet delivered.
//
// Progress is within each simulation too: kPerPoint units per worker count, filled from
// sim::SimOptions::on_progress, so a single 4096-rank simulation moves its bar.
#include <QFutureWatcher>
#include <QObject>
#include <atomic>
#include <memory>
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
  static constexpr int kPerPoint = 1000;  // progress units per worker count
  explicit SimulationJob(QObject* parent = nullptr);
  ~SimulationJob() override;

  // Starts simulating `setup` at each of `workers` (abandoning a previous job). `timeline`
  // keeps every op (for the timeline view).
  void start(const LabSetup& setup, const std::vector<int>& workers, bool timeline, int steps = 2);
  void cancel();
  bool running() const { return running_; }
  // True while the newest job's worker thread has not returned, including a cancelled one
  // winding down (its simulation stops within ~50 ms of cancel()).
  bool worker_busy() const { return last_.isRunning(); }

 signals:
  void point_ready(const parlab::gui::SimPoint& point);
  // `done` of `total` progress units (kPerPoint per worker count), never decreasing within a job.
  void progress(int done, int total);
  void activity(const QString& what);  // the simulator's own line ("0.8 s simulated, ...")
  void finished(bool cancelled);

 private:
  QFutureWatcher<SimPoint>* watcher_ = nullptr;
  QFuture<SimPoint> last_;
  std::shared_ptr<std::atomic<bool>> cancel_flag_;  // read by the simulation in flight
  bool running_ = false;
  int total_ = 0;
};

}  // namespace parlab::gui
