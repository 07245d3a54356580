// The Progress view against the grader, and simulation progress and cancel from the lab's job.
//
// The Progress view's rows must be exactly what rubric::grade reports for the same DB (graded
// here independently), with evidence written by a real `parlab experiment run`; a Refresh picks
// up evidence written after the window opened. A simulation job must report progress within a
// simulation, never going back, and Cancel must stop a long simulation (not just drop it).
#include <QAbstractItemModelTester>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QProcess>
#include <QPushButton>
#include <QTableView>
#include <QTest>
#include <algorithm>

#include "db/results_store.h"
#include "gui/core/rubric_model.h"
#include "gui/core/simulation_job.h"
#include "gui/views/progress_view.h"
#include "gui/views/screenshot.h"
#include "gui_test_support.h"
#include "rubric/grade.h"

using namespace parlab;
using namespace parlab::gui;
using namespace parlab::gui::test;

class GuiProgressTest : public QObject {
  Q_OBJECT
 private slots:
  void progress_view_shows_the_graders_report() {
    const QString bin = qEnvironmentVariable("PARLAB_BIN");
    if (!QFileInfo(bin).isExecutable()) QSKIP("PARLAB_BIN is not set to the parlab binary");
    QTemporaryDir dir;
    LabOptions options;
    options.db = dir.filePath("lab.db");
    MainWindow window(options);
    RubricModel* model = window.rubric_model();
    QAbstractItemModelTester tester(model, QAbstractItemModelTester::FailureReportingMode::QtTest);
    ProgressView* view = window.progress_view();
    QVERIFY(wait_until([&] { return !view->job()->running(); }, 30000));
    // No database yet: the grader's own message, no rows.
    QCOMPARE(model->rowCount(), 0);
    QVERIFY2(view->status().contains("no such results database"), qPrintable(view->status()));

    // Evidence from a real worked example, written while the window is open.
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    env.insert("PARLAB_RESULTS", dir.filePath("results"));
    p.setProcessEnvironment(env);
    p.start(bin, {"experiment", "run", QString::fromStdString(source_path("experiments/seed_budget.toml")), "--db",
                  options.db});
    QVERIFY(p.waitForFinished(180000));
    QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());

    QPushButton* refresh = view->findChild<QPushButton*>();
    QVERIFY(refresh && refresh->text().contains("Refresh"));
    refresh->click();
    QVERIFY(wait_until([&] { return !view->job()->running(); }, 60000));

    auto store = db::ResultsStore::open(options.db.toStdString(), {.sweep_stale_runs = false});
    const rubric::Report expected = rubric::grade(store, rubric::default_rubric(), {});
    QVERIFY(!expected.criteria.empty());
    QCOMPARE(model->rowCount(), int(expected.criteria.size()));
    int with_evidence = 0;
    for (int r = 0; r < model->rowCount(); ++r) {
      const rubric::CriterionResult& c = expected.criteria[size_t(r)];
      QCOMPARE(model->data(model->index(r, RubricModel::kCriterion), Qt::UserRole).toString(),
               QString::fromStdString(c.id));
      QCOMPARE(model->data(model->index(r, RubricModel::kStatus)).toString(),
               QString::fromUtf8(rubric::to_string(c.status)));
      QCOMPARE(model->data(model->index(r, RubricModel::kPoints), Qt::UserRole).toDouble(), c.points);
      if (c.status == rubric::Status::kPassed || c.status == rubric::Status::kFailed) ++with_evidence;
      if (c.status != rubric::Status::kPassed && !c.fix.empty())
        QVERIFY(model->data(model->index(r, RubricModel::kFix)).toString().contains(QString::fromStdString(c.fix)));
    }
    QVERIFY2(with_evidence > 0, "the worked example should give at least one criterion evidence");
    // The totals are the grader's.
    QCOMPARE(model->report()->score, expected.score);
    QCOMPARE(model->report()->max_score, expected.max_score);
    QCOMPARE(model->report()->blocked_points, expected.blocked_points);
    QCOMPARE(model->report()->passed, expected.passed);
    QVERIFY2(view->score_text().contains(expected.passed ? "reached" : "not reached"), qPrintable(view->score_text()));
    QVERIFY2(view->score_text().contains("80%"), qPrintable(view->score_text()));
  }

  void cancel_stops_a_long_simulation_and_progress_only_grows() {
    SetupInputs in;
    in.model = "gpt-175b";
    in.cluster = "dgx-a100";
    in.workers = 4096;
    in.set("tp", "8");
    in.set("pp", "8");
    const SetupResult s = resolve_setup(in);
    QVERIFY2(s.setup, s.error ? s.error->message.c_str() : "");
    SimulationJob job;
    std::vector<int> values;
    int total = 0;
    connect(&job, &SimulationJob::progress, this, [&](int done, int t) {
      values.push_back(done);
      total = t;
    });
    bool cancelled = false;
    connect(&job, &SimulationJob::finished, this, [&](bool c) { cancelled = c; });
    // Two 4096-rank simulations of two steps each (about 25 s each on a 2-core box): if Cancel only
    // dropped the result, the worker would still be busy well past the bound below.
    job.start(*s.setup, {4096, 4096}, false, 2);
    QCOMPARE(total, 2 * SimulationJob::kPerPoint);
    // Progress from within the first simulation (its ops executed), before any point is done.
    QVERIFY(wait_until([&] { return !values.empty() && values.back() > 0; }, 120000));
    QVERIFY(job.running());
    QVERIFY2(values.back() < SimulationJob::kPerPoint, "the first simulation should still be running");
    QVERIFY(std::is_sorted(values.begin(), values.end()));
    QElapsedTimer t;
    t.start();
    job.cancel();
    QVERIFY(cancelled);
    QVERIFY(!job.running());
    QVERIFY(wait_until([&] { return !job.worker_busy(); }, 10000));
    QVERIFY2(t.elapsed() < 10000, "cancel should stop the simulation, not wait for it");
  }
};

QTEST_MAIN(GuiProgressTest)
#include "gui_progress_test.moc"
