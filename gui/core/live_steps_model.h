#pragma once
// The steps of a run in progress, as `parlab train` reports them (one progress line per step):
// step, loss and step time, for the live plot and its table.
#include <vector>

#include "gui/core/table_model.h"

namespace parlab::gui {

class LiveStepsModel : public LabTableModel {
  Q_OBJECT
 public:
  enum Column { kStep, kLoss, kStepTime, kColumns };
  struct Row {
    int step = 0;
    double loss = 0, step_seconds = 0;
  };
  explicit LiveStepsModel(QObject* parent = nullptr);
  void add(int step, double loss, double step_seconds);
  void clear();
  const std::vector<Row>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

 private:
  std::vector<Row> rows_;
};

}  // namespace parlab::gui
