#pragma once
// The speedup series as an item model: one row per plan (the setup's split at each worker
// count, keyed by the whole plan's text; its tooltip names it); step time, speedup and
// efficiency of the analytic, simulated and measured sources; each prediction's error against
// the measurement beside the measurement's own spread (an error inside it is noise), and the
// learner's prediction with its error against the simulation.
#include <vector>

#include "gui/core/speedup_series.h"
#include "gui/core/table_model.h"

namespace parlab::gui {

class SpeedupModel : public LabTableModel {
  Q_OBJECT
 public:
  enum Column {
    kWorkers,
    kAnalyticStep,
    kAnalyticSpeedup,
    kAnalyticEfficiency,
    kSimulatedStep,
    kSimulatedSpeedup,
    kSimulatedEfficiency,
    kMeasuredStep,
    kMeasuredSpeedup,
    kMeasuredEfficiency,
    kAnalyticError,
    kSimulatedError,
    kMeasuredSpread,
    kPredicted,
    kPredictionError,
    kColumns
  };

  explicit SpeedupModel(QObject* parent = nullptr);

  void set_rows(std::vector<SpeedupPoint> rows);
  // Fills one source at one worker count (a simulation finished, a measured run was found).
  void set_step(int workers, SeriesSource source, double step_seconds, std::optional<long long> run = {},
                std::optional<double> spread_seconds = {}, std::vector<double> rounds = {});
  // The same, for the row of exactly this plan (strategy::Plan::to_string); false when absent.
  bool set_step_of_plan(const std::string& plan, SeriesSource source, double step_seconds,
                        std::optional<long long> run = {}, std::optional<double> spread_seconds = {},
                        std::vector<double> rounds = {});
  void set_prediction(int workers, double speedup);
  const std::vector<SpeedupPoint>& rows() const { return rows_; }
  int row_of(int workers) const;                   // -1 when absent
  int row_of_plan(const std::string& plan) const;  // -1 when absent

  std::optional<double> value(int row, int column) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

 private:
  void fill(int row, SeriesSource source, double step_seconds, std::optional<long long> run,
            std::optional<double> spread_seconds, std::vector<double> rounds);
  std::vector<SpeedupPoint> rows_;
};

}  // namespace parlab::gui
