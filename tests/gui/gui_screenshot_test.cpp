// `parlab-lab --screenshot DIR` (the real binary, offscreen) writes one PNG per view, at
// least 1280x800, that is not blank.
#include <QDir>
#include <QImage>
#include <QProcess>
#include <QSet>
#include <QTemporaryDir>
#include <QTest>

#include "gui/views/main_window.h"

using namespace parlab::gui;

class GuiScreenshotTest : public QObject {
  Q_OBJECT
 private slots:
  void one_non_blank_png_per_view() {
    QTemporaryDir dir;
    QProcess lab;
    lab.start(qEnvironmentVariable("PARLAB_LAB"), {"--screenshot", dir.filePath("shots"), "--db", dir.filePath("lab.db")});
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
};

QTEST_MAIN(GuiScreenshotTest)
#include "gui_screenshot_test.moc"
