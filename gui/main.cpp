// parlab-lab: the desktop lab. Pick a model and a cluster, vary workers and the split, see what
// fits and what the split costs, predict, simulate, run for real on this machine, compare.
//
//   parlab-lab [--db results/parlab.db] [--model M] [--cluster C] [--workers N] [--plan k=v,...] [--trace F]
//   parlab-lab --screenshot DIR      every view to DIR/<view>.png, offscreen, then exit
// It opens on the Lesson (the chapter as a guided path) until the lesson is complete.
#include <QApplication>
#include <QCommandLineParser>
#include <cstdio>

#include "gui/views/main_window.h"
#include "gui/views/screenshot.h"
#include "gui/views/setup_panel.h"
#include "gui/views/timeline_view.h"
#include <algorithm>

using namespace parlab;

int main(int argc, char** argv) {
  // Screenshots need no display: choose the offscreen platform before QApplication exists.
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--screenshot" && qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM"))
      qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  QApplication::setApplicationName("parlab-lab");
  QCommandLineParser args;
  args.setApplicationDescription(
      "The parlab desktop lab: vary workers and the split of a model over a cluster, see the memory ledger, the "
      "planner's candidates, analytic, simulated and measured speedup, one simulated step per rank; predict before "
      "the reveal; run real workers on this machine and inject faults. Results go to the results database.");
  args.addHelpOption();
  QCommandLineOption db(QStringLiteral("db"), "Results database (default results/parlab.db)", "file",
                        "results/parlab.db");
  QCommandLineOption model({"model", "m"}, "Model preset or TOML file to start with", "name");
  QCommandLineOption cluster({"cluster", "c"}, "Cluster preset or TOML file to start with", "name");
  QCommandLineOption workers({"workers", "w"}, "Workers to start with", "n");
  QCommandLineOption plan({"plan", "p"}, "Plan keys to start with, e.g. tp=2,zero=1", "k=v,...");
  QCommandLineOption parlab(QStringLiteral("parlab"),
                            "The parlab binary real runs start (default: $PARLAB_BIN, beside this one, PATH)", "file");
  QCommandLineOption trace(QStringLiteral("trace"),
                           "A measured Chrome trace (parlab train --trace) to show in the timeline", "file");
  QCommandLineOption shot(QStringLiteral("screenshot"), "Render every view offscreen to DIR/<view>.png and exit",
                          "dir");
  QCommandLineOption lesson_model(QStringLiteral("lesson-model"),
                                  "The model the lesson trains for real here (default lab-mlp)", "name", "lab-mlp");
  QCommandLineOption lesson_steps(QStringLiteral("lesson-steps"), "Steps of each real run of the lesson (default 10)",
                                  "n", "10");
  args.addOptions({db, model, cluster, workers, plan, parlab, trace, shot, lesson_model, lesson_steps});
  args.process(app);

  gui::LabOptions options;
  options.db = args.value(db);
  options.parlab = args.value(parlab);
  options.lesson_model = args.value(lesson_model);
  {
    bool ok = false;
    options.lesson_steps = args.value(lesson_steps).toInt(&ok);
    if (!ok || options.lesson_steps < 2) {
      std::fprintf(stderr, "parlab-lab: --lesson-steps = %s: must be an integer >= 2\n",
                   qPrintable(args.value(lesson_steps)));
      return 2;
    }
  }
  gui::MainWindow window(options);
  gui::SetupInputs in = window.setup_panel()->inputs();
  if (args.isSet(model)) in.model = args.value(model).toStdString();
  if (args.isSet(cluster)) in.cluster = args.value(cluster).toStdString();
  if (args.isSet(workers)) {
    bool ok = false;
    in.workers = args.value(workers).toInt(&ok);
    if (!ok || in.workers < 1) {
      std::fprintf(stderr, "parlab-lab: --workers = %s: must be a positive integer\n", qPrintable(args.value(workers)));
      return 2;
    }
  }
  if (args.isSet(plan)) {
    // The panel holds each key's text as typed; the library checks it (parse_plan via the panel).
    const auto& keys = gui::setup_plan_keys();
    for (const QString& pair : args.value(plan).split(',', Qt::SkipEmptyParts)) {
      const QString key = pair.section('=', 0, 0).trimmed();
      if (!pair.contains('=') || std::find(keys.begin(), keys.end(), key.toStdString()) == keys.end()) {
        std::fprintf(stderr, "parlab-lab: --plan = %s: expected key=value pairs with keys %s\n", qPrintable(pair),
                     qPrintable(QStringList([&] {
                                  QStringList l;
                                  for (const auto& k : keys) l << QString::fromStdString(k);
                                  return l;
                                }())
                                    .join(", ")));
        return 2;
      }
      in.set(key.toStdString(), pair.section('=', 1).trimmed().toStdString());
    }
  }
  window.setup_panel()->set_inputs(in);
  if (const auto& e = window.setup_panel()->error()) {
    std::fprintf(stderr, "parlab-lab: %s\n", e->message.c_str());
    if (args.isSet(shot)) return 2;
  }
  if (args.isSet(trace)) window.timeline_view()->load_measured(args.value(trace));
  if (args.isSet(shot)) return gui::take_screenshots(window, args.value(shot)) == 0 ? 0 : 1;
  window.resize(1440, 900);
  if (window.lesson_pending()) window.show_view("lesson");
  window.show();
  return app.exec();
}
