#include "runtime/launch/progress.h"

#include <algorithm>
#include <cstdio>

#include "base/units.h"

namespace parlab::launch {

RunProgress::RunProgress(int world, int64_t steps) : world_(world), steps_(steps) {}

std::optional<StepSummary> RunProgress::add(const train::StepRecord& record) {
  by_rank_[record.rank].push_back(record);
  auto& got = pending_[record.step];
  got.push_back(record);
  if (static_cast<int>(got.size()) < world_) return std::nullopt;

  StepSummary s;
  s.step = record.step;
  s.epoch = record.epoch;
  s.global_batch = record.global_batch;
  double loss_sum = 0;
  for (const train::StepRecord& r : got) {
    loss_sum += r.loss_sum;
    s.step_seconds = std::max(s.step_seconds, r.times.step_seconds);
    s.end_seconds = std::max(s.end_seconds, r.end_seconds);
  }
  s.loss = s.global_batch > 0 ? loss_sum / static_cast<double>(s.global_batch) : 0.0;
  s.samples_per_s = s.step_seconds > 0 ? static_cast<double>(s.global_batch) / s.step_seconds : 0.0;
  pending_.erase(record.step);
  seconds_sum_ += s.step_seconds;
  done_.push_back(s);
  const double mean = seconds_sum_ / static_cast<double>(done_.size());
  s.eta_seconds = mean * static_cast<double>(std::max<int64_t>(0, steps_ - 1 - s.step));
  done_.back() = s;
  return s;
}

std::vector<RankSummary> RunProgress::rank_table() const {
  std::vector<RankSummary> out;
  for (const auto& [rank, records] : by_rank_) {
    RankSummary row;
    row.rank = rank;
    const size_t skip = records.size() > 1 ? 1 : 0;
    train::StepTimes& m = row.mean;
    for (size_t i = skip; i < records.size(); ++i) {
      const train::StepTimes& t = records[i].times;
      m.data_seconds += t.data_seconds;
      m.forward_seconds += t.forward_seconds;
      m.backward_seconds += t.backward_seconds;
      m.exposed_comm_seconds += t.exposed_comm_seconds;
      m.optimizer_seconds += t.optimizer_seconds;
      m.idle_seconds += t.idle_seconds;
      m.step_seconds += t.step_seconds;
      m.comm_seconds += t.comm_seconds;
    }
    row.steps = static_cast<int64_t>(records.size() - skip);
    const double n = std::max<double>(1.0, static_cast<double>(row.steps));
    for (double* v : {&m.data_seconds, &m.forward_seconds, &m.backward_seconds, &m.exposed_comm_seconds,
                      &m.optimizer_seconds, &m.idle_seconds, &m.step_seconds, &m.comm_seconds})
      *v /= n;
    out.push_back(row);
  }
  return out;
}

std::string format_progress(const StepSummary& s, int64_t steps) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "step %lld/%lld  loss %.4f  %.1f samples/s  %s/step  ETA %s",
                static_cast<long long>(s.step + 1), static_cast<long long>(steps), s.loss, s.samples_per_s,
                units::format_seconds(s.step_seconds).c_str(), units::format_seconds(s.eta_seconds).c_str());
  return buf;
}

}  // namespace parlab::launch
