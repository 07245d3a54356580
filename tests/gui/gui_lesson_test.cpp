// The Lesson view driven as a learner drives it, against a tiny model (real runs of a few
// steps): each step's answer is a predictions row before its reveal, each revealed value is the
// engine's own (strategy::apply_rule, the planner, the scaling lab, the speedup model's measured
// point, the fault drills' incidents and hashes), no error is shown, the lesson resumes at the
// first incomplete step, and `parlab grade`'s lesson criterion passes at the end.
#include <QCheckBox>
#include <QComboBox>
#include <QLineEdit>
#include <QListView>
#include <QPushButton>
#include <QRadioButton>
#include <QTabWidget>

#include "db/results_store.h"
#include "gui/core/lesson_model.h"
#include "gui/core/speedup_model.h"
#include "gui/views/lesson_question.h"
#include "gui/views/lesson_view.h"
#include "gui/views/screenshot.h"
#include "rubric/grade.h"
#include "strategy/ledger.h"
#include "strategy/planner.h"
#include "strategy/scaling_lab.h"
#include "base/units.h"
#include "tests/gui/gui_test_support.h"

using namespace parlab;
using namespace parlab::gui;

namespace {

const std::string kModel = test::source_path("tests/experiments/data/tiny-mlp.toml");

// The prediction row of a quantity (the latest), read from the DB the lab writes.
std::optional<db::PredictionRecord> row_of(const QString& db, const std::string& quantity) {
  std::optional<db::PredictionRecord> found;
  for (const auto& p : db::ResultsStore::open(db.toStdString()).list_predictions())
    if (p.quantity == quantity) found = p;
  return found;
}

// Commit by clicking, then wait for the reveal (the engine runs off the UI thread or in child
// processes); fails with the question's error text if it never comes.
void commit_and_wait(LessonQuestion* q, const QString& reason, int timeout_ms) {
  QTest::mouseClick(q->reason_field(), Qt::LeftButton);
  QTest::keyClicks(q->reason_field(), reason);
  QTest::mouseClick(q->commit_button(), Qt::LeftButton);
  QVERIFY2(q->prediction().has_value(), qPrintable(q->error_text()));
  QVERIFY2(wait_until([q] { return q->answered() || !q->error_text().isEmpty(); }, timeout_ms), "no reveal in time");
  QVERIFY2(q->error_text().isEmpty(), qPrintable(q->error_text()));
  QVERIFY(q->answered());
}

// The row holds the answer the learner gave before the reveal, and the value shown.
void check_row(const QString& db, LessonQuestion* q, double predicted) {
  const auto row = row_of(db, q->quantity());
  QVERIFY2(row.has_value(), q->quantity().c_str());
  QCOMPARE(row->id, *q->prediction());
  QCOMPARE(row->predicted, predicted);
  QVERIFY(row->revealed.has_value() && row->revealed_at.has_value());
  QCOMPARE(*row->revealed, *q->revealed());
  QVERIFY2(row->predicted_at < *row->revealed_at, (row->predicted_at + " vs " + *row->revealed_at).c_str());
}

// The rule's four verdicts as the lesson's question numbers them (bit i: verdict i holds).
int mask_of(const strategy::RuleVerdict& v) {
  return (v.ddp_fits ? 1 : 0) | (v.shard_model_state ? 2 : 0) | (v.tensor_split_needed ? 4 : 0) |
         (v.pipeline_candidate ? 8 : 0);
}

}  // namespace

class GuiLessonTest : public QObject {
  Q_OBJECT
 private slots:
  void a_learner_completes_the_lesson_and_it_resumes_where_they_left_it() {
    QTemporaryDir dir;
    LabOptions o;
    o.db = dir.filePath("lab.db");
    o.lesson_model = QString::fromStdString(kModel);
    o.lesson_steps = 4;
    MainWindow w(o);
    w.resize(1400, 900);
    w.show();
    QVERIFY(w.lesson_pending());  // a fresh DB: the lab opens on the lesson
    w.show_view("lesson");
    LessonView* lesson = w.lesson_view();
    QCOMPARE(lesson->current_step(), 1);

    // 1. Find what cannot fit: tick "shard model state" only.
    FitPage* fit = lesson->fit_page();
    QTest::mouseClick(fit->verdict_box(1), Qt::LeftButton, {}, QPoint(6, fit->verdict_box(1)->height() / 2));
    QVERIFY(fit->verdict_box(1)->isChecked());
    LessonQuestion* q1 = fit->questions().front();
    commit_and_wait(q1, "130 GB against 80", 5000);
    strategy::RuleInputs in{28e9, 28e9, 56e9, 18e9, 6e9, 80e9};
    const strategy::RuleVerdict v = strategy::apply_rule(in);
    const int want = mask_of(v);
    QCOMPARE(*q1->revealed(), double(want));
    QCOMPARE(want, 2);  // the chapter: only "shard model state" holds
    QVERIFY(q1->result_text().contains(QString::fromStdString(units::format_bytes(v.replica_bytes))));
    check_row(o.db, q1, 2);
    // Changing an assumption asks again.
    fit->device_field()->setValue(160);
    QVERIFY(!q1->answered() && !q1->prediction());

    // 2. Choose the smallest split: the planner answers both questions.
    QTest::mouseClick(lesson->next_button(), Qt::LeftButton);
    QCOMPARE(lesson->current_step(), 2);
    SplitPage* split = lesson->split_page();
    split->large_model_field()->setCurrentText("gpt-22b");
    split->axis_box(0, 0)->setChecked(true);  // "ZeRO"
    commit_and_wait(split->questions()[0], "state, not layers", 120000);
    commit_and_wait(split->questions()[1], "a replica fits", 60000);
    {
      SetupInputs big;
      big.model = "gpt-22b";
      big.cluster = "dgx-a100";
      big.workers = 1024;
      const auto s = resolve_setup(big).setup;
      QVERIFY(s.has_value());
      strategy::PlannerOptions po;
      po.global_batch = s->plan.global_batch;
      const auto report = strategy::search_plans(s->model, s->cluster, po);
      QVERIFY(report.smallest_split.has_value());
      QCOMPARE(*split->questions()[0]->revealed(), double(strategy::split_axes(report.smallest_split->plan)));
      QVERIFY(split->questions()[0]->result_text().contains(
          QString::fromStdString(report.smallest_split->plan.short_name())));
    }
    QCOMPARE(*split->questions()[1]->revealed(), 0.0);  // the tiny model fits: DDP
    check_row(o.db, split->questions()[0], double(strategy::kSplitZero));
    check_row(o.db, split->questions()[1], 0);

    // Resume: a lab opened now starts at step 3, with steps 1 and 2 complete.
    {
      LessonOptions lo;
      lo.lab = o;
      lo.here_model = kModel;
      LessonView again(lo);
      QCOMPARE(again.current_step(), 3);
      QCOMPARE(again.model()->progress().completed, 2);
      QVERIFY(again.model()->data(again.model()->index(1), LessonModel::kCompleteRole).toBool());
      QVERIFY(!again.model()->data(again.model()->index(2), LessonModel::kCompleteRole).toBool());
    }

    // Step 1 again with the changed device: a second row, revealed by the rule at 160 GB.
    lesson->go_to(1);
    commit_and_wait(q1, "160 GB now", 5000);
    in.device_bytes = 160e9;
    QCOMPARE(*q1->revealed(), double(mask_of(strategy::apply_rule(in))));
    QCOMPARE(*q1->revealed(), 1.0);  // 130 GB fits in 160: DDP fits, nothing else holds

    // 3. The scaling lab, then analytic, simulated and measured speedup here.
    lesson->go_to(3);
    CommPage* comm = lesson->comm_page();
    QTest::keyClicks(comm->efficiency_field(), "0.9");
    commit_and_wait(comm->questions()[0], "stragglers", 5000);
    const auto rows = strategy::scaling_lab(strategy::ScalingLabInputs{});
    QCOMPARE(*comm->questions()[0]->revealed(), rows[3].efficiency);
    QCOMPARE(rows[3].workers, 8);
    QTest::keyClicks(comm->speedup_field(), "1.5");
    commit_and_wait(comm->questions()[1], "shared cores", 180000);
    SpeedupModel* three = comm->three_numbers();
    const int r2 = three->row_of(2);
    QVERIFY(r2 >= 0);
    QVERIFY(three->value(r2, SpeedupModel::kAnalyticSpeedup).has_value());
    QVERIFY(three->value(r2, SpeedupModel::kSimulatedSpeedup).has_value());
    QCOMPARE(*comm->questions()[1]->revealed(), *three->value(r2, SpeedupModel::kMeasuredSpeedup));
    check_row(o.db, comm->questions()[1], 1.5);
    QVERIFY(row_of(o.db, rubric::lesson::kSpeedup)->run.has_value());

    // 4. The hang drill: rank 1 skips an all-reduce; the others wait until the watchdog.
    lesson->go_to(4);
    FaultPage* hang = lesson->fault_page(4);
    QTest::mouseClick(hang->choice(1), Qt::LeftButton, {}, QPoint(6, hang->choice(1)->height() / 2));
    commit_and_wait(hang->questions().front(), "they block in the collective", 240000);
    QCOMPARE(*hang->questions().front()->revealed(), 1.0);
    QVERIFY(hang->questions().front()->result_text().contains("hang"));

    // 5. Kill and resume: bit-identical.
    lesson->go_to(5);
    FaultPage* resume = lesson->fault_page(5);
    QTest::mouseClick(resume->choice(1), Qt::LeftButton, {}, QPoint(6, resume->choice(1)->height() / 2));
    commit_and_wait(resume->questions().front(), "complete state", 240000);
    QCOMPARE(*resume->questions().front()->revealed(), 1.0);
    QVERIFY(resume->questions().front()->result_text().contains("bit-identical"));

    // Done: progress in the DB, and the grader credits the lesson.
    QCOMPARE(lesson->model()->progress().completed, 5);
    QCOMPARE(lesson->model()->progress().next_step, 0);
    QVERIFY(!w.lesson_pending());
    auto store = db::ResultsStore::open(o.db.toStdString(), {.sweep_stale_runs = false});
    rubric::GradeOptions go;
    go.hardware = "cpu";
    const rubric::Report report = rubric::grade(store, rubric::default_rubric(), go);
    const rubric::CriterionResult* c = report.find("lesson");
    QVERIFY(c);
    QVERIFY2(c->status == rubric::Status::kPassed, c->detail.c_str());
  }
};

QTEST_MAIN(GuiLessonTest)
#include "gui_lesson_test.moc"
