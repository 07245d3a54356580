#pragma once
// What every table model of the lab shares: a fixed list of named columns, a raw-value role
// beside the display text, and a changed() signal for the views that redraw as a whole (plots).
// A model supplies its rows (rowCount) and cells (data); in_range() is the check data() starts with.
#include <QAbstractTableModel>
#include <vector>

namespace parlab::gui {

class LabTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  static constexpr int kValueRole = Qt::UserRole + 1;  // the raw value (a double, an int, a bool)

  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 signals:
  void changed();

 protected:
  // `headers`: the columns' names in order (string literals).
  LabTableModel(std::vector<const char*> headers, QObject* parent);
  // A valid index inside the table (a cell data() may answer for).
  bool in_range(const QModelIndex& index) const;

 private:
  std::vector<const char*> headers_;
};

}  // namespace parlab::gui
