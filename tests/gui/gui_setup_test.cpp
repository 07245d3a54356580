// Typing malformed values into every field of the lab gives an inline message under that
// field — the library's own one line, naming the field, the value and what is allowed — and
// no crash; the views keep the last valid setup.
#include <QTest>

#include "gui/core/memory_model.h"
#include "gui/views/predict_view.h"
#include "gui_test_support.h"

using namespace parlab;
using namespace parlab::gui;
using namespace parlab::gui::test;

namespace {
struct Case {
  std::string key;       // the field typed into
  QString text;          // what the learner types
  QStringList expected;  // the message must contain all of these
};
}  // namespace

class GuiSetupTest : public QObject {
  Q_OBJECT
 private slots:
  void malformed_values_give_an_inline_message() {
    const std::vector<Case> cases = {
        {"model", "no-such-model", {"--model", "no-such-model"}},
        {"params", "12abc", {"--params", "12abc"}},
        {"params", "-5", {"-5"}},
        {"cluster", "nowhere.toml", {"--cluster", "nowhere.toml"}},
        {"dp", "x", {"plan.dp", "x", "integer"}},
        {"dp", "3", {"plan.dp"}},
        {"tp", "-1", {"plan.tp", "-1"}},
        {"tp", "3", {"plan.tp", "divide"}},
        {"pp", "1.5", {"plan.pp", "1.5"}},
        {"pp", "99", {"plan.tp*pp", "99"}},
        {"zero", "7", {"plan.zero", "7", "0, 1, 2 or 3"}},
        {"mb", "0", {"plan.mb", "0"}},
        {"microbatches", "abc", {"plan.microbatches", "abc"}},
        {"gbs", "3", {"plan.gbs", "3", "multiple"}},
        {"gbs", "99999999999999999999999", {"plan.gbs"}},
        {"schedule", "zigzag", {"plan.schedule", "zigzag", "1f1b"}},
        {"v", "two", {"plan.v", "two"}},
        {"v", "2", {"plan.v"}},
        {"recompute", "sometimes", {"plan.recompute", "sometimes", "selective"}},
        {"sp", "maybe", {"plan.sp", "maybe", "on"}},
        {"sp", "on", {"plan.sp", "tp > 1"}},
        {"precision", "fp8", {"plan.precision", "fp8", "mixed"}},
        {"tp", "1,pp=2", {"plan.tp", "single value"}},
        {"dp", "∞", {"plan.dp"}},
    };
    Lab lab;
    for (const Case& c : cases) {
      lab.setup()->set_inputs(SetupInputs{});  // lab-mlp on cpu-local, 2 workers: valid
      QVERIFY(!lab.setup()->error());
      const int rows = lab.window->memory_model()->rowCount();
      type_into(lab.setup(), c.key, c.text);
      const QString where = QString::fromStdString(c.key) + " <- " + c.text;
      QVERIFY2(lab.setup()->error().has_value(), qPrintable(where));
      // The message sits under the field that was typed into.
      const QString msg = lab.setup()->message_for(c.key);
      QVERIFY2(!msg.isEmpty(), qPrintable(where + ": no message under the field; error was " +
                                          QString::fromStdString(lab.setup()->error()->message)));
      for (const QString& part : c.expected) QVERIFY2(msg.contains(part), qPrintable(where + ": " + msg));
      QCOMPARE(lab.window->memory_model()->rowCount(), rows);  // the last valid setup stays
    }
  }

  void workers_that_do_not_fill_nodes_are_named() {
    Lab lab;
    SetupInputs in;
    in.model = "gpt-22b";
    in.cluster = "dgx-a100";  // a node of 8: worlds beyond it are whole nodes
    in.workers = 16;
    lab.setup()->set_inputs(in);
    QVERIFY(!lab.setup()->error());
    set_workers(lab.setup(), 12);
    const QString msg = lab.setup()->message_for("workers");
    QVERIFY2(msg.contains("world = 12") && msg.contains("devices_per_node"), qPrintable(msg));
    // cpu-local is this host: no more workers than its file says (the spin box stops there).
    lab.setup()->set_inputs(SetupInputs{});
    set_workers(lab.setup(), 64);
    QCOMPARE(qobject_cast<QSpinBox*>(lab.setup()->field("workers"))->value(),
             strategy::load_cluster("cpu-local").devices());
    // The spin box only takes what it can hold: letters never reach the setup.
    type_into(lab.setup(), "workers", "abc");
    QVERIFY(qobject_cast<QSpinBox*>(lab.setup()->field("workers"))->value() >= 1);
  }

  void malformed_prediction_is_refused_inline() {
    Lab lab;
    PredictView* p = lab.window->predict_view();
    for (const QString& text : {QString("abc"), QString("-2"), QString("0"), QString(""), QString("1e999")}) {
      p->predicted_field()->setText(text);
      QVERIFY(!p->commit());
      QVERIFY2(p->message().contains("predicted speedup"), qPrintable(text + ": " + p->message()));
    }
    QVERIFY(!p->last_prediction().has_value());
  }
};

QTEST_MAIN(GuiSetupTest)
#include "gui_setup_test.moc"
