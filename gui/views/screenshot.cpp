#include "gui/views/screenshot.h"

#include <QApplication>
#include <QDir>
#include <QElapsedTimer>
#include <QImage>
#include <QLineEdit>
#include <QPixmap>
#include <QTabWidget>
#include <QThread>
#include <cstdio>

#include "gui/core/simulation_job.h"
#include "gui/core/planner_job.h"
#include "gui/core/rubric_model.h"
#include "gui/views/main_window.h"
#include "gui/views/plan_view.h"
#include "gui/views/predict_view.h"
#include "gui/views/progress_view.h"
#include "gui/views/speedup_view.h"
#include "gui/views/timeline_view.h"

namespace parlab::gui {

bool wait_until(const std::function<bool()>& done, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < timeout_ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    QThread::msleep(5);
  }
  return done();
}

int take_screenshots(MainWindow& w, const QString& dir, int width, int height) {
  QDir().mkpath(dir);
  w.resize(width, height);
  w.show();
  wait_until([] { return false; }, 100);  // first layout
  constexpr int kWorkMs = 120000;
  // The work each view shows, done before its picture.
  wait_until([&] { return !w.plan_view()->job()->running(); }, kWorkMs);
  w.speedup_view()->simulate();
  wait_until([&] { return !w.speedup_view()->job()->running(); }, kWorkMs);
  w.timeline_view()->simulate();
  wait_until([&] { return !w.timeline_view()->job()->running(); }, kWorkMs);
  wait_until([&] { return !w.progress_view()->job()->running(); }, kWorkMs);
  // The predict view as a learner sees it before committing (screenshots write nothing to the DB).
  w.predict_view()->predicted_field()->setText("1.8");
  w.predict_view()->reason_field()->setText("the all-reduce of the gradients is not hidden under the backward pass");
  int failed = 0;
  for (const QString& name : MainWindow::view_names()) {
    w.show_view(name);
    wait_until([] { return false; }, 150);  // repaint
    const QString path = dir + "/" + name + ".png";
    const QImage image = w.grab().toImage();
    if (image.width() < 1280 || image.height() < 800 || !image.save(path)) {
      std::fprintf(stderr, "parlab-lab: could not write %s (%dx%d)\n", qPrintable(path), image.width(), image.height());
      ++failed;
    } else {
      std::printf("%s\n", qPrintable(path));
    }
  }
  return failed;
}

}  // namespace parlab::gui
