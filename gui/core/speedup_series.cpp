#include "gui/core/speedup_series.h"

#include "strategy/cost_model.h"
#include "strategy/measures.h"

namespace parlab::gui {

namespace {
std::optional<size_t> baseline(const std::vector<SpeedupPoint>& rows, SeriesSource source) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].step_seconds[int(source)]) return i;
  return std::nullopt;
}
}  // namespace

std::optional<double> speedup_of(const std::vector<SpeedupPoint>& rows, size_t i, SeriesSource source) {
  const auto b = baseline(rows, source);
  const auto& t = rows[i].step_seconds[int(source)];
  if (!b || !t || !(*t > 0)) return std::nullopt;
  const SpeedupPoint& base = rows[*b];
  const auto samples = [source](const SpeedupPoint& p) {
    return source == SeriesSource::kMeasured && !p.measured_rounds.empty()
               ? p.measured_rounds
               : std::vector<double>{*p.step_seconds[int(source)]};
  };
  const strategy::Measure m =
      strategy::speedup(samples(base), samples(rows[i]), base.global_batch, rows[i].global_batch);
  return m.n > 0 ? std::optional<double>(m.value) : std::nullopt;
}

std::optional<double> efficiency_of(const std::vector<SpeedupPoint>& rows, size_t i, SeriesSource source) {
  const auto s = speedup_of(rows, i, source);
  const auto b = baseline(rows, source);
  if (!s) return std::nullopt;
  return strategy::efficiency(*s, rows[i].workers, rows[*b].workers);
}

std::optional<double> step_error(const SpeedupPoint& row, SeriesSource prediction) {
  const auto& p = row.step_seconds[int(prediction)];
  const auto& m = row.step_seconds[int(SeriesSource::kMeasured)];
  if (!p || !m || !(*m > 0)) return std::nullopt;
  return strategy::relative_error(*p, *m);
}

std::vector<SpeedupPoint> analytic_series(const LabSetup& setup) {
  std::vector<SpeedupPoint> rows;
  for (int w : series_workers(setup)) {
    strategy::ClusterSpec cluster;
    const strategy::Plan plan = plan_at_workers(setup, w, &cluster);
    SpeedupPoint p;
    p.plan = plan.to_string();
    p.workers = w;
    p.global_batch = double(plan.global_batch);
    if (setup.model.has_layers())
      p.step_seconds[int(SeriesSource::kAnalytic)] =
          strategy::estimate_step(setup.model, plan, cluster, false).step_seconds;
    rows.push_back(p);
  }
  return rows;
}

std::vector<SpeedupPoint> scaling_lab_series(const strategy::ScalingLabInputs& inputs) {
  std::vector<SpeedupPoint> rows;
  for (const strategy::ScalingRow& r : strategy::scaling_lab(inputs)) {
    SpeedupPoint p;
    p.workers = r.workers;
    p.global_batch = r.global_batch;  // the scaling lab's: a full local batch per worker
    p.step_seconds[int(SeriesSource::kAnalytic)] = r.step_seconds;
    rows.push_back(p);
  }
  return rows;
}

}  // namespace parlab::gui
