#pragma once
// Shared by the desktop lab's tests: a lab window on a scratch results DB, typing into the
// setup panel's fields as a user would, and the strategy library's own answer for the same
// inputs (the independent computation the views are checked against).
#include <QApplication>
#include <QComboBox>
#include <QKeyEvent>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <memory>

#include "gui/views/lab_options.h"
#include "gui/views/main_window.h"
#include "gui/views/setup_panel.h"
#include "parlab/source_dir.h"
#include "strategy/cluster_spec.h"
#include "strategy/io.h"
#include "strategy/plan.h"

namespace parlab::gui::test {

inline std::string source_path(const std::string& rel) { return std::string(PARLAB_SOURCE_DIR) + "/" + rel; }

struct Lab {
  QTemporaryDir dir;
  LabOptions options;
  std::unique_ptr<MainWindow> window;

  Lab() {
    options.db = dir.filePath("lab.db");
    window = std::make_unique<MainWindow>(options);
    window->resize(1400, 900);
  }
  SetupPanel* setup() const { return window->setup_panel(); }
};

// Replaces a field's text by typing it (key clicks), the way a learner edits it.
// QTest::keyClicks knows ASCII only; anything else arrives as a key event carrying its text,
// as an input method delivers it.
inline void type_text(QWidget* w, const QString& text) {
  for (const QChar c : text) {
    if (c.unicode() < 128) {
      QTest::keyClick(w, c.toLatin1());
    } else {
      QKeyEvent press(QEvent::KeyPress, Qt::Key_unknown, Qt::NoModifier, QString(c));
      QApplication::sendEvent(w, &press);
    }
  }
}

inline void type_into(SetupPanel* panel, const std::string& key, const QString& text) {
  QWidget* w = panel->field(key);
  QLineEdit* edit = qobject_cast<QLineEdit*>(w);
  if (!edit)
    if (auto* c = qobject_cast<QComboBox*>(w)) edit = c->lineEdit();
  if (auto* spin = qobject_cast<QSpinBox*>(w)) {
    spin->selectAll();
    type_text(spin, text);
    return;
  }
  QVERIFY2(edit, key.c_str());
  edit->selectAll();
  QTest::keyClick(edit, Qt::Key_Backspace);
  type_text(edit, text);
}

inline void set_workers(SetupPanel* panel, int workers) {
  qobject_cast<QSpinBox*>(panel->field("workers"))->setValue(workers);
}

// The library's resolved plan and cluster for (model, cluster, workers, plan text): what the
// lab must show for the same inputs.
struct Expected {
  strategy::ModelSpec model;
  strategy::ClusterSpec base, cluster;
  strategy::Plan plan;
};
inline Expected expected(const std::string& model, const std::string& cluster, int workers,
                         const std::string& plan_text) {
  Expected e;
  e.model = strategy::load_model(model);
  e.base = strategy::load_cluster(cluster);
  e.cluster = strategy::with_world(e.base, workers);
  e.plan = strategy::resolve(strategy::parse_plan(plan_text), e.model, workers);
  strategy::validate(e.plan, e.model, e.cluster);
  return e;
}
// The split scaled to `workers` the way experiments scale it: dp = W / (tp pp).
inline Expected expected_scaled(const std::string& model, const std::string& cluster, int workers,
                                const std::string& plan_text) {
  Expected e;
  e.model = strategy::load_model(model);
  e.base = strategy::load_cluster(cluster);
  e.cluster = strategy::with_world(e.base, workers);
  strategy::Plan p = strategy::parse_plan(plan_text);
  p.given.push_back("dp");
  p.dp = workers / (p.tp * p.pp);
  e.plan = strategy::resolve(p, e.model, workers);
  return e;
}

}  // namespace parlab::gui::test
