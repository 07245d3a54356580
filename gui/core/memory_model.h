#pragma once
// The memory ledger as an item model: one row per rank (per pipeline stage when the world is
// too large to draw every rank), columns the ledger's parts in bytes, the device capacity and
// whether it fits. Every number is strategy::compute_ledger's; the seed rule's verdict on one
// replica (strategy::apply_rule) comes with it, and the fullest row's categories as formulas
// with the numbers in (strategy::explain_ledger). When the split or the worker count changes,
// the plan before stays readable (previous()) until the next change: the view draws it faintly.
#include <QAbstractTableModel>
#include <optional>
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
  // The fullest row's ledger, each category as "optimizer = 8 B x 67.2M params / 4 (...) = 134 MB".
  const std::vector<strategy::LedgerTerm>& formulas() const { return formulas_; }
  QString formulas_for() const { return formulas_for_; }  // which row they describe

  // The plan shown before the last change of split or worker count, per row: its total bytes.
  struct Previous {
    QString label;  // "tp=2 on 4 workers"
    std::vector<double> total_bytes;
  };
  const std::optional<Previous>& previous() const { return previous_; }

 signals:
  void changed();

 private:
  std::vector<strategy::MemoryLedger> rows_;
  bool per_stage_ = false;
  int dp_tp_ranks_ = 1;  // ranks per stage, for labels
  strategy::RuleInputs rule_inputs_;
  strategy::RuleVerdict verdict_;
  std::vector<strategy::LedgerTerm> formulas_;
  QString formulas_for_;
  // What identifies the plan shown: model and cluster (a change clears the outline), and the
  // split with its world (a change keeps the plan before as the outline).
  std::string shown_what_, shown_split_;
  std::optional<Previous> previous_;
};

// "12.3 GiB"
QString format_gib(double bytes);

}  // namespace parlab::gui
