#include "gui/core/run_controller.h"

#include <signal.h>
#include <unistd.h>

#include <QJsonDocument>
#include <QRegularExpression>

namespace parlab::gui {

QStringList RunRequest::arguments() const {
  QStringList a = {"train",
                   "--nproc",
                   QString::number(nproc),
                   "--model",
                   model,
                   "--cluster",
                   cluster,
                   "--steps",
                   QString::number(steps),
                   "--seed",
                   QString::number(seed),
                   "--db",
                   db,
                   "--checkpoint-every",
                   QString::number(checkpoint_every),
                   "--max-restarts",
                   QString::number(max_restarts)};
  if (!run_dir.isEmpty()) a << "--run-dir" << run_dir << "--fresh";
  if (!plan.isEmpty()) a << "--plan" << plan;
  for (const QString& f : faults) a << "--fault" << f;
  if (!trace.isEmpty()) a << "--trace" << trace;
  if (timeout_seconds > 0) a << "--timeout" << QString::number(timeout_seconds);
  a << (json ? "--json" : "--progress-every-step");
  return a;
}

std::optional<double> parse_seconds(const QString& text) {
  static const QRegularExpression re(R"(^\s*([-+0-9.eE]+)\s*(s|ms|us)\s*$)");
  const auto m = re.match(text);
  if (!m.hasMatch()) return std::nullopt;
  bool ok = false;
  const double v = m.captured(1).toDouble(&ok);
  if (!ok) return std::nullopt;
  const QString unit = m.captured(2);
  return unit == "s" ? v : unit == "ms" ? v * 1e-3 : v * 1e-6;
}

RunController::RunController(QObject* parent) : QObject(parent) {
  // A group of its own, so Cancel can end the workers even if the supervisor cannot.
  process_.setChildProcessModifier([] { ::setpgid(0, 0); });
  connect(&process_, &QProcess::readyReadStandardOutput, this, &RunController::read_stdout);
  connect(&process_, &QProcess::readyReadStandardError, this, &RunController::read_stderr);
  connect(&process_, &QProcess::finished, this, &RunController::on_finished);
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e != QProcess::FailedToStart) return;
    outcome_ = {};
    outcome_.message = tr("could not start %1: %2").arg(request_.parlab, process_.errorString());
    emit finished(outcome_);
  });
  connect(&process_, &QProcess::started, this, [this] {
    group_ = process_.processId();
    emit started(group_);
  });
  kill_timer_.setSingleShot(true);
  connect(&kill_timer_, &QTimer::timeout, this, [this] {
    if (group_ > 0) ::kill(-pid_t(group_), SIGKILL);
  });
}

RunController::~RunController() {
  if (running()) {
    // The lab is closing: nothing may outlive it.
    if (group_ > 0) ::kill(-pid_t(group_), SIGKILL);
    process_.waitForFinished(2000);
  }
}

bool RunController::running() const { return process_.state() != QProcess::NotRunning; }
qint64 RunController::pid() const { return process_.processId(); }

void RunController::start(const RunRequest& request) {
  if (running()) return;
  request_ = request;
  outcome_ = {};
  out_buffer_.clear();
  err_buffer_.clear();
  json_text_.clear();
  process_.start(request.parlab, request.arguments());
}

void RunController::cancel() {
  if (!running()) return;
  outcome_.cancelled = true;
  process_.terminate();  // SIGTERM: the supervisor stops its workers and marks the run killed
  kill_timer_.start(grace_ms_);
}

void RunController::read_stdout() {
  out_buffer_ += process_.readAllStandardOutput();
  int nl;
  while ((nl = out_buffer_.indexOf('\n')) >= 0) {
    const QByteArray line = out_buffer_.left(nl);
    out_buffer_.remove(0, nl + 1);
    if (request_.json) json_text_ += line + '\n';
    handle_line(QString::fromUtf8(line));
  }
}

void RunController::read_stderr() {
  err_buffer_ += process_.readAllStandardError();
  int nl;
  while ((nl = err_buffer_.indexOf('\n')) >= 0) {
    const QString line = QString::fromUtf8(err_buffer_.left(nl));
    err_buffer_.remove(0, nl + 1);
    if (line.startsWith("parlab")) outcome_.message = line;
    emit output_line(line);
  }
}

void RunController::handle_line(const QString& line) {
  emit output_line(line);
  // launch::format_progress: "step 3/10  loss 1.2345  812.3 samples/s  158 ms/step  ETA 14 s"
  static const QRegularExpression step(R"(^step (\d+)/(\d+)\s+loss (\S+)\s+\S+ samples/s\s+(.+)/step)");
  static const QRegularExpression recorded(R"(^Recorded run (\d+) in )");
  static const QRegularExpression final_hash(R"(state hash ([0-9a-f]+))");
  if (const auto m = step.match(line); m.hasMatch()) {
    emit step_done(m.captured(1).toInt(), m.captured(2).toInt(), m.captured(3).toDouble(),
                   parse_seconds(m.captured(4)).value_or(0));
  } else if (const auto r = recorded.match(line); r.hasMatch()) {
    outcome_.run_id = r.captured(1).toLongLong();
  } else if (const auto h = final_hash.match(line); h.hasMatch() && line.startsWith("Final")) {
    outcome_.final_hash = h.captured(1);
  }
}

void RunController::on_finished(int code, QProcess::ExitStatus status) {
  kill_timer_.stop();
  read_stdout();
  if (!out_buffer_.isEmpty()) handle_line(QString::fromUtf8(out_buffer_));
  out_buffer_.clear();
  // The supervisor is gone; anything left in its group (a worker it could not stop) goes too.
  if (group_ > 0) ::kill(-pid_t(group_), SIGKILL);
  group_ = 0;
  outcome_.exit_code = status == QProcess::NormalExit ? code : -1;
  outcome_.ok = status == QProcess::NormalExit && code == 0 && !outcome_.cancelled;
  if (request_.json && !json_text_.isEmpty()) {
    const QJsonDocument doc = QJsonDocument::fromJson(json_text_);
    if (doc.isObject()) {
      outcome_.json = doc.object();
      outcome_.final_hash = outcome_.json.value("final_state_xxh3_64").toString();
    }
  }
  if (!outcome_.ok && outcome_.message.isEmpty())
    outcome_.message = outcome_.cancelled ? tr("cancelled") : tr("parlab train exited with status %1").arg(code);
  emit finished(outcome_);
}

}  // namespace parlab::gui
