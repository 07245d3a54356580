#include "gui/core/predictions_model.h"

#include <filesystem>

#include "db/results_store.h"

namespace parlab::gui {

PredictionsModel::PredictionsModel(QObject* parent) : QAbstractTableModel(parent) {}

void PredictionsModel::load(const std::string& db_path) {
  beginResetModel();
  rows_.clear();
  try {
    if (std::filesystem::exists(db_path)) rows_ = db::ResultsStore::open(db_path).list_predictions();
  } catch (const std::exception&) {
    rows_.clear();  // the history view reports an unreadable DB; this table stays empty
  }
  endResetModel();
}

int PredictionsModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }
int PredictionsModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant PredictionsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumns || role != Qt::DisplayRole) return {};
  const db::PredictionRecord& p = rows_[size_t(index.row())];
  switch (index.column()) {
    case kId:
      return qlonglong(p.id);
    case kWhat:
      return QString::fromStdString(p.quantity + " of " + p.model + " on " + p.cluster) +
             QString(", %1 workers (%2)")
                 .arg(p.world_size)
                 .arg(QString::fromStdString(std::string(db::to_string(p.source))));
    case kPredicted:
      return QString::number(p.predicted, 'f', 2) + "x";
    case kRevealed:
      return p.revealed ? QString::number(*p.revealed, 'f', 2) + "x" : QString("-");
    case kError:
      return p.revealed && *p.revealed != 0 ? QString::asprintf("%+.1f%%", 100 * (p.predicted / *p.revealed - 1))
                                            : QString("-");
    case kReason:
      return QString::fromStdString(p.reason);
    case kPredictedAt:
      return QString::fromStdString(p.predicted_at);
    default:
      return p.revealed_at ? QString::fromStdString(*p.revealed_at) : QString("-");
  }
}

QVariant PredictionsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[kColumns] = {"id",    "what", "predicted",    "revealed",
                                        "error", "why",  "predicted at", "revealed at"};
  return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

}  // namespace parlab::gui
