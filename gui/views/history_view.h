#pragma once
// History: the results DB's experiments, runs, proofs, incidents and predictions, filterable
// by kind and text. Opening a run (Enter, double-click or the button) loads its model, cluster,
// world and plan into the setup panel.
#include <QWidget>
#include <string>

#include "db/records.h"
#include "gui/core/lab_setup.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QTableView;

namespace parlab::gui {

class HistoryFilter;
class HistoryModel;

class HistoryView : public QWidget {
  Q_OBJECT
 public:
  HistoryView(HistoryModel* model, std::string db_path, QWidget* parent = nullptr);
  void reload();
  // Opens the run shown at `proxy_row` (false when that row is not a run).
  bool open_row(int proxy_row);
  QLineEdit* filter_field() const { return filter_; }
  QComboBox* kind_field() const { return kind_; }
  HistoryFilter* filter() const { return proxy_; }
  QTableView* table() const { return table_; }

 signals:
  void open_run(const parlab::gui::SetupInputs& inputs);

 private:
  HistoryModel* model_;
  std::string db_path_;
  HistoryFilter* proxy_;
  QLineEdit* filter_;
  QComboBox* kind_;
  QTableView* table_;
  QLabel* status_;
};

// The setup a recorded run used (its plan JSON as plan keys).
SetupInputs inputs_of_run(const db::RunRecord& run);

}  // namespace parlab::gui
