#pragma once
// The planner's report as an item model: the ranked candidates (the choice first), each with
// its step estimate broken into the closed form's parts and the fullest stage's memory. The
// explanation lines and the seed rule's baseline come with it. strategy::search_plans does the
// search; this only lays the report out.
#include <QAbstractTableModel>
#include <optional>

#include "strategy/planner.h"

namespace parlab::gui {

class CandidatesModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kRankCol, kName, kStep, kCompute, kTpComm, kBubble, kDpExposed, kMemory, kPlan, kColumns };
  static constexpr int kValueRole = Qt::UserRole + 1;

  explicit CandidatesModel(QObject* parent = nullptr);
  void set_report(const strategy::PlanReport& report);
  void clear();
  const std::optional<strategy::PlanReport>& report() const { return report_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::optional<strategy::PlanReport> report_;
};

}  // namespace parlab::gui
