#include "gui/core/machine_pricing.h"

#include <algorithm>

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>

#include "base/errors.h"
#include "gui/core/child_output.h"

namespace parlab::gui {

QStringList machine_pricing_args(const LabSetup& setup) {
  return {"plan",
          "--model",
          QString::fromStdString(setup.inputs.model_for_child()),
          "--cluster",
          QString::fromStdString(setup.inputs.cluster_for_child()),
          "--world",
          QString::number(setup.world()),
          "--gbs",
          QString::number(setup.plan.global_batch),
          "--profile",
          "--json"};
}

MachinePricing parse_machine_pricing(const QByteArray& json) {
  QJsonParseError error{};
  const QJsonDocument doc = QJsonDocument::fromJson(json, &error);
  if (doc.isNull()) throw RuntimeError("parlab plan --json: not JSON (" + error.errorString().toStdString() + ")");
  const QJsonObject on = doc.object().value("on_this_machine").toObject();
  const QJsonArray rows = on.value("candidates").toArray();
  if (rows.isEmpty()) throw RuntimeError("parlab plan --json: no candidates priced on this machine (on_this_machine)");
  MachinePricing p;
  for (const QJsonValue& v : rows) {
    const QJsonObject o = v.toObject();
    p.candidates.push_back({o.value("name").toString().toStdString(), o.value("plan").toString().toStdString(),
                            o.value("family").toString().toStdString(), o.value("origin").toString().toStdString(),
                            o.value("planner_step_seconds").toDouble(), o.value("predicted_step_seconds").toDouble()});
    if (p.candidates.back().plan.empty() || !(p.candidates.back().profile_seconds > 0))
      throw RuntimeError("parlab plan --json: a candidate without its plan or its price on this machine");
  }
  p.choice = on.value("choice").toString().toStdString();
  for (const QJsonValue& v : on.value("notes").toArray()) p.notes.push_back(v.toString().toStdString());
  return p;
}

QString describe_machine_pricing(const MachinePricing& p, int world) {
  auto ms = [](double s) { return QString::number(s * 1e3, 'f', 1) + " ms"; };
  const MachineCandidate& first = p.candidates.front();
  QString html =
      QObject::tr("<b>On this machine</b> (each candidate profiled by %1 processes in lockstep): ").arg(world);
  QStringList rows;
  for (const MachineCandidate& c : p.candidates)
    rows << QObject::tr("%1 %2 (grid %3)")
                .arg(QString::fromStdString(c.name).toHtmlEscaped(), ms(c.profile_seconds), ms(c.grid_seconds));
  html += rows.join(", ") + ". ";
  html +=
      QObject::tr("<b>Choice on this machine: %1</b> (<code>%2</code>).")
          .arg(QString::fromStdString(first.name).toHtmlEscaped(), QString::fromStdString(first.plan).toHtmlEscaped());
  // The grid's favourite among them, where the profiles put another first.
  const auto grid_first = std::min_element(p.candidates.begin(), p.candidates.end(), [](const auto& a, const auto& b) {
    return a.grid_seconds < b.grid_seconds;
  });
  if (grid_first->plan != first.plan)
    html += QObject::tr(" The grid put %1 first; the table above still ranks on the grid.")
                .arg(QString::fromStdString(grid_first->name).toHtmlEscaped());
  return html;
}

MachinePricingJob::MachinePricingJob(QObject* parent) : QObject(parent) {
  connect(&process_, &QProcess::readyReadStandardOutput, this, [this] { out_ += process_.readAllStandardOutput(); });
  connect(&process_, &QProcess::readyReadStandardError, this, [this] {
    err_ += process_.readAllStandardError();
    for (const QByteArray& line : take_lines(err_)) {
      last_err_line_ = line.trimmed();
      if (!last_err_line_.isEmpty()) emit progress(QString::fromUtf8(last_err_line_));
    }
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart)
      emit finished(false, tr("could not start %1: %2").arg(process_.program(), process_.errorString()), {});
  });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    if (status != QProcess::NormalExit || code != 0) {
      const QByteArray why = !err_.trimmed().isEmpty() ? err_.trimmed() : last_err_line_;
      emit finished(false, why.isEmpty() ? tr("parlab plan failed (exit %1)").arg(code) : QString::fromUtf8(why), {});
      return;
    }
    try {
      emit finished(true, {}, parse_machine_pricing(out_));
    } catch (const std::exception& e) {
      emit finished(false, QString::fromUtf8(e.what()), {});
    }
  });
}

MachinePricingJob::~MachinePricingJob() {
  if (running()) {
    process_.kill();  // the lab is closing: nothing may outlive it
    process_.waitForFinished(2000);
  }
}

void MachinePricingJob::start(const LabSetup& setup, const QString& parlab) {
  if (running()) return;
  out_.clear(), err_.clear(), last_err_line_.clear();
  process_.start(parlab, machine_pricing_args(setup));
}

void MachinePricingJob::cancel() {
  if (running()) process_.terminate();
}

}  // namespace parlab::gui
