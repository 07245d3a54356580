#pragma once
// The memory ledger as an item model: one row per rank (per pipeline stage when the world is
// too large to draw every rank), columns the ledger's parts in bytes, the device capacity and
// whether it fits. Every number is strategy::compute_ledger's; the seed rule's verdict on one
// replica (strategy::apply_rule) comes with it.
#include <QAbstractTableModel>
#include <vector>

#include "gui/core/lab_setup.h"
#include "strategy/ledger.h"

namespace parlab::gui {

class MemoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kRank, kStage, kParams, kGrads, kOptimizer, kActivations, kTemp, kTotal, kCapacity, kFits, kColumns };
  // Worlds up to this many ranks are shown rank by rank; larger ones one row per stage.
  static constexpr int kMaxRankRows = 32;
  // Raw values (bytes, bool) under this role; DisplayRole shows GiB.
  static constexpr int kValueRole = Qt::UserRole + 1;

  explicit MemoryModel(QObject* parent = nullptr);

  void set_setup(const LabSetup& setup);
  void clear();

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

  const std::vector<strategy::MemoryLedger>& ledgers() const { return rows_; }
  bool per_stage() const { return per_stage_; }
  bool all_fit() const;
  const strategy::RuleVerdict& verdict() const { return verdict_; }
  const strategy::RuleInputs& rule_inputs() const { return rule_inputs_; }
  QString row_label(int row) const;

 signals:
  void changed();

 private:
  std::vector<strategy::MemoryLedger> rows_;
  bool per_stage_ = false;
  int dp_tp_ranks_ = 1;  // ranks per stage, for labels
  strategy::RuleInputs rule_inputs_;
  strategy::RuleVerdict verdict_;
};

// "12.3 GiB"
QString format_gib(double bytes);

}  // namespace parlab::gui
