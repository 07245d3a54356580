// A prediction entered before the reveal lands in the results DB, then the revealed value
// (the simulator's speedup, computed here independently with sim::simulate_plan) is written
// beside it, later than the prediction.
#include <QPushButton>
#include <QTest>

#include "db/results_store.h"
#include "gui/core/simulation_job.h"
#include "gui/views/predict_view.h"
#include "gui/views/screenshot.h"
#include "gui_test_support.h"
#include "sim/simulate.h"

using namespace parlab;
using namespace parlab::gui;
using namespace parlab::gui::test;

class GuiPredictTest : public QObject {
  Q_OBJECT
 private slots:
  void prediction_and_reveal_land_in_the_db() {
    Lab lab;
    set_workers(lab.setup(), 2);
    PredictView* p = lab.window->predict_view();
    p->predicted_field()->setText("1.5");
    p->reason_field()->setText("the gradient all-reduce is not free");
    p->commit_button()->click();  // synchronous: the reveal needs the event loop, which has not run yet
    QVERIFY2(p->last_prediction().has_value(), qPrintable(p->message()));
    {
      // Committed before the reveal: the row exists with no revealed value yet.
      auto store = db::ResultsStore::open(lab.options.db.toStdString());
      const auto before = store.get_prediction(*p->last_prediction());
      QVERIFY(before.has_value());
      QVERIFY(!before->revealed.has_value());
      QCOMPARE(before->predicted, 1.5);
    }
    QVERIFY(wait_until([&] { return !p->job()->running(); }, 60000));

    // The simulator's answer, from the library directly.
    std::vector<double> t, gbs;
    for (int w : {1, 2}) {
      const Expected e = expected_scaled("lab-mlp", "cpu-local", w, "");
      sim::SimOptions o;
      o.steps = 2;
      t.push_back(sim::simulate_plan(e.model, e.plan, e.cluster, o).step_seconds);
      gbs.push_back(double(e.plan.global_batch));
    }
    const double want = (gbs[1] / t[1]) / (gbs[0] / t[0]);

    auto store = db::ResultsStore::open(lab.options.db.toStdString());
    const auto all = store.list_predictions();
    QCOMPARE(all.size(), size_t(1));
    const db::PredictionRecord& r = all.front();
    QCOMPARE(r.predicted, 1.5);
    QVERIFY(r.revealed.has_value());
    QCOMPARE(*r.revealed, want);
    QCOMPARE(r.world_size, 2);
    QCOMPARE(r.quantity, std::string("speedup"));
    QCOMPARE(r.reason, std::string("the gradient all-reduce is not free"));
    QVERIFY(r.revealed_at.has_value() && r.predicted_at <= *r.revealed_at);
    // The error is shown: predicted / revealed - 1.
    QVERIFY2(p->result().contains(QString::number(100 * (1.5 / want - 1), 'f', 1)), qPrintable(p->result()));
    // A reveal is written once.
    QVERIFY_THROWS_EXCEPTION(db::DbError, store.reveal_prediction(r.id, 2.0));
  }
};

QTEST_MAIN(GuiPredictTest)
#include "gui_predict_test.moc"
