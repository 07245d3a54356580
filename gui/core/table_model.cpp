#include "gui/core/table_model.h"

namespace parlab::gui {

LabTableModel::LabTableModel(std::vector<const char*> headers, QObject* parent)
    : QAbstractTableModel(parent), headers_(std::move(headers)) {}

int LabTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(headers_.size()); }

bool LabTableModel::in_range(const QModelIndex& index) const {
  return index.isValid() && index.row() < rowCount() && index.column() < columnCount();
}

QVariant LabTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  return section >= 0 && section < columnCount() ? tr(headers_[size_t(section)]) : QVariant();
}

}  // namespace parlab::gui
