#pragma once
// The guided lesson's five steps as a list model: each step's title and whether it is complete,
// read from the results DB's predictions rows by rubric::lesson_progress (the same reading the
// grader credits), so the lab resumes where the learner left it and the Progress view agrees.
#include <QAbstractListModel>
#include <string>

#include "rubric/lesson.h"

namespace parlab::gui {

class LessonModel : public QAbstractListModel {
  Q_OBJECT
 public:
  static constexpr int kCompleteRole = Qt::UserRole + 1;  // bool
  static constexpr int kNumberRole = Qt::UserRole + 2;    // 1-based step number

  explicit LessonModel(QObject* parent = nullptr);
  // Reads the progress again (a prediction was committed or revealed).
  void load(const std::string& db_path);
  const rubric::LessonProgress& progress() const { return progress_; }
  // The step to open on: the first incomplete one, the last when all are complete (1-based).
  int resume_step() const;

  int rowCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;

 signals:
  void changed();

 private:
  rubric::LessonProgress progress_;
};

}  // namespace parlab::gui
