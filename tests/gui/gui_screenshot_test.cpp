// `parlab-lab --screenshot DIR` (the real binary, offscreen) writes one PNG per view, at
// least 1280x800, that is not blank. And what the pictures show, checked in process: the memory
// bars are the ledger's numbers (an independent strategy::compute_ledger), the formulas are
// explain_ledger's, the bars' colours are in the picture, and no view shows an error.
#include <QDir>
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include <QLabel>

#include "gui/core/memory_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"
#include "gui/views/main_window.h"
#include "gui/views/memory_view.h"
#include "gui/views/screenshot.h"
#include "strategy/ledger.h"
#include "tests/gui/gui_test_support.h"

using namespace parlab;
using namespace parlab::gui;

namespace {

// Texts a view shows only when something went wrong: an error-styled label with text, or a
// label saying a step failed.
QStringList visible_errors(QWidget* root) {
  QStringList out;
  for (QLabel* l : root->findChildren<QLabel*>()) {
    if (!l->isVisibleTo(root) || l->text().trimmed().isEmpty()) continue;
    const QString t = l->text();
    const bool styled = l->styleSheet().contains("b00020");
    const bool says = t.contains("failed", Qt::CaseInsensitive) || t.contains("Could not") ||
                      t.contains("unavailable") || t.contains("did not complete") || t.contains("No analytic series");
    if (styled || says) out << t;
  }
  return out;
}

}  // namespace

class GuiScreenshotTest : public QObject {
  Q_OBJECT
 private slots:
  void one_non_blank_png_per_view() {
    QTemporaryDir dir;
    QProcess lab;
    lab.start(qEnvironmentVariable("PARLAB_LAB"),
              {"--screenshot", dir.filePath("shots"), "--db", dir.filePath("lab.db")});
    QVERIFY(lab.waitForFinished(150000));
    QVERIFY2(lab.exitStatus() == QProcess::NormalExit && lab.exitCode() == 0, lab.readAllStandardError().constData());
    const QStringList files = QDir(dir.filePath("shots")).entryList({"*.png"}, QDir::Files);
    QCOMPARE(files.size(), int(MainWindow::view_names().size()));
    for (const QString& view : MainWindow::view_names()) {
      const QImage image(dir.filePath("shots/" + view + ".png"));
      QVERIFY2(!image.isNull(), qPrintable(view));
      QVERIFY2(image.width() >= 1280 && image.height() >= 800, qPrintable(view));
      // Not blank: many distinct colours (text, widgets, plots), sampled on a grid.
      QSet<QRgb> colours;
      for (int y = 0; y < image.height(); y += 7)
        for (int x = 0; x < image.width(); x += 7) colours.insert(image.pixel(x, y));
      QVERIFY2(colours.size() > 20, qPrintable(view + QString(": %1 colours").arg(colours.size())));
    }
  }

  void the_pictures_show_the_ledger_and_no_error() {
    test::Lab lab;
    MainWindow& w = *lab.window;
    const QString dir = lab.dir.filePath("shots");
    QCOMPARE(take_screenshots(w, dir), 0);
    // No view shows an error, each as it was photographed.
    for (const QString& view : MainWindow::view_names()) {
      w.show_view(view);
      const QStringList errors = visible_errors(w.tabs()->currentWidget());
      QVERIFY2(errors.isEmpty(), qPrintable(view + ": " + errors.join(" | ")));
    }
    // The memory bars are the ledger's bytes, rank by rank, category by category.
    const auto e = test::expected("lab-mlp", "cpu-local", 2, "");
    const Chart* chart = w.memory_view()->panel()->chart();
    const char* names[5] = {"parameters", "gradients", "optimizer", "activations", "temporary"};
    for (int rank = 0; rank < 2; ++rank) {
      const strategy::MemoryLedger l = strategy::compute_ledger(e.model, e.plan, e.cluster, rank);
      const double want[5] = {l.params_bytes, l.grads_bytes, l.optimizer_bytes, l.activations_bytes, l.temp_bytes};
      for (int c = 0; c < 5; ++c) {
        const ChartSeries* s = chart->series(names[c]);
        QVERIFY2(s && int(s->points.size()) == 2, names[c]);
        QCOMPARE(s->points[size_t(rank)].y(), want[c] / (1024.0 * 1024 * 1024));
      }
    }
    // The formulas under the bars are explain_ledger's, and end in the bars' numbers.
    const auto explained = strategy::explain_ledger(e.model, e.model.layer_list(), e.plan, e.cluster, 0);
    for (const auto& t : explained.terms)
      QVERIFY2(w.memory_view()->formulas_text().contains(QString::fromStdString(t.formula).toHtmlEscaped()),
               t.formula.c_str());
    // And the picture has them: the optimizer's bar colour (the largest part) fills a block.
    const QImage memory(dir + "/memory.png");
    int optimizer_pixels = 0;
    for (int y = 0; y < memory.height(); y += 2)
      for (int x = 0; x < memory.width(); x += 2)
        optimizer_pixels += memory.pixelColor(x, y) == chart->series("optimizer")->color;
    QVERIFY2(optimizer_pixels > 500, qPrintable(QString("%1 optimizer pixels").arg(optimizer_pixels)));
  }
};

QTEST_MAIN(GuiScreenshotTest)
#include "gui_screenshot_test.moc"
