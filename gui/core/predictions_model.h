#pragma once
// The learner's predictions from the results DB (db v3 predictions table) as an item model:
// what was predicted, why, what revealed it and the error (predicted / revealed - 1).
#include <QAbstractTableModel>
#include <vector>

#include "db/records.h"

namespace parlab::gui {

class PredictionsModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kId, kWhat, kPredicted, kRevealed, kError, kReason, kPredictedAt, kRevealedAt, kColumns };
  explicit PredictionsModel(QObject* parent = nullptr);

  void load(const std::string& db_path);
  const std::vector<db::PredictionRecord>& predictions() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<db::PredictionRecord> rows_;
};

}  // namespace parlab::gui
