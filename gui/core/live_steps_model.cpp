#include "gui/core/live_steps_model.h"

namespace parlab::gui {

LiveStepsModel::LiveStepsModel(QObject* parent) : LabTableModel({"step", "loss", "step time"}, parent) {}

void LiveStepsModel::add(int step, double loss, double step_seconds) {
  beginInsertRows({}, rowCount(), rowCount());
  rows_.push_back({step, loss, step_seconds});
  endInsertRows();
  emit changed();
}

void LiveStepsModel::clear() {
  beginResetModel();
  rows_.clear();
  endResetModel();
  emit changed();
}

int LiveStepsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

QVariant LiveStepsModel::data(const QModelIndex& index, int role) const {
  if (!in_range(index)) return {};
  const Row& r = rows_[size_t(index.row())];
  if (role == kValueRole)
    return index.column() == kStep ? QVariant(r.step) : QVariant(index.column() == kLoss ? r.loss : r.step_seconds);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kStep:
      return r.step;
    case kLoss:
      return QString::number(r.loss, 'f', 4);
    default:
      return QString::number(r.step_seconds * 1e3, 'g', 3) + " ms";
  }
}

}  // namespace parlab::gui
