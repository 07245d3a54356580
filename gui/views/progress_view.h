#pragma once
// Progress: the learner's standing against the course rubric, graded by the same library as
// `parlab grade` (rubric/grade.h) on the lab's results DB. Per criterion its status, points,
// measured value beside its threshold and how to get the points; the total against the pass
// mark, and blocked points apart. Refresh grades again (off the UI thread).
#include <QWidget>
#include <string>

class QLabel;
class QPushButton;
class QTableView;

namespace parlab::gui {

class GradeJob;
class RubricModel;
struct GradeOutcome;

class ProgressView : public QWidget {
  Q_OBJECT
 public:
  ProgressView(RubricModel* model, std::string db_path, QWidget* parent = nullptr);
  void refresh();
  GradeJob* job() const { return job_; }
  QString score_text() const;
  QString status() const;
  QTableView* table() const { return table_; }

 private:
  void on_graded(const GradeOutcome& outcome);

  RubricModel* model_;
  std::string db_path_;
  GradeJob* job_;
  QPushButton* refresh_;
  QLabel* score_;
  QLabel* blocked_;
  QTableView* table_;
  QLabel* status_;
};

}  // namespace parlab::gui
