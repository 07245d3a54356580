#pragma once
// Where the lab reads and writes: the results DB, the `parlab` binary real runs start, and the
// folder their run directories go in.
#include <QString>

namespace parlab::gui {

struct LabOptions {
  QString db = "results/parlab.db";
  QString parlab;    // empty: found by find_parlab()
  QString runs_dir;  // empty: <db folder>/runs
  // The lesson's model trained for real on this machine, and the steps of each of its runs.
  QString lesson_model = "lab-mlp";
  int lesson_steps = 10;
};

// $PARLAB_BIN, else `parlab` beside this program (installed) or in the build tree's cli/,
// else "parlab" from PATH.
QString find_parlab();
QString runs_dir_of(const LabOptions& o);

}  // namespace parlab::gui
