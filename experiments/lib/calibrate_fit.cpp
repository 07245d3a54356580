// The fits calibration is judged by: the ring's alpha-beta over all-reduce points (one rank count
// or all at once) and the GEMM-rate grid's interpolation (calibrate.h says what each means).
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "experiments/lib/calibrate.h"
#include "strategy/collectives.h"
#include "base/errors.h"

namespace parlab::experiments {

namespace {

// One measurement as the fit sees it: t = x a + y / B, with x the ring's steps and y the bytes
// its busiest link carries.
struct Sample {
  double x = 0, y = 0, seconds = 0;
};

// Least squares for {a, 1/B}, weighted by 1/t^2 (relative error); a < 0 falls back to a = 0.
std::pair<double, double> fit_samples(const std::vector<Sample>& pts, const std::string& what) {
  double sxx = 0, sxy = 0, syy = 0, sxt = 0, syt = 0;
  for (const auto& p : pts) {
    const double w = 1.0 / (p.seconds * p.seconds);
    sxx += w * p.x * p.x, sxy += w * p.x * p.y, syy += w * p.y * p.y, sxt += w * p.x * p.seconds,
        syt += w * p.y * p.seconds;
  }
  const double det = sxx * syy - sxy * sxy;
  if (!(std::fabs(det) > 1e-12 * sxx * syy)) throw RuntimeError("calibrate: " + what + " fit is singular");
  double a = (sxt * syy - syt * sxy) / det, beta = (sxx * syt - sxy * sxt) / det;
  if (a < 0) {  // no measurable latency: fit the bandwidth alone
    a = 0;
    beta = syt / syy;
  }
  return {a, beta};
}

Sample sample_of(const ShardedPoint& p) {
  const auto parsed = strategy::parse_collective_op(p.op);
  if (!parsed) throw RuntimeError("calibrate: no collective named " + p.op);
  const strategy::CollectiveOp op = *parsed;
  // The whole message, however it is cut (strategy::LinkSpec::op_fit).
  return {double(strategy::ring_steps(op, p.ranks)), strategy::ring_link_bytes(op, p.bytes, p.ranks), p.seconds};
}

}  // namespace

std::pair<double, double> fit_alpha_beta(const std::vector<AllReducePoint>& pts) {
  using strategy::CollectiveOp;
  std::vector<Sample> samples;
  for (const auto& p : pts)
    samples.push_back({double(strategy::ring_steps(CollectiveOp::kAllReduce, p.ranks)),
                       strategy::bus_bandwidth_factor(CollectiveOp::kAllReduce, p.ranks) * p.bytes, p.seconds});
  return fit_samples(samples, "all-reduce");
}

std::vector<ShardedFit> fit_sharded(std::vector<ShardedPoint>& points) {
  std::set<std::pair<std::string, int>> keys;
  for (const auto& p : points) keys.insert({p.op, p.ranks}), keys.insert({p.op, 0});
  std::vector<ShardedFit> fits;
  for (const auto& [op, n] : keys) {
    std::vector<Sample> samples;
    for (const auto& p : points)
      if (p.op == op && (n == 0 || p.ranks == n) && p.seconds > 0) samples.push_back(sample_of(p));
    if (samples.size() < 2) continue;
    const auto [a, beta] = fit_samples(samples, op);
    ShardedFit f{op, n, a, 1.0 / beta, 0};
    double weight = 0;
    for (auto& p : points) {
      if (p.op != op || (n != 0 && p.ranks != n) || p.seconds <= 0) continue;
      const Sample s = sample_of(p);
      const double fitted = s.x * a + s.y * beta;
      if (n != 0) p.fitted_seconds = fitted;
      weight += p.seconds;
      f.weighted_error += p.seconds * std::fabs(fitted / p.seconds - 1);
    }
    f.weighted_error /= weight;
    fits.push_back(f);
  }
  return fits;
}

void apply_sharded_fits(strategy::LinkSpec& link, const std::vector<ShardedFit>& fits, int world) {
  for (const char* op : {"reduce-scatter", "all-gather"}) {
    const ShardedFit* use = nullptr;
    for (const auto& f : fits)
      if (f.op == op && (world == 0 ? f.ranks == 0 : f.ranks > 0 && f.ranks <= world) && (!use || f.ranks > use->ranks))
        use = &f;
    if (!use) continue;
    const bool rs = std::string(op) == "reduce-scatter";
    (rs ? link.reduce_scatter_latency_seconds : link.all_gather_latency_seconds) = use->latency_seconds;
    (rs ? link.reduce_scatter_bytes_per_s : link.all_gather_bytes_per_s) = use->link_bytes_per_s;
  }
}

std::vector<RingFit> fit_rings(std::vector<AllReducePoint>& points) {
  std::set<int> counts;
  for (const auto& p : points) counts.insert(p.ranks);
  std::vector<RingFit> fits;
  for (int n : counts) {
    std::vector<AllReducePoint> big;
    for (const auto& p : points)
      if (p.ranks == n && judged(p.bytes)) big.push_back(p);
    if (big.size() < 2) continue;
    const auto [a, beta] = fit_alpha_beta(big);
    RingFit f{n, a, 1.0 / beta, 0, 0};
    double weight = 0;
    for (auto& p : points) {
      if (p.ranks != n) continue;
      p.fitted_seconds =
          strategy::ring_collective_seconds(strategy::CollectiveOp::kAllReduce, p.bytes, n, a, f.link_bytes_per_s);
      if (!judged(p.bytes)) continue;
      weight += p.seconds;
      f.weighted_error += p.seconds * std::fabs(p.fitted_seconds / p.seconds - 1);
      f.weighted_spread += p.seconds * p.spread;
    }
    f.weighted_error /= weight;
    f.weighted_spread /= weight;
    fits.push_back(f);
  }
  return fits;
}

std::vector<strategy::GemmRatePoint> RateGrid::device_points() const {
  std::vector<strategy::GemmRatePoint> out;
  for (const auto& p : points) out.push_back({p.microbatch, p.hidden, p.ffn, p.flops_per_s, p.forward_flops_per_s});
  return out;
}

double RateGrid::flops_per_s(int64_t microbatch, int64_t hidden, int64_t ffn) const {
  if (points.empty()) throw RuntimeError("calibrate: the rate grid is empty");
  return strategy::gemm_rate_at(device_points(), microbatch, hidden, ffn);
}

}  // namespace parlab::experiments
