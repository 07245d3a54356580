#include "gui/core/candidates_model.h"

#include "gui/core/memory_model.h"

namespace parlab::gui {

CandidatesModel::CandidatesModel(QObject* parent) : QAbstractTableModel(parent) {}

void CandidatesModel::set_report(const strategy::PlanReport& report) {
  beginResetModel();
  report_ = report;
  endResetModel();
}

void CandidatesModel::clear() {
  beginResetModel();
  report_.reset();
  endResetModel();
}

int CandidatesModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !report_ ? 0 : int(report_->top.size());
}
int CandidatesModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant CandidatesModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !report_ || index.row() >= rowCount() || index.column() >= kColumns) return {};
  const strategy::Candidate& c = report_->top[size_t(index.row())];
  const auto seconds = [&]() -> double {
    switch (index.column()) {
      case kStep:
        return c.step_seconds();
      case kCompute:
        return c.quick.compute_seconds;
      case kTpComm:
        return c.quick.tp_comm_seconds;
      case kBubble:
        return c.quick.bubble_seconds;
      case kDpExposed:
        return c.quick.dp_exposed_seconds;
      default:
        return 0;
    }
  };
  if (role == kValueRole) {
    if (index.column() == kRankCol) return index.row() + 1;
    if (index.column() == kMemory) return c.worst.total_bytes();
    if (index.column() == kName || index.column() == kPlan) return data(index, Qt::DisplayRole);
    return seconds();
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case kRankCol:
        return index.row() == 0 ? tr("1 (chosen)") : QString::number(index.row() + 1);
      case kName:
        return QString::fromStdString(c.plan.short_name());
      case kMemory:
        return format_gib(c.worst.total_bytes()) + " / " + format_gib(c.worst.device_bytes);
      case kPlan:
        return QString::fromStdString(c.plan.to_string());
      default:
        return QString::number(seconds() * 1e3, 'f', 2) + " ms";
    }
  }
  if (role == Qt::ToolTipRole && index.column() == kStep)
    return c.walked ? tr("walked step program (critical path)") : tr("closed-form estimate");
  return {};
}

QVariant CandidatesModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[kColumns] = {"#",      "plan",       "step",          "compute",  "TP comm",
                                        "bubble", "DP exposed", "fullest stage", "plan keys"};
  return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

}  // namespace parlab::gui
