#include "gui/views/progress_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "gui/core/rubric_model.h"

namespace parlab::gui {

ProgressView::ProgressView(RubricModel* model, std::string db_path, QWidget* parent)
    : QWidget(parent), model_(model), db_path_(std::move(db_path)) {
  job_ = new GradeJob(this);
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  score_ = new QLabel(this);
  QFont bold = score_->font();
  bold.setBold(true);
  score_->setFont(bold);
  score_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  refresh_ = new QPushButton(tr("&Refresh"), this);
  bar->addWidget(score_, 1);
  bar->addWidget(refresh_);
  layout->addLayout(bar);
  blocked_ = new QLabel(this);
  blocked_->setWordWrap(true);
  layout->addWidget(blocked_);
  table_ = new QTableView(this);
  table_->setModel(model_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setWordWrap(true);
  // Titles, measurements and fixes are sentences: wrap them in columns of a fixed share
  // rather than one line as wide as the longest.
  QHeaderView* h = table_->horizontalHeader();
  h->setSectionResizeMode(QHeaderView::Interactive);
  h->setSectionResizeMode(RubricModel::kStatus, QHeaderView::ResizeToContents);
  h->setSectionResizeMode(RubricModel::kPoints, QHeaderView::ResizeToContents);
  h->setStretchLastSection(true);
  h->resizeSection(RubricModel::kCriterion, 300);
  h->resizeSection(RubricModel::kMeasured, 300);
  table_->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setAccessibleName(tr("rubric criteria"));
  layout->addWidget(table_, 1);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  layout->addWidget(status_);
  connect(refresh_, &QPushButton::clicked, this, &ProgressView::refresh);
  connect(job_, &GradeJob::done, this, &ProgressView::on_graded);
  refresh();
}

QString ProgressView::score_text() const { return score_->text(); }
QString ProgressView::status() const { return status_->text(); }

void ProgressView::refresh() {
  refresh_->setEnabled(false);
  status_->setText(tr("Grading %1 …").arg(QString::fromStdString(db_path_)));
  job_->start(db_path_);
}

void ProgressView::on_graded(const GradeOutcome& o) {
  refresh_->setEnabled(true);
  if (!o.report) {
    model_->clear();
    score_->setText(tr("No grade yet"));
    blocked_->clear();
    status_->setText(QString::fromStdString(o.error));
    return;
  }
  model_->set_report(*o.report);
  score_->setText(score_line(*o.report));
  blocked_->setText(blocked_line(*o.report));
  status_->setText(tr("Graded %1 at %2 against %3 (%4 proofs)")
                       .arg(QString::fromStdString(o.report->db_path), QString::fromStdString(o.report->graded_at),
                            QString::fromStdString(o.report->rubric_title))
                       .arg(o.report->proofs));
}

}  // namespace parlab::gui
