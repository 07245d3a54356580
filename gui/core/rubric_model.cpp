#include "gui/core/rubric_model.h"

#include <QStringList>
#include <QtConcurrent/QtConcurrent>

namespace parlab::gui {

namespace {

QString num(double v) { return QString::number(v, 'g', 4); }

QString measurements_text(const rubric::CriterionResult& c) {
  QStringList parts;
  for (const rubric::Measurement& m : c.measurements)
    parts << QStringLiteral("%1 %2 %3 %4 %5")
                 .arg(QString::fromStdString(m.figure), num(m.value), QString::fromStdString(m.op), num(m.threshold),
                      m.ok ? QStringLiteral("✓") : QStringLiteral("✗"));
  return parts.join(QStringLiteral("; "));
}

QString points_text(const rubric::CriterionResult& c) {
  // Blocked points are not part of the total: say so in the cell too.
  if (c.status == rubric::Status::kBlocked) return QObject::tr("(%1 blocked)").arg(num(c.max_points));
  return QStringLiteral("%1 / %2").arg(num(c.points), num(c.max_points));
}

}  // namespace

RubricModel::RubricModel(QObject* parent) : QAbstractTableModel(parent) {}

void RubricModel::set_report(rubric::Report report) {
  beginResetModel();
  report_ = std::move(report);
  endResetModel();
}

void RubricModel::clear() {
  beginResetModel();
  report_.reset();
  endResetModel();
}

int RubricModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() || !report_ ? 0 : int(report_->criteria.size());
}
int RubricModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : kColumns; }

QVariant RubricModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || !report_ || index.row() >= rowCount()) return {};
  const rubric::CriterionResult& c = criterion(index.row());
  if (role == Qt::UserRole) {
    switch (index.column()) {
      case kCriterion:
        return QString::fromStdString(c.id);
      case kStatus:
        return QString::fromUtf8(rubric::to_string(c.status));
      case kPoints:
        return c.points;
      default:
        return {};
    }
  }
  if (role == Qt::ToolTipRole) return QString::fromStdString(c.detail);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kCriterion:
      return QString::fromStdString(c.title);
    case kStatus:
      return QString::fromUtf8(rubric::to_string(c.status));
    case kPoints:
      return points_text(c);
    case kMeasured:
      return measurements_text(c);
    case kFix: {
      QString text = QString::fromStdString(c.fix.empty() ? c.detail : c.fix);
      if (!c.gated_by.empty()) text = QObject::tr("gated by %1: %2").arg(QString::fromStdString(c.gated_by), text);
      return text;
    }
    default:
      return {};
  }
}

QVariant RubricModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case kCriterion:
      return tr("Criterion");
    case kStatus:
      return tr("Status");
    case kPoints:
      return tr("Points");
    case kMeasured:
      return tr("Value vs threshold");
    case kFix:
      return tr("Why / how to get the points");
    default:
      return {};
  }
}

QString score_line(const rubric::Report& r) {
  return QObject::tr("Score %1 / %2 (%3%), pass mark %4%: %5")
      .arg(num(r.score), num(r.max_score))
      .arg(r.percent(), 0, 'f', 1)
      .arg(100 * r.pass_mark, 0, 'f', 0)
      .arg(r.passed ? QObject::tr("reached") : QObject::tr("not reached"));
}

QString blocked_line(const rubric::Report& r) {
  if (r.blocked_points <= 0)
    return QObject::tr("Nothing blocked on %1 hardware.").arg(QString::fromStdString(r.hardware));
  return QObject::tr("%1 points blocked (they need hardware this %2 machine lacks) and left out of the total.")
      .arg(num(r.blocked_points), QString::fromStdString(r.hardware));
}

GradeJob::GradeJob(QObject* parent) : QObject(parent) {}
GradeJob::~GradeJob() {
  // Grading has no cancellation point: it finishes in the pool and its result is dropped.
  watcher_ = nullptr;
}

void GradeJob::start(const std::string& db_path) {
  auto* w = new QFutureWatcher<GradeOutcome>(this);
  watcher_ = w;
  connect(w, &QFutureWatcher<GradeOutcome>::finished, this, [this, w] {
    w->deleteLater();
    if (w != watcher_) return;
    watcher_ = nullptr;
    emit done(w->result());
  });
  w->setFuture(QtConcurrent::run([db_path] {
    GradeOutcome o;
    try {
      o.report = rubric::grade_file(db_path, rubric::default_rubric(), {});
    } catch (const std::exception& e) {
      o.error = e.what();
    }
    return o;
  }));
}

}  // namespace parlab::gui
