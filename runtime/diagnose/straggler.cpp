#include "runtime/diagnose/straggler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "base/errors.h"
#include "base/stats.h"
#include "base/units.h"

namespace parlab::diagnose {
namespace {

using parlab::median;

}  // namespace

std::string StragglerReport::summary() const {
  if (stragglers.empty()) {
    char b[160];
    std::snprintf(b, sizeof b, "no straggler among %d ranks over %lld steps (%d windows)\n", ranks, (long long)steps,
                  windows);
    return b;
  }
  std::string out;
  for (const auto& s : stragglers) out += s.sentence + "\n";
  return out;
}

StragglerReport detect_stragglers(const std::vector<RankTiming>& timings, const StragglerOptions& o) {
  StragglerReport rep;
  char method[448];
  std::snprintf(method, sizeof method,
                "per-rank median compute over windows of %d steps; flagged when its modified z-score against the "
                "other ranks exceeds %.1f, it is more than %.2fx their median and its excess is at least %.0f%% of the "
                "median step; a straggler when flagged in at least %d windows and %.0f%% of them",
                o.window, o.z_threshold, o.ratio_threshold, 100 * o.min_cost_fraction, o.min_windows,
                100 * o.min_window_fraction);
  rep.method = method;
  std::map<int64_t, std::map<int, const RankTiming*>> by_step;
  for (const auto& t : timings) by_step[t.step][t.rank] = &t;
  std::map<int, Straggler> flagged;
  std::vector<int64_t> steps;
  for (const auto& [s, m] : by_step) steps.push_back(s);
  rep.steps = int64_t(steps.size());
  for (const auto& [s, m] : by_step) rep.ranks = std::max(rep.ranks, int(m.size()));
  if (rep.ranks < 2) return rep;
  const size_t window = size_t(std::max(1, o.window));
  // Window boundaries; a last window shorter than half of one joins the one before (a median
  // of a few steps is noise).
  std::vector<size_t> bounds;
  for (size_t b = 0; b < steps.size(); b += window) bounds.push_back(b);
  if (bounds.size() > 1 && steps.size() - bounds.back() < (window + 1) / 2) bounds.pop_back();
  bounds.push_back(steps.size());
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    const size_t begin = bounds[k], end = bounds[k + 1];
    ++rep.windows;
    std::map<int, std::vector<double>> compute;
    std::vector<double> step_times;
    for (size_t i = begin; i < end; ++i)
      for (const auto& [rank, t] : by_step[steps[i]]) {
        compute[rank].push_back(t->compute_seconds);
        step_times.push_back(t->step_seconds);
      }
    std::map<int, double> med;
    for (auto& [rank, v] : compute) med[rank] = median(v);
    const double step_median = median(step_times);
    for (const auto& [rank, m_r] : med) {
      std::vector<double> others;
      for (const auto& [r2, m2] : med)
        if (r2 != rank) others.push_back(m2);
      const double M = median(others);
      std::vector<double> dev;
      for (double x : others) dev.push_back(std::fabs(x - M));
      const double scale = std::max(1.4826 * median(dev), o.scale_floor * M);
      if (!(scale > 0)) continue;
      const double z = (m_r - M) / scale;
      const double ratio = M > 0 ? m_r / M : 0;
      if (z <= o.z_threshold || ratio <= o.ratio_threshold) continue;
      if (step_median > 0 && (m_r - M) / step_median < o.min_cost_fraction) continue;
      Straggler& s = flagged[rank];
      s.rank = rank;
      ++s.windows_flagged;
      if (ratio > s.ratio) {
        s.compute_seconds = m_r;
        s.others_median_seconds = M;
        s.ratio = ratio;
        s.z = z;
        s.cost_seconds_per_step = m_r - M;
        s.cost_fraction = step_median > 0 ? (m_r - M) / step_median : 0;
      }
    }
  }
  for (auto& [rank, s] : flagged) {
    if (s.windows_flagged < o.min_windows || s.windows_flagged < o.min_window_fraction * rep.windows) continue;
    char b[320];
    std::snprintf(b, sizeof b,
                  "rank %d is a straggler: its compute takes %.2fx the other ranks' median (%s vs %s per step, "
                  "z = %.0f) in %d of %d windows; every other rank waits about %s per step for it (%.0f%% of the step)",
                  rank, s.ratio, units::format_seconds(s.compute_seconds).c_str(),
                  units::format_seconds(s.others_median_seconds).c_str(), s.z, s.windows_flagged, rep.windows,
                  units::format_seconds(s.cost_seconds_per_step).c_str(), 100 * s.cost_fraction);
    s.sentence = b;
    rep.stragglers.push_back(s);
  }
  return rep;
}

std::vector<RankTiming> timings_from_run_dir(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw ConfigError("RUN_DIR", dir.string(), "is not a directory");
  std::map<std::pair<int64_t, int>, RankTiming> by_key;
  std::string unreadable;  // the first records file with a line that is not JSON, for the message
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (!(name.rfind("rank-", 0) == 0 && name.ends_with(".jsonl"))) continue;
    std::ifstream in(e.path());
    for (std::string line; std::getline(in, line);) {
      nlohmann::json j;
      try {
        j = nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception&) {
        if (unreadable.empty()) unreadable = e.path().string();
        continue;  // a torn last line of a killed worker
      }
      if (j.value("type", "") != "step") continue;
      RankTiming t;
      t.step = j.value("step", int64_t(0));
      t.rank = j.value("rank", 0);
      t.compute_seconds =
          j.value("forward_seconds", 0.0) + j.value("backward_seconds", 0.0) + j.value("optimizer_seconds", 0.0);
      t.step_seconds = j.value("step_seconds", 0.0);
      by_key[{t.step, t.rank}] = t;
    }
  }
  std::vector<RankTiming> out;
  for (const auto& [k, t] : by_key) out.push_back(t);
  if (out.empty() && !unreadable.empty())
    throw ConfigError("RUN_DIR", dir.string(), "holds no readable step record (" + unreadable + " is not JSON lines)");
  if (out.empty()) throw ConfigError("RUN_DIR", dir.string(), "holds no rank-*.jsonl step records");
  return out;
}

}  // namespace parlab::diagnose
