#pragma once
// What the results DB holds, as one flat item model: experiments, runs, proofs, incidents and
// predictions, one row each, newest last, with a filter proxy by kind and text. Opening a run row
// gives its RunRecord, whose plan the setup panel loads.
#include <QAbstractTableModel>
#include <QSortFilterProxyModel>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"

namespace parlab::gui {

struct HistoryRow {
  QString kind;  // "experiment", "run", "proof", "incident", "prediction"
  long long id = 0;
  QString what;    // experiment name, run model x world, proof kind, incident kind
  QString status;  // run status, proof passed/failed, ...
  QString when;
  QString detail;
  std::optional<db::RunRecord> run;  // set for run rows
};

class HistoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kKind, kId, kWhat, kStatus, kWhen, kDetail, kColumns };
  explicit HistoryModel(QObject* parent = nullptr);

  // Reads everything from the database at `path`; a missing or unreadable file gives no rows
  // and the reason in error().
  void load(const std::string& path);
  const QString& error() const { return error_; }
  const HistoryRow& row(int r) const { return rows_[size_t(r)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<HistoryRow> rows_;
  QString error_;
};

// Filters by kind ("" = all) and by text in any column (case-insensitive).
class HistoryFilter : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit HistoryFilter(QObject* parent = nullptr);
  void set_kind(const QString& kind);
  void set_text(const QString& text);

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  QString kind_, text_;
};

}  // namespace parlab::gui
