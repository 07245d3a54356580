#pragma once
// "Measure the top candidates": the decide experiment (experiments/lib/kind_decide.cpp) for the
// setup's model on its world, run by `parlab experiment run` as a child process (the batch
// runner records the candidates' runs and the decision_utility proof in the lab's database).
// The planner's first choice, measured against its top candidates and the best plan of each
// other family: the regret and rank correlation come back as the experiment's headline.
#include <QObject>
#include <QProcess>
#include <QString>
#include <string>

#include "gui/core/lab_setup.h"

namespace parlab::gui {

// The experiment file for the setup: name "lab_decide", the setup's model (a file as an absolute
// path), cluster, world and global batch, the planner's top `top`. Throws ConfigError when the
// setup has no layers to split.
std::string decide_experiment_toml(const LabSetup& setup, int top = 3, int steps = 5);

class DecideJob : public QObject {
  Q_OBJECT
 public:
  explicit DecideJob(QObject* parent = nullptr);
  ~DecideJob() override;
  // Writes <runs_dir>/lab_decide.toml and runs it into `db`; a second start while running is ignored.
  void start(const LabSetup& setup, const QString& parlab, const QString& db, const QString& runs_dir);
  void cancel();
  bool running() const { return process_.state() != QProcess::NotRunning; }

 signals:
  void progress(const QString& line);
  // ok: the experiment ran and its first choice was measured; headline: its summary line (or
  // why it failed); report: its table.
  void finished(bool ok, const QString& headline, const QString& report);

 private:
  QProcess process_;
  QByteArray out_, err_;
};

}  // namespace parlab::gui
