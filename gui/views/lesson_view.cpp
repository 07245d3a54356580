#include "gui/views/lesson_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QListView>
#include <QPushButton>
#include <QScrollArea>
#include <QStackedWidget>
#include <QVBoxLayout>

#include "gui/core/lesson_model.h"

namespace parlab::gui {

LessonView::LessonView(const LessonOptions& options, QWidget* parent) : QWidget(parent), options_(options) {
  model_ = new LessonModel(this);
  model_->load(options.lab.db.toStdString());
  auto* outer = new QHBoxLayout(this);
  auto* side = new QVBoxLayout();
  auto* title = new QLabel(tr("<b>The lesson</b><br><small>Choose data, sharded, tensor or pipeline parallelism: "
                              "predict each answer, then reveal it with the lab.</small>"),
                           this);
  title->setWordWrap(true);
  side->addWidget(title);
  list_ = new QListView(this);
  list_->setModel(model_);
  list_->setAccessibleName(tr("lesson steps"));
  list_->setMaximumWidth(300);
  list_->setWordWrap(true);
  side->addWidget(list_, 1);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  side->addWidget(summary_);
  outer->addLayout(side);

  auto* main = new QVBoxLayout();
  stack_ = new QStackedWidget(this);
  pages_ = {new FitPage(options), new SplitPage(options), new CommPage(options),
            new FaultPage(options, FaultPage::kHang), new FaultPage(options, FaultPage::kKillResume)};
  for (LessonPage* p : pages_) {
    auto* area = new QScrollArea(stack_);
    area->setWidget(p);
    area->setWidgetResizable(true);
    stack_->addWidget(area);
    p->resume(model_->progress());
    connect(p, &LessonPage::progressed, this, [this] {
      reload();
      emit progressed();
    });
  }
  main->addWidget(stack_, 1);
  auto* nav = new QHBoxLayout();
  back_ = new QPushButton(tr("◀ &Back"), this);
  next_ = new QPushButton(tr("&Next step ▶"), this);
  nav->addWidget(back_);
  nav->addStretch(1);
  nav->addWidget(next_);
  main->addLayout(nav);
  outer->addLayout(main, 1);

  connect(list_, &QListView::activated, this, [this](const QModelIndex& i) { go_to(i.row() + 1); });
  connect(list_, &QListView::clicked, this, [this](const QModelIndex& i) { go_to(i.row() + 1); });
  connect(back_, &QPushButton::clicked, this, [this] { go_to(current_step() - 1); });
  connect(next_, &QPushButton::clicked, this, [this] { go_to(current_step() + 1); });
  connect(model_, &LessonModel::changed, this, &LessonView::update_header);
  go_to(model_->resume_step());
}

FitPage* LessonView::fit_page() const { return static_cast<FitPage*>(pages_[0]); }
SplitPage* LessonView::split_page() const { return static_cast<SplitPage*>(pages_[1]); }
CommPage* LessonView::comm_page() const { return static_cast<CommPage*>(pages_[2]); }
FaultPage* LessonView::fault_page(int step) const { return static_cast<FaultPage*>(pages_[size_t(step - 1)]); }

int LessonView::current_step() const { return stack_->currentIndex() + 1; }

bool LessonView::busy() const {
  for (const LessonPage* p : pages_)
    if (p->busy()) return true;
  return false;
}

void LessonView::go_to(int step) {
  if (step < 1 || step > int(pages_.size())) return;
  stack_->setCurrentIndex(step - 1);
  list_->setCurrentIndex(model_->index(step - 1));
  update_header();
}

void LessonView::reload() {
  const int step = current_step();
  model_->load(options_.lab.db.toStdString());
  list_->setCurrentIndex(model_->index(step - 1));
}

void LessonView::update_header() {
  const rubric::LessonProgress& p = model_->progress();
  summary_->setText(
      p.next_step == 0
          ? tr("<b>All %1 steps complete.</b> <code>parlab grade</code> credits the lesson (criterion <i>lesson</i>).")
                .arg(p.steps.size())
          : tr("%1 of %2 steps complete. Your answers are kept in the results database; the "
               "lesson resumes at step %3.")
                .arg(p.completed)
                .arg(p.steps.size())
                .arg(p.next_step));
  back_->setEnabled(current_step() > 1);
  next_->setEnabled(current_step() < int(pages_.size()));
}

}  // namespace parlab::gui
