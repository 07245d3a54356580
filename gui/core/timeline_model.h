#pragma once
// One simulated (or measured) step as an item model: the trace events the Chrome trace export
// writes (trace/trace.h), one row per op, times relative to the step's start. The timeline
// widget draws these rows; its "table" toggle shows them.
#include <vector>

#include "trace/trace.h"
#include "gui/core/table_model.h"

namespace parlab::gui {

class TimelineModel : public LabTableModel {
  Q_OBJECT
 public:
  enum Column { kRank, kStream, kName, kStart, kEnd, kDuration, kColumns };

  explicit TimelineModel(QObject* parent = nullptr);

  // Keeps the events of one step: those starting in [from, to) seconds, shifted to start at 0.
  void set_events(const std::vector<trace::Event>& events, double from, double to);
  void set_all(const std::vector<trace::Event>& events);  // already one step
  void clear();
  const std::vector<trace::Event>& events() const { return events_; }
  int ranks() const { return ranks_; }
  double span_seconds() const { return span_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

 private:
  std::vector<trace::Event> events_;
  int ranks_ = 0;
  double span_ = 0;
};

}  // namespace parlab::gui
