#include "gui/core/speedup_decide.h"

#include <QDir>
#include <QFile>
#include <QRegularExpression>

#include "base/errors.h"
#include "gui/core/child_output.h"

namespace parlab::gui {

std::string decide_experiment_toml(const LabSetup& setup, int top, int steps) {
  if (!setup.model.has_layers())
    throw ConfigError("--model", setup.inputs.model_label(),
                      "a model with layers: a bare parameter count has no split to measure");
  // A model file the lab read relative to its own folder must still be found from the file's.
  const std::string model = setup.inputs.model_for_child(), cluster = setup.inputs.cluster_for_child();
  auto quoted = [](const std::string& s) {
    std::string out = "\"";
    for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  };
  return "name = \"lab_decide\"\n"
         "title = \"The planner's top candidates, measured (from the lab's Plan view)\"\n"
         "notice = \"The regret of the planner's first choice against the fastest measured candidate, and the rank "
         "correlation of predicted and measured step times.\"\n"
         "kind = \"decide\"\n\n[decide]\n"
         "model = " +
         quoted(model) + "\ncluster = " + quoted(cluster) + "\nworkers = " + std::to_string(setup.world()) +
         "\ngbs = " + std::to_string(setup.plan.global_batch) + "\ntop = " + std::to_string(top) +
         "\nsteps = " + std::to_string(steps) + "\n";
}

DecideJob::DecideJob(QObject* parent) : QObject(parent) {
  connect(&process_, &QProcess::readyReadStandardOutput, this, [this] { out_ += process_.readAllStandardOutput(); });
  connect(&process_, &QProcess::readyReadStandardError, this, [this] {
    err_ += process_.readAllStandardError();
    for (const QByteArray& line : take_lines(err_)) emit progress(QString::fromUtf8(line));
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      emit finished(false, tr("could not start %1: %2").arg(process_.program(), process_.errorString()), {});
  });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    const QString out = QString::fromUtf8(out_);
    // The batch summary's headline column is the last field of the experiment's row.
    QString headline;
    for (const QString& line : out.split('\n'))
      if (line.contains("lab_decide") && line.contains("decide"))
        headline = line.section(QRegularExpression("\\s{2,}"), -1).trimmed();
    const bool ok = status == QProcess::NormalExit && code == 0 && !headline.isEmpty();
    emit finished(ok, headline.isEmpty() ? tr("the experiment failed (exit %1)").arg(code) : headline, out);
  });
}

DecideJob::~DecideJob() {
  if (running()) {
    process_.kill();  // the lab is closing: nothing may outlive it
    process_.waitForFinished(2000);
  }
}

void DecideJob::start(const LabSetup& setup, const QString& parlab, const QString& db, const QString& runs_dir) {
  if (running()) return;
  QString file;
  try {
    QDir().mkpath(runs_dir);
    file = runs_dir + "/lab_decide.toml";
    QFile f(file);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate))
      throw ConfigError("runs dir", runs_dir.toStdString(), "a folder the lab can write");
    f.write(QByteArray::fromStdString(decide_experiment_toml(setup)));
  } catch (const std::exception& e) {
    emit finished(false, QString::fromUtf8(e.what()), {});
    return;
  }
  out_.clear();
  err_.clear();
  process_.start(parlab, {"experiment", "run", file, "--db", db});
}

void DecideJob::cancel() {
  if (running()) process_.terminate();
}

}  // namespace parlab::gui
