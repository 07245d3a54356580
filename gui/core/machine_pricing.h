#pragma once
// "Price on this machine": the planner's candidates priced again on profiles of their own rank
// shapes run here (`parlab plan --profile --json`, a child process: the profiles fork worker
// processes, which a process with Qt's threads must not do), as `parlab plan` and the decide
// experiment choose on a calibrated cpu-local (experiments/lib/decide.h). The grid the Plan
// view's table ranks on leaves out what ranks sharing the cores cost each other; this is the
// price that does not.
#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"

namespace parlab::gui {

struct MachineCandidate {
  std::string name;            // "ZeRO-1 x4"
  std::string plan;            // the plan's key=value text, as `parlab plan --plan` takes it
  std::string family;          // DDP, ZeRO, tensor, pipeline
  std::string origin;          // why it is a candidate: the planner's top K, or its family's best
  double grid_seconds = 0;     // the planner's price (the calibration's GEMM grid)
  double profile_seconds = 0;  // the price on its own profile
};

struct MachinePricing {
  std::vector<MachineCandidate> candidates;  // cheapest on its profile first
  std::string choice;                        // the first one's plan
  std::vector<std::string> notes;            // the compute models used
};

// The arguments of `parlab plan` for the setup: its model and cluster (files as absolute paths),
// world and global batch, --profile --json.
QStringList machine_pricing_args(const LabSetup& setup);

// The `on_this_machine` object of `parlab plan --json`'s output. Throws RuntimeError naming what
// is missing when the output has none (or is not JSON).
MachinePricing parse_machine_pricing(const QByteArray& json);

// The result as a few lines of rich text for the Plan view.
QString describe_machine_pricing(const MachinePricing& p, int world);

class MachinePricingJob : public QObject {
  Q_OBJECT
 public:
  explicit MachinePricingJob(QObject* parent = nullptr);
  ~MachinePricingJob() override;
  // A second start while running is ignored.
  void start(const LabSetup& setup, const QString& parlab);
  void cancel();
  bool running() const { return process_.state() != QProcess::NotRunning; }

 signals:
  void progress(const QString& line);
  // ok: priced; error: why not (the command's own message where it gave one).
  void finished(bool ok, const QString& error, const parlab::gui::MachinePricing& pricing);

 private:
  QProcess process_;
  QByteArray out_, err_, last_err_line_;
};

}  // namespace parlab::gui
