#pragma once
// One real training job on this machine: `parlab train --nproc N ... --db DB` as a child
// process (the supervisor, which starts the worker processes and records the run), read
// line by line through QProcess signals — the UI thread never waits on it.
//
// Cancel sends SIGTERM: the supervisor tears its workers down in order and marks the run
// killed, keeping what was recorded. The supervisor runs in a process group of its own, so if
// it has not exited within the grace period the whole group (workers included) gets SIGKILL;
// the results DB's stale-run sweep then marks the run killed on the next open.
#include <QJsonObject>
#include <QObject>
#include <QProcess>
#include <QStringList>
#include <QTimer>
#include <optional>

namespace parlab::gui {

struct RunRequest {
  QString parlab;  // the parlab binary
  QString db;      // results database the run is recorded in
  QString model, cluster, plan;
  int nproc = 2;
  int steps = 10;
  int seed = 1;
  QString run_dir;
  int checkpoint_every = 0;
  int max_restarts = 0;
  QStringList faults;          // --fault values
  QString trace;               // --trace file (measured timeline), empty: none
  bool json = false;           // --json: the summary as JSON at the end (no progress lines)
  double timeout_seconds = 0;  // --timeout (0: the CLI's default)

  QStringList arguments() const;
};

struct RunOutcome {
  bool ok = false;
  bool cancelled = false;
  int exit_code = -1;
  std::optional<long long> run_id;  // "Recorded run N", or the newest run of the DB in json mode
  QString message;                  // the CLI's own last error line
  QJsonObject json;                 // json mode: the summary
  QString final_hash;               // "Final ... state hash X" or json final_state_xxh3_64
};

class RunController : public QObject {
  Q_OBJECT
 public:
  explicit RunController(QObject* parent = nullptr);
  ~RunController() override;

  void start(const RunRequest& request);
  void cancel();
  bool running() const;
  qint64 pid() const;
  // Seconds between SIGTERM and SIGKILL of the process group.
  void set_grace_ms(int ms) { grace_ms_ = ms; }

 signals:
  void started(qint64 pid);
  void step_done(int step, int steps, double loss, double step_seconds);
  void output_line(const QString& line);
  void finished(const parlab::gui::RunOutcome& outcome);

 private:
  void read_stdout();
  void read_stderr();
  void handle_line(const QString& line);
  void on_finished(int code, QProcess::ExitStatus status);

  QProcess process_;
  QTimer kill_timer_;
  RunRequest request_;
  RunOutcome outcome_;
  QByteArray out_buffer_, err_buffer_, json_text_;
  int grace_ms_ = 8000;
  qint64 group_ = 0;
};

// "158 ms" / "1.20 s" / "12.3 us" (units::format_seconds) back to seconds; nullopt if not one.
std::optional<double> parse_seconds(const QString& text);

}  // namespace parlab::gui
