#pragma once
// Memory view: the ledger per rank as stacked bars against the device capacity, ranks that do
// not fit marked, and the seed rule's verdicts with the named blocker. Each category can be read
// as its formula with the numbers in (from strategy::explain_ledger), and the plan before the
// last change of split or worker count stays as a faint outline until the next change.
#include <QWidget>

#include "gui/views/chart.h"

class QCheckBox;
class QLabel;

namespace parlab::gui {

class ChartPanel;
class MemoryModel;

class MemoryView : public QWidget {
  Q_OBJECT
 public:
  MemoryView(MemoryModel* model, QWidget* parent = nullptr);
  ChartPanel* panel() const { return panel_; }
  QString verdict_text() const;
  QString fit_text() const;
  QString formulas_text() const;
  QString previous_text() const;
  QCheckBox* formulas_toggle() const { return show_formulas_; }

 private:
  void refresh();
  ChartSpec chart_spec(int* worst_row) const;  // the bars, the outline and the capacity line
  void refresh_texts(int worst);

  MemoryModel* model_;
  ChartPanel* panel_;
  QLabel* fit_;
  QLabel* verdict_;
  QCheckBox* show_formulas_;
  QLabel* formulas_;
  QLabel* previous_;
};

}  // namespace parlab::gui
