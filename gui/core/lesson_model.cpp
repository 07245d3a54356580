#include "gui/core/lesson_model.h"

#include <filesystem>

#include "db/results_store.h"

namespace parlab::gui {

LessonModel::LessonModel(QObject* parent) : QAbstractListModel(parent) {
  progress_ = rubric::lesson_progress(std::vector<rubric::Prediction>{});
}

void LessonModel::load(const std::string& db_path) {
  beginResetModel();
  try {
    if (std::filesystem::exists(db_path)) {
      auto store = db::ResultsStore::open(db_path);
      progress_ = rubric::lesson_progress(store);
    } else {
      progress_ = rubric::lesson_progress(std::vector<rubric::Prediction>{});
    }
  } catch (const std::exception&) {
    // An unreadable DB: the history view says why; the lesson starts at step 1.
    progress_ = rubric::lesson_progress(std::vector<rubric::Prediction>{});
  }
  endResetModel();
  emit changed();
}

int LessonModel::resume_step() const {
  return progress_.next_step > 0 ? progress_.next_step : int(progress_.steps.size());
}

int LessonModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : int(progress_.steps.size());
}

QVariant LessonModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || index.row() >= rowCount()) return {};
  const rubric::LessonStepProgress& s = progress_.steps[size_t(index.row())];
  switch (role) {
    case Qt::DisplayRole:
      return QString("%1  %2. %3")
          .arg(s.complete ? QString::fromUtf8("✓") : QString::fromUtf8("○"))
          .arg(s.number)
          .arg(QString::fromStdString(s.title));
    case Qt::ToolTipRole:
      return s.complete ? tr("Complete: every question answered before its reveal") : tr("Not complete yet");
    case Qt::AccessibleTextRole:
      return QString("step %1, %2, %3")
          .arg(s.number)
          .arg(QString::fromStdString(s.title))
          .arg(s.complete ? tr("complete") : tr("not complete"));
    case kCompleteRole:
      return s.complete;
    case kNumberRole:
      return s.number;
    default:
      return {};
  }
}

}  // namespace parlab::gui
