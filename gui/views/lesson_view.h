#pragma once
// The Lesson view: the chapter's five steps as a guided path (the lab opens on it while the
// lesson is incomplete, and View > Lesson brings it back). The step list is a view over
// LessonModel (progress read from the results DB); each step is a LessonPage that asks first,
// then reveals with the lab's engines. It resumes at the first incomplete step.
#include <QWidget>

#include "gui/views/lesson_pages.h"

class QLabel;
class QListView;
class QPushButton;
class QStackedWidget;

namespace parlab::gui {

class LessonModel;

class LessonView : public QWidget {
  Q_OBJECT
 public:
  LessonView(const LessonOptions& options, QWidget* parent = nullptr);
  LessonModel* model() const { return model_; }
  // 1-based.
  void go_to(int step);
  int current_step() const;
  LessonPage* page(int step) const { return pages_[size_t(step - 1)]; }
  FitPage* fit_page() const;
  SplitPage* split_page() const;
  CommPage* comm_page() const;
  FaultPage* fault_page(int step) const;
  QPushButton* next_button() const { return next_; }
  QPushButton* back_button() const { return back_; }
  QListView* steps_list() const { return list_; }
  bool busy() const;
  // Reads the progress from the DB again.
  void reload();

 signals:
  // A committed answer or a reveal: the predictions, history and progress views read again.
  void progressed();

 private:
  void update_header();

  LessonOptions options_;
  LessonModel* model_;
  QListView* list_;
  QLabel* summary_;
  QStackedWidget* stack_;
  std::vector<LessonPage*> pages_;
  QPushButton* back_;
  QPushButton* next_;
};

}  // namespace parlab::gui
