#include "gui/core/speedup_model.h"

namespace parlab::gui {

SpeedupModel::SpeedupModel(QObject* parent)
    : LabTableModel({"workers", "analytic step", "analytic speedup", "analytic eff.", "simulated step",
                     "simulated speedup", "simulated eff.", "measured step", "measured speedup", "measured eff.",
                     "analytic error", "simulated error", "measured +-", "your prediction", "prediction error"},
                    parent) {}

void SpeedupModel::set_rows(std::vector<SpeedupPoint> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
  emit changed();
}

int SpeedupModel::row_of(int workers) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].workers == workers) return int(i);
  return -1;
}

int SpeedupModel::row_of_plan(const std::string& plan) const {
  for (size_t i = 0; i < rows_.size(); ++i)
    if (rows_[i].plan == plan) return int(i);
  return -1;
}

void SpeedupModel::fill(int r, SeriesSource source, double step_seconds, std::optional<long long> run,
                        std::optional<double> spread_seconds, std::vector<double> rounds) {
  SpeedupPoint& p = rows_[size_t(r)];
  p.step_seconds[int(source)] = step_seconds;
  if (source == SeriesSource::kMeasured)
    p.measured_run = run, p.measured_spread = spread_seconds, p.measured_rounds = std::move(rounds);
  // A new first point of a source moves every speedup of that source: refresh the whole table.
  emit dataChanged(index(0, 0), index(rowCount() - 1, kColumns - 1));
  emit changed();
}

void SpeedupModel::set_step(int workers, SeriesSource source, double step_seconds, std::optional<long long> run,
                            std::optional<double> spread_seconds, std::vector<double> rounds) {
  const int r = row_of(workers);
  if (r >= 0) fill(r, source, step_seconds, run, spread_seconds, std::move(rounds));
}

bool SpeedupModel::set_step_of_plan(const std::string& plan, SeriesSource source, double step_seconds,
                                    std::optional<long long> run, std::optional<double> spread_seconds,
                                    std::vector<double> rounds) {
  const int r = row_of_plan(plan);
  if (r >= 0) fill(r, source, step_seconds, run, spread_seconds, std::move(rounds));
  return r >= 0;
}

void SpeedupModel::set_prediction(int workers, double speedup) {
  const int r = row_of(workers);
  if (r < 0) return;
  rows_[size_t(r)].predicted_speedup = speedup;
  emit dataChanged(index(r, kPredicted), index(r, kPredictionError));
  emit changed();
}

std::optional<double> SpeedupModel::value(int row, int column) const {
  if (row < 0 || row >= rowCount()) return std::nullopt;
  const SpeedupPoint& p = rows_[size_t(row)];
  const size_t i = size_t(row);
  using S = SeriesSource;
  switch (column) {
    case kWorkers:
      return p.workers;
    case kAnalyticStep:
      return p.step_seconds[int(S::kAnalytic)];
    case kAnalyticSpeedup:
      return speedup_of(rows_, i, S::kAnalytic);
    case kAnalyticEfficiency:
      return efficiency_of(rows_, i, S::kAnalytic);
    case kSimulatedStep:
      return p.step_seconds[int(S::kSimulated)];
    case kSimulatedSpeedup:
      return speedup_of(rows_, i, S::kSimulated);
    case kSimulatedEfficiency:
      return efficiency_of(rows_, i, S::kSimulated);
    case kMeasuredStep:
      return p.step_seconds[int(S::kMeasured)];
    case kMeasuredSpeedup:
      return speedup_of(rows_, i, S::kMeasured);
    case kMeasuredEfficiency:
      return efficiency_of(rows_, i, S::kMeasured);
    case kAnalyticError:
      return step_error(p, S::kAnalytic);
    case kSimulatedError:
      return step_error(p, S::kSimulated);
    case kMeasuredSpread: {  // relative, comparable with the errors beside it
      const auto m = p.step_seconds[int(S::kMeasured)];
      if (!m || !p.measured_spread || !(*m > 0)) return std::nullopt;
      return *p.measured_spread / *m;
    }
    case kPredicted:
      return p.predicted_speedup;
    case kPredictionError: {
      const auto sim = speedup_of(rows_, i, S::kSimulated);
      if (!p.predicted_speedup || !sim) return std::nullopt;
      return *p.predicted_speedup / *sim - 1;
    }
    default:
      return std::nullopt;
  }
}

int SpeedupModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(rows_.size()); }

QVariant SpeedupModel::data(const QModelIndex& index, int role) const {
  if (!in_range(index)) return {};
  const std::optional<double> v = value(index.row(), index.column());
  if (role == kValueRole) return v ? QVariant(*v) : QVariant();
  if (role == Qt::TextAlignmentRole) return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role == Qt::ToolTipRole && index.column() == kWorkers)
    return QString::fromStdString(rows_[size_t(index.row())].plan);
  if (role != Qt::DisplayRole) return {};
  if (!v) return QStringLiteral("-");
  switch (index.column()) {
    case kWorkers:
      return int(*v);
    case kAnalyticStep:
    case kSimulatedStep:
    case kMeasuredStep:
      return QString::number(*v * 1e3, 'f', 2) + " ms";
    case kAnalyticSpeedup:
    case kSimulatedSpeedup:
    case kMeasuredSpeedup:
    case kPredicted:
      return QString::number(*v, 'f', 2) + "x";
    case kAnalyticError:
    case kSimulatedError:
    case kPredictionError:
      return QString::asprintf("%+.1f%%", 100 * *v);
    case kMeasuredSpread:
      return QString::asprintf("+-%.1f%%", 100 * *v);
    default:
      return QString::number(*v, 'f', 2);
  }
}

}  // namespace parlab::gui
