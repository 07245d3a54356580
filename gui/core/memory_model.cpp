#include "gui/core/memory_model.h"

namespace parlab::gui {

QString format_gib(double bytes) { return QString::number(bytes / (1024.0 * 1024 * 1024), 'f', 2) + " GiB"; }

MemoryModel::MemoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void MemoryModel::set_setup(const LabSetup& s) {
  const std::string what = s.model.name + " on " + s.base_cluster.name;
  const std::string split = s.plan.short_name() + " on " + std::to_string(s.world()) + " workers";
  if (what != shown_what_) {
    previous_.reset();
  } else if (split != shown_split_ && !rows_.empty()) {
    Previous p{QString::fromStdString(shown_split_), {}};
    for (const auto& l : rows_) p.total_bytes.push_back(l.total_bytes());
    previous_ = p;
  }
  shown_what_ = what;
  shown_split_ = split;
  beginResetModel();
  const std::vector<strategy::LayerSpec> layers = s.model.layer_list();
  rows_.clear();
  per_stage_ = s.world() > kMaxRankRows;
  dp_tp_ranks_ = s.plan.dp * s.plan.tp;
  if (per_stage_) {
    rows_ = strategy::ledger_per_stage(s.model, layers, s.plan, s.cluster);
  } else {
    for (int r = 0; r < s.world(); ++r)
      rows_.push_back(strategy::compute_ledger(s.model, layers, s.plan, s.cluster, r));
  }
  rule_inputs_ = strategy::rule_inputs(s.model, s.plan, s.cluster);
  verdict_ = strategy::apply_rule(rule_inputs_);
  formulas_.clear();
  formulas_for_.clear();
  if (!rows_.empty()) {
    const strategy::MemoryLedger fullest = strategy::worst_stage(rows_);
    formulas_ = strategy::explain_ledger(s.model, layers, s.plan, s.cluster, fullest.rank).terms;
    formulas_for_ =
        per_stage_ ? QStringLiteral("stage %1").arg(fullest.stage) : QStringLiteral("rank %1").arg(fullest.rank);
  }
  endResetModel();
  emit changed();
}

void MemoryModel::clear() {
  beginResetModel();
  rows_.clear();
  formulas_.clear();
  previous_.reset();
  shown_what_.clear();
  shown_split_.clear();
  verdict_ = {};
  rule_inputs_ = {};
  endResetModel();
  emit changed();
}

bool MemoryModel::all_fit() const {
  for (const auto& l : rows_)
    if (!l.fits()) return false;
  return !rows_.empty();
}

int MemoryModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }
int MemoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QString MemoryModel::row_label(int row) const {
  const strategy::MemoryLedger& l = rows_[size_t(row)];
  if (!per_stage_) return QStringLiteral("rank %1").arg(l.rank);
  return QStringLiteral("stage %1 (%2 ranks)").arg(l.stage).arg(dp_tp_ranks_);
}

QVariant MemoryModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount() || index.column() >= kColumns) return {};
  const strategy::MemoryLedger& l = rows_[size_t(index.row())];
  const auto bytes = [&]() -> double {
    switch (index.column()) {
      case kParams:
        return l.params_bytes;
      case kGrads:
        return l.grads_bytes;
      case kOptimizer:
        return l.optimizer_bytes;
      case kActivations:
        return l.activations_bytes;
      case kTemp:
        return l.temp_bytes;
      case kTotal:
        return l.total_bytes();
      case kCapacity:
        return l.device_bytes;
      default:
        return 0;
    }
  };
  if (role == kValueRole) {
    if (index.column() == kRank) return l.rank;
    if (index.column() == kStage) return l.stage;
    if (index.column() == kFits) return l.fits();
    return bytes();
  }
  if (role == Qt::DisplayRole) {
    if (index.column() == kRank) return row_label(index.row());
    if (index.column() == kStage) return l.stage;
    if (index.column() == kFits) return l.fits() ? tr("fits") : tr("DOES NOT FIT");
    return format_gib(bytes());
  }
  if (role == Qt::ToolTipRole && index.column() == kFits && !l.fits())
    return tr("needs %1, the device holds %2").arg(format_gib(l.total_bytes()), format_gib(l.device_bytes));
  if (role == Qt::TextAlignmentRole && index.column() >= kParams && index.column() <= kCapacity)
    return int(Qt::AlignRight | Qt::AlignVCenter);
  return {};
}

QVariant MemoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal)
    return QAbstractTableModel::headerData(section, orientation, role);
  static const char* names[kColumns] = {"rank",        "stage",     "parameters", "gradients", "optimizer",
                                        "activations", "temporary", "total",      "capacity",  "fits"};
  return section >= 0 && section < kColumns ? tr(names[section]) : QVariant();
}

}  // namespace parlab::gui
