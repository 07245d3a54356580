#pragma once
// A chart with its numbers: a "Table" toggle (Alt+T while the panel has focus, or the button)
// switches between the chart and a table view of the same item model — the non-visual data
// table every chart carries.
#include <QWidget>

class QAbstractItemModel;
class QLabel;
class QStackedWidget;
class QTableView;
class QToolButton;

namespace parlab::gui {

class Chart;

class ChartPanel : public QWidget {
  Q_OBJECT
 public:
  ChartPanel(const QString& title, QAbstractItemModel* model, QWidget* parent = nullptr);
  Chart* chart() const { return chart_; }
  QTableView* table() const { return table_; }
  QToolButton* table_toggle() const { return toggle_; }
  bool showing_table() const;
  void show_table(bool on);
  // Replaces the chart area (the timeline draws its own widget).
  void set_chart_widget(QWidget* widget);

 private:
  Chart* chart_ = nullptr;
  QStackedWidget* stack_;
  QTableView* table_;
  QToolButton* toggle_;
};

}  // namespace parlab::gui
