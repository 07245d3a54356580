#include "strategy/measures.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "base/errors.h"

namespace parlab::strategy {
namespace {

bool all_positive(const std::vector<double>& v) {
  return !v.empty() && std::all_of(v.begin(), v.end(), [](double t) { return t > 0; });
}

}  // namespace

double speedup(double base_step, double step, double base_global_batch, double global_batch) {
  return (global_batch / step) / (base_global_batch / base_step);
}

Measure speedup(const std::vector<double>& base, const std::vector<double>& steps, double base_gbs, double gbs) {
  if (!all_positive(base) || !all_positive(steps)) return {};
  std::vector<double> ratios;
  if (base.size() == steps.size()) {
    for (size_t r = 0; r < base.size(); ++r) ratios.push_back(speedup(base[r], steps[r], base_gbs, gbs));
  } else {
    ratios.push_back(speedup(median(base), median(steps), base_gbs, gbs));
  }
  const Spread s = spread_of(ratios);
  return {s.median, s.half_iqr, s.n};
}

double efficiency(double speedup, int workers, int base_workers) { return speedup / (double(workers) / base_workers); }

double relative_error(double predicted, double measured) { return predicted / measured - 1; }

Measure relative_error(const std::vector<double>& predicted, const std::vector<double>& measured) {
  if (predicted.empty() || !all_positive(measured)) return {};
  std::vector<double> errors;
  if (predicted.size() == measured.size()) {
    for (size_t r = 0; r < predicted.size(); ++r) errors.push_back(relative_error(predicted[r], measured[r]));
  } else {
    errors.push_back(relative_error(median(predicted), median(measured)));
  }
  const Spread s = spread_of(errors);
  return {s.median, s.half_iqr, s.n};
}

double regret(double choice_step, double best_step) { return choice_step > 0 ? 1 - best_step / choice_step : 0; }

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    const double average = (double(i) + double(j)) / 2 + 1;  // ranks i+1 .. j+1 share their mean
    for (size_t k = i; k <= j; ++k) r[order[k]] = average;
    i = j + 1;
  }
  return r;
}

double spearman(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2)
    throw ConfigError("spearman", std::to_string(x.size()) + " and " + std::to_string(y.size()) + " values",
                      "two series of the same length, at least 2");
  const std::vector<double> rx = ranks(x), ry = ranks(y);
  const double n = double(x.size()), mean = (n + 1) / 2;
  double sxy = 0, sxx = 0, syy = 0;
  for (size_t i = 0; i < rx.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  return sxx > 0 && syy > 0 ? sxy / std::sqrt(sxx * syy) : 0;
}

std::string round_step_metric(int round) { return "rounds." + std::to_string(round) + ".step_seconds"; }

std::vector<double> round_steps(const std::map<std::string, double>& metrics) {
  std::vector<double> out;
  for (int r = 0;; ++r) {
    const auto it = metrics.find(round_step_metric(r));
    if (it == metrics.end()) return out;
    out.push_back(it->second);
  }
}

}  // namespace parlab::strategy
