#include "gui/core/history_model.h"

#include <filesystem>

#include "db/results_store.h"
#include "base/errors.h"

namespace parlab::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s); }
}  // namespace

HistoryModel::HistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void HistoryModel::load(const std::string& path) {
  beginResetModel();
  rows_.clear();
  error_.clear();
  try {
    if (!std::filesystem::exists(path)) throw RuntimeError("no results database at " + path + " yet");
    auto store = db::ResultsStore::open(path);
    for (const auto& e : store.list_experiments())
      rows_.push_back({"experiment", e.id, q(e.name), "", q(e.created_at), q(e.description), std::nullopt});
    for (const auto& r : store.list_runs()) {
      const QString what = q(r.model) + " on " + q(r.cluster) +
                           QString(", %1 worker%2").arg(r.world_size).arg(r.world_size > 1 ? "s" : "");
      HistoryRow row{"run",
                     r.id,
                     what,
                     q(std::string(db::to_string(r.status))),
                     q(r.started_at),
                     q(std::string(db::to_string(r.kind))) + (r.notes.empty() ? "" : " — " + q(r.notes)),
                     r};
      rows_.push_back(std::move(row));
      for (const auto& i : store.incidents(r.id))
        rows_.push_back({"incident", i.id, q(std::string(db::to_string(i.kind))) + QString(" (run %1)").arg(r.id),
                         i.rank ? QString("rank %1").arg(*i.rank) : QString("job"), q(i.detected_at), q(i.detail),
                         std::nullopt});
    }
    for (const auto& p : store.list_proofs())
      rows_.push_back(
          {"proof", p.id, q(p.kind), p.passed ? "passed" : "failed", q(p.created_at), q(p.result), std::nullopt});
    for (const auto& p : store.list_predictions())
      rows_.push_back(
          {"prediction", p.id, q(p.quantity) + " of " + q(p.model) + QString(" at %1 workers").arg(p.world_size),
           p.revealed ? QString("revealed %1").arg(*p.revealed, 0, 'f', 2) : QString("not revealed"), q(p.predicted_at),
           QString("predicted %1: ").arg(p.predicted, 0, 'f', 2) + q(p.reason), std::nullopt});
  } catch (const std::exception& e) {
    error_ = QString::fromUtf8(e.what());
  }
  endResetModel();
}

int HistoryModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }
int HistoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant HistoryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumns) return {};
  if (role != Qt::DisplayRole && role != Qt::ToolTipRole) return {};
  const HistoryRow& r = rows_[size_t(index.row())];
  switch (index.column()) {
    case kKind:
      return r.kind;
    case kId:
      return r.id;
    case kWhat:
      return r.what;
    case kStatus:
      return r.status;
    case kWhen:
      return r.when;
    default:
      return r.detail;
  }
}

QVariant HistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[kColumns] = {"kind", "id", "what", "status", "when", "detail"};
  return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

HistoryFilter::HistoryFilter(QObject* parent) : QSortFilterProxyModel(parent) {}

void HistoryFilter::set_kind(const QString& kind) {
  kind_ = kind;
  invalidateFilter();
}

void HistoryFilter::set_text(const QString& text) {
  text_ = text;
  invalidateFilter();
}

bool HistoryFilter::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  const QAbstractItemModel* m = sourceModel();
  if (!kind_.isEmpty() && m->index(source_row, HistoryModel::kKind, source_parent).data().toString() != kind_)
    return false;
  if (text_.isEmpty()) return true;
  for (int c = 0; c < m->columnCount(source_parent); ++c)
    if (m->index(source_row, c, source_parent).data().toString().contains(text_, Qt::CaseInsensitive)) return true;
  return false;
}

}  // namespace parlab::gui
