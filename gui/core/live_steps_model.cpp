#include "gui/core/live_steps_model.h"

namespace parlab::gui {

LiveStepsModel::LiveStepsModel(QObject* parent) : QAbstractTableModel(parent) {}

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
int LiveStepsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant LiveStepsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumns) return {};
  const Row& r = rows_[size_t(index.row())];
  if (role == kValueRole) return index.column() == kStep ? QVariant(r.step) : QVariant(index.column() == kLoss ? r.loss : r.step_seconds);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kStep: return r.step;
    case kLoss: return QString::number(r.loss, 'f', 4);
    default: return QString::number(r.step_seconds * 1e3, 'g', 3) + " ms";
  }
}

QVariant LiveStepsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[kColumns] = {"step", "loss", "step time"};
  return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

}  // namespace parlab::gui
