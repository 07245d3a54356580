// Real runs started from the lab: `parlab train` children on this machine recording into the
// lab's DB. A 1- and a 2-worker run of a tiny model end completed, and the 2-worker measured
// speedup (from the runs' recorded step times, read here from the DB) appears on the speedup
// chart. Cancel during a run ends every worker process and leaves the run marked killed with
// the steps it recorded.
#include <signal.h>
#include <unistd.h>

#include <QDir>
#include <QFileInfo>
#include <QProgressBar>
#include <QSpinBox>
#include <QTest>
#include <fstream>

#include "db/results_store.h"
#include "gui/core/lab_store.h"
#include "gui/core/live_steps_model.h"
#include "gui/core/speedup_model.h"
#include "gui/core/timeline_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"
#include "gui/views/fault_panel.h"
#include "gui/views/predict_view.h"
#include "gui/views/run_view.h"
#include "gui/views/screenshot.h"
#include "gui/views/speedup_view.h"
#include "gui_test_support.h"

using namespace parlab;
using namespace parlab::gui;
using namespace parlab::gui::test;

namespace {

const std::string kModel = source_path("tests/experiments/data/tiny-mlp.toml");

SetupInputs tiny(int workers) {
  SetupInputs in;
  in.model = kModel;
  in.cluster = "cpu-local";
  in.workers = workers;
  return in;
}

// Processes whose parent is `pid` (the supervisor's workers).
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  for (const QString& e : QDir("/proc").entryList(QDir::Dirs)) {
    bool ok = false;
    const pid_t p = pid_t(e.toInt(&ok));
    if (!ok) continue;
    std::ifstream stat("/proc/" + e.toStdString() + "/stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2 && ppid == pid) out.push_back(p);
  }
  return out;
}

// Gone, or a zombie nobody has reaped yet (it runs nothing).
bool ended(pid_t p) {
  std::ifstream stat("/proc/" + std::to_string(p) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.size() > close + 2 && line[close + 2] == 'Z';
}

bool run_to_end(Lab& lab) {
  RunView* rv = lab.window->run_view();
  bool done = false;
  RunOutcome out;
  auto c =
      QObject::connect(rv->controller(), &RunController::finished, [&](const RunOutcome& o) { done = true, out = o; });
  if (!rv->start_run()) return false;
  const bool ok = wait_until([&] { return done; }, 90000);
  QObject::disconnect(c);
  if (!ok || !out.ok) qWarning("run did not complete: %s", qPrintable(out.message));
  return ok && out.ok;
}

}  // namespace

class GuiRunTest : public QObject {
  Q_OBJECT
 private slots:
  void initTestCase() {
    // The runs start the real CLI; a build without cli/ has none to start.
    if (!QFileInfo(qEnvironmentVariable("PARLAB_BIN")).isExecutable())
      QSKIP("PARLAB_BIN is not set to the parlab binary");
  }

  void two_worker_run_completes_and_its_point_is_charted() {
    Lab lab;
    RunView* rv = lab.window->run_view();
    rv->steps_field()->setValue(6);
    std::map<int, db::RunId> runs;
    for (int w : {1, 2}) {
      lab.setup()->set_inputs(tiny(w));
      QVERIFY2(!lab.setup()->error(), lab.setup()->error() ? lab.setup()->error()->message.c_str() : "");
      QVERIFY2(run_to_end(lab), qPrintable(rv->status()));
      QCOMPARE(rv->progress()->value(), 6);        // the bar followed every step
      QCOMPARE(rv->steps_model()->rowCount(), 6);  // the live plot got every step
      // The run's measured trace is shown beside the simulated timeline: one process per rank.
      QCOMPARE(lab.window->measured_timeline()->ranks(), w);
      QVERIFY(lab.window->measured_timeline()->rowCount() >= 6 * w);
    }
    // The DB, read here: two completed measured runs, with their recorded step times.
    auto store = db::ResultsStore::open(lab.options.db.toStdString());
    std::map<int, double> step;
    std::map<int, double> gbs;
    for (const db::RunRecord& r : store.list_runs()) {
      QCOMPARE(r.status, db::RunStatus::kCompleted);
      QCOMPARE(r.kind, db::RunKind::kMeasured);
      step[r.world_size] = store.run_metrics(r.id).at("step_seconds");
      gbs[r.world_size] = r.plan.at("gbs").get<double>();
      QCOMPARE(int(store.step_timings(r.id).size()), 6 * r.world_size);
    }
    QCOMPARE(step.size(), size_t(2));
    const ChartSeries* measured = lab.window->speedup_view()->panel()->chart()->series("measured");
    QVERIFY(measured);
    bool found = false;
    for (const QPointF& p : measured->points)
      if (p.x() == 2) {
        found = true;
        QCOMPARE(p.y(), (gbs[2] / step[2]) / (gbs[1] / step[1]));
      }
    QVERIFY2(found, "no measured point at 2 workers on the speedup chart");
    // Each prediction's error against the measurement is in the table.
    const int row = lab.window->speedup_model()->row_of(2);
    const double analytic = lab.window->speedup_model()->value(row, SpeedupModel::kAnalyticStep).value();
    QCOMPARE(lab.window->speedup_model()->value(row, SpeedupModel::kAnalyticError).value(), analytic / step[2] - 1);
    // ... beside the measurement's spread, relative, as recorded with the run.
    double spread2 = -1;
    for (const db::RunRecord& r : store.list_runs())
      if (r.world_size == 2) spread2 = store.run_metrics(r.id).at("step_seconds_spread");
    QVERIFY(spread2 >= 0);
    QCOMPARE(lab.window->speedup_model()->value(row, SpeedupModel::kMeasuredSpread).value(), spread2 / step[2]);
  }

  void cancel_ends_the_workers_and_marks_the_run_killed() {
    Lab lab;
    RunView* rv = lab.window->run_view();
    lab.setup()->set_inputs(tiny(2));
    rv->steps_field()->setValue(200000);  // far longer than the test waits
    const auto request = rv->request();
    QVERIFY(request.has_value());
    bool done = false;
    RunOutcome out;
    QObject::connect(rv->controller(), &RunController::finished, [&](const RunOutcome& o) { done = true, out = o; });
    QVERIFY(rv->start_run());
    QVERIFY(wait_until([&] { return rv->steps_model()->rowCount() >= 3; }, 60000));
    const pid_t supervisor = pid_t(rv->controller()->pid());
    const std::vector<pid_t> workers = children_of(supervisor);
    QCOMPARE(int(workers.size()), 2);
    rv->cancel();
    QVERIFY(wait_until([&] { return done; }, 30000));
    QVERIFY(out.cancelled && !out.ok);
    QVERIFY(wait_until([&] { return std::all_of(workers.begin(), workers.end(), ended); }, 10000));
    QVERIFY(ended(supervisor));
    // The run row: killed, with the steps it recorded before the cancel.
    std::optional<db::RunRecord> run;
    for (const auto& r : db::ResultsStore::open(lab.options.db.toStdString()).list_runs()) run = r;
    QVERIFY(run.has_value());
    QCOMPARE(run->status, db::RunStatus::kKilled);
    // Marked by the supervisor's own orderly teardown, not left for the stale-run sweep.
    QVERIFY2(
        run->notes.find("interrupted") != std::string::npos && run->notes.find("stale-run sweep") == std::string::npos,
        run->notes.c_str());
    QVERIFY(!db::ResultsStore::open(lab.options.db.toStdString()).step_timings(run->id).empty());
    QVERIFY(rv->status().contains("killed"));
  }

  void prediction_revealed_by_real_runs_lands_in_the_db() {
    Lab lab;
    lab.setup()->set_inputs(tiny(2));
    PredictView* p = lab.window->predict_view();
    p->set_reveal_by(PredictView::kRealRuns);
    p->predicted_field()->setText("1.6");
    p->reason_field()->setText("two processes, two cores");
    QVERIFY2(p->commit(), qPrintable(p->message()));
    QVERIFY(wait_until([&] { return !p->busy(); }, 90000));
    auto store = db::ResultsStore::open(lab.options.db.toStdString());
    std::map<int, db::RunRecord> runs;
    for (const auto& r : store.list_runs()) runs[r.world_size] = r;
    QCOMPARE(runs.size(), size_t(2));
    auto speed = [&](int w) {
      return runs[w].plan.at("gbs").get<double>() / store.run_metrics(runs[w].id).at("step_seconds");
    };
    const auto all = store.list_predictions();
    QCOMPARE(all.size(), size_t(1));
    QCOMPARE(all.front().source, db::RunKind::kMeasured);
    QCOMPARE(all.front().predicted, 1.6);
    QVERIFY2(all.front().revealed.has_value(), qPrintable(p->result()));
    QCOMPARE(*all.front().revealed, speed(2) / speed(1));
    QCOMPARE(all.front().run.value_or(-1), runs[2].id);  // the run that revealed it
    QVERIFY(all.front().predicted_at <= *all.front().revealed_at);
  }

  void killed_rank_is_detected_and_resumes_to_the_same_state() {
    Lab lab;
    lab.setup()->set_inputs(tiny(2));
    FaultPanel* f = lab.window->run_view()->faults();
    bool done = false, identical = false;
    QObject::connect(f, &FaultPanel::done, [&](bool same) { done = true, identical = same; });
    QVERIFY(f->start(FaultPanel::kKill));
    QVERIFY(wait_until([&] { return done; }, 90000));
    QVERIFY2(identical, qPrintable(f->result()));
    QVERIFY2(
        f->result().contains("killed") && f->result().contains("rank 1") && f->result().contains("resumed at step"),
        qPrintable(f->result()));
    // Both runs are in the DB: the faulted one completed after its restart, with the incident.
    auto store = db::ResultsStore::open(lab.options.db.toStdString());
    const auto runs = store.list_runs();
    QCOMPARE(runs.size(), size_t(2));
    for (const auto& r : runs) QCOMPARE(r.status, db::RunStatus::kCompleted);
    const auto incidents = store.incidents(runs.back().id);
    QCOMPARE(incidents.size(), size_t(1));
    QCOMPARE(incidents.front().kind, db::IncidentKind::kKilled);
    QCOMPARE(incidents.front().rank.value_or(-1), 1);
    // The hashes the panel compared are the ones the runs recorded.
    auto hash = [&](db::RunId id) {
      for (const auto& [k, v] : store.run_params(id))
        if (k == "final_state_xxh3_64") return v;
      return std::string();
    };
    QVERIFY(!hash(runs.front().id).empty());
    QCOMPARE(hash(runs.front().id), hash(runs.back().id));
  }
};

QTEST_MAIN(GuiRunTest)
#include "gui_run_test.moc"
