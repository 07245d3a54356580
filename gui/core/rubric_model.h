#pragma once
// The learner's standing against the course rubric, as an item model over the grader's Report
// (rubric/grade.h): one row per criterion. Every figure shown is the Report's; the model only
// formats. GradeJob grades the lab's results DB off the UI thread.
#include <QAbstractTableModel>
#include <QFutureWatcher>
#include <QObject>
#include <optional>
#include <string>

#include "rubric/grade.h"

namespace parlab::gui {

class RubricModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column { kCriterion, kStatus, kPoints, kMeasured, kFix, kColumns };
  // Qt::UserRole gives the raw value: the criterion id (kCriterion), the status word (kStatus),
  // the points earned as a double (kPoints).
  explicit RubricModel(QObject* parent = nullptr);

  void set_report(rubric::Report report);
  void clear();
  const std::optional<rubric::Report>& report() const { return report_; }
  const rubric::CriterionResult& criterion(int row) const { return report_->criteria[size_t(row)]; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::optional<rubric::Report> report_;
};

// "Score 12 / 40 (30.0%), pass mark 80%: not reached" and the blocked points apart, from the Report.
QString score_line(const rubric::Report& report);
QString blocked_line(const rubric::Report& report);

struct GradeOutcome {
  std::optional<rubric::Report> report;
  std::string error;  // the grader's message (no database yet, unreadable file)
};

// rubric::grade_file on a pool thread: grading reads every proof and digests the file, which
// takes long enough on a full DB to freeze the window. The newest request wins.
class GradeJob : public QObject {
  Q_OBJECT
 public:
  explicit GradeJob(QObject* parent = nullptr);
  ~GradeJob() override;
  void start(const std::string& db_path);
  bool running() const { return watcher_ != nullptr; }

 signals:
  void done(const parlab::gui::GradeOutcome& outcome);

 private:
  QFutureWatcher<GradeOutcome>* watcher_ = nullptr;
};

}  // namespace parlab::gui
