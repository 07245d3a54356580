#include "gui/core/timeline_model.h"

#include <algorithm>

namespace parlab::gui {

TimelineModel::TimelineModel(QObject* parent)
    : LabTableModel({"rank", "stream", "op", "start", "end", "duration"}, parent) {}

void TimelineModel::set_events(const std::vector<trace::Event>& events, double from, double to) {
  std::vector<trace::Event> kept;
  for (const trace::Event& e : events) {
    if (e.start_seconds < from || e.start_seconds >= to) continue;
    trace::Event s = e;
    s.start_seconds -= from;
    s.end_seconds -= from;
    kept.push_back(std::move(s));
  }
  set_all(kept);
}

void TimelineModel::set_all(const std::vector<trace::Event>& events) {
  beginResetModel();
  events_ = events;
  std::sort(events_.begin(), events_.end(), [](const trace::Event& a, const trace::Event& b) {
    return std::tie(a.rank, a.stream, a.start_seconds, a.name) < std::tie(b.rank, b.stream, b.start_seconds, b.name);
  });
  ranks_ = 0;
  span_ = 0;
  for (const trace::Event& e : events_) {
    ranks_ = std::max(ranks_, e.rank + 1);
    span_ = std::max(span_, e.end_seconds);
  }
  endResetModel();
  emit changed();
}

void TimelineModel::clear() { set_all({}); }

int TimelineModel::rowCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : int(events_.size()); }

QVariant TimelineModel::data(const QModelIndex& index, int role) const {
  if (!in_range(index)) return {};
  const trace::Event& e = events_[size_t(index.row())];
  const double seconds[] = {0, 0, 0, e.start_seconds, e.end_seconds, e.end_seconds - e.start_seconds};
  if (role == kValueRole) {
    if (index.column() == kRank) return e.rank;
    if (index.column() >= kStart) return seconds[index.column()];
  }
  if (role == Qt::DisplayRole || role == kValueRole) {
    switch (index.column()) {
      case kRank:
        return e.rank;
      case kStream:
        return QString::fromStdString(e.stream);
      case kName:
        return QString::fromStdString(e.name);
      default:
        return QString::number(seconds[index.column()] * 1e3, 'f', 3) + " ms";
    }
  }
  if (role == Qt::ToolTipRole) {
    QString tip = QString::fromStdString(e.name);
    for (const auto& [k, v] : e.args) tip += "\n" + QString::fromStdString(k) + ": " + QString::fromStdString(v);
    return tip;
  }
  return {};
}

}  // namespace parlab::gui
