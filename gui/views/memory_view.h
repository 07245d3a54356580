#pragma once
// Memory view: the ledger per rank as stacked bars against the device capacity, ranks that do
// not fit marked, and the seed rule's verdicts with the named blocker.
#include <QWidget>

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

 private:
  void refresh();

  MemoryModel* model_;
  ChartPanel* panel_;
  QLabel* fit_;
  QLabel* verdict_;
};

}  // namespace parlab::gui
