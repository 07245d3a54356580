#include "gui/views/timeline_widget.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QScrollArea>
#include <QToolTip>
#include <QWheelEvent>
#include <algorithm>

#include "gui/core/timeline_model.h"

namespace parlab::gui {

namespace {
constexpr int kLeft = 120, kTop = 24, kLane = 22, kGap = 6;

QColor color_of(const std::string& name) {
  auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  if (has("forward") || has("fwd")) return QColor(70, 120, 190);
  if (has("backward") || has("bwd")) return QColor(90, 160, 80);
  if (has("optim") || has("zero-grad")) return QColor(150, 90, 170);
  if (has("send") || has("recv")) return QColor(200, 60, 60);
  if (has("all-reduce") || has("reduce-scatter") || has("all-gather") || has("broadcast")) return QColor(235, 150, 40);
  return QColor(140, 140, 140);
}
}  // namespace

TimelineWidget::TimelineWidget(TimelineModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);
  setAccessibleName(tr("timeline"));
  connect(model_, &TimelineModel::changed, this, [this] {
    current_ = -1;
    resize_to_zoom();
    update();
  });
  resize_to_zoom();
}

QSize TimelineWidget::sizeHint() const {
  const int lanes = std::max(1, model_->ranks()) * 2;
  return {int(kLeft + viewport_width_ * zoom_), kTop + lanes * kLane + model_->ranks() * kGap + 30};
}

void TimelineWidget::follow(QScrollArea* area) {
  area_ = area;
  area->viewport()->installEventFilter(this);
}

bool TimelineWidget::eventFilter(QObject* watched, QEvent* event) {
  if (area_ && watched == area_->viewport() && event->type() == QEvent::Resize) resize_to_zoom();
  return QWidget::eventFilter(watched, event);
}

void TimelineWidget::resize_to_zoom() {
  if (area_) viewport_width_ = std::max(300, area_->viewport()->width() - kLeft - 16);
  resize(sizeHint());
  setMinimumSize(sizeHint());
}

void TimelineWidget::set_axis_seconds(double seconds) {
  axis_ = seconds;
  update();
}

double TimelineWidget::axis_seconds() const { return axis_ > 0 ? axis_ : model_->span_seconds(); }

void TimelineWidget::set_zoom(double z) {
  zoom_ = std::clamp(z, 1.0, 512.0);
  resize_to_zoom();
  update();
}

int TimelineWidget::lane_of(int rank, const std::string& stream) const {
  return rank * 2 + (stream == "compute" ? 0 : 1);
}

QRectF TimelineWidget::box_of(int row) const {
  const trace::Event& e = model_->events()[size_t(row)];
  const double span = axis_seconds() > 0 ? axis_seconds() : 1;
  const double scale = viewport_width_ * zoom_ / span;
  const int lane = lane_of(e.rank, e.stream);
  const double y = kTop + lane * kLane + e.rank * kGap;
  return {kLeft + e.start_seconds * scale, y + 2, std::max(1.0, (e.end_seconds - e.start_seconds) * scale),
          kLane - 4.0};
}

void TimelineWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  if (model_->rowCount() == 0) {
    p.drawText(rect(), Qt::AlignCenter, tr("No timeline yet: simulate a step, or run for real with a trace."));
    return;
  }
  const double span = axis_seconds();
  const double width = viewport_width_ * zoom_;
  // Lanes: the compute lane's background is the bubble/idle colour, so gaps read as waiting.
  for (int r = 0; r < model_->ranks(); ++r) {
    for (int s = 0; s < 2; ++s) {
      const double y = kTop + (r * 2 + s) * kLane + r * kGap;
      p.fillRect(QRectF(kLeft, y + 2, width, kLane - 4), s == 0 ? QColor(245, 225, 225) : QColor(240, 240, 240));
      p.setPen(palette().text().color());
      p.drawText(QRectF(4, y, kLeft - 8, kLane), Qt::AlignVCenter | Qt::AlignRight,
                 QStringLiteral("rank %1 %2").arg(r).arg(s == 0 ? "compute" : "comm"));
    }
  }
  for (int i = 0; i < model_->rowCount(); ++i) {
    const QRectF b = box_of(i);
    const trace::Event& e = model_->events()[size_t(i)];
    p.fillRect(b, color_of(e.name));
    if (i == current_) {
      p.setPen(QPen(Qt::black, 2));
      p.drawRect(b);
    }
    if (b.width() > 40) {
      p.setPen(Qt::white);
      p.drawText(b.adjusted(2, 0, -2, 0), Qt::AlignVCenter | Qt::AlignLeft,
                 p.fontMetrics().elidedText(QString::fromStdString(e.name), Qt::ElideRight, int(b.width()) - 4));
    }
  }
  // Time axis: five ticks.
  p.setPen(palette().text().color());
  for (int t = 0; t <= 5; ++t) {
    const double x = kLeft + width * t / 5;
    p.drawLine(QPointF(x, kTop - 6), QPointF(x, kTop));
    p.drawText(QPointF(x + 2, kTop - 8), QString::number(span * t / 5 * 1e3, 'g', 4) + " ms");
  }
}

int TimelineWidget::row_at(QPointF pos) const {
  for (int i = 0; i < model_->rowCount(); ++i)
    if (box_of(i).contains(pos)) return i;
  return -1;
}

QString TimelineWidget::details(int row) const {
  if (row < 0 || row >= model_->rowCount()) return {};
  const trace::Event& e = model_->events()[size_t(row)];
  QString s = tr("rank %1 %2: %3, %4 – %5 ms (%6 ms)")
                  .arg(e.rank)
                  .arg(QString::fromStdString(e.stream), QString::fromStdString(e.name))
                  .arg(e.start_seconds * 1e3, 0, 'f', 3)
                  .arg(e.end_seconds * 1e3, 0, 'f', 3)
                  .arg((e.end_seconds - e.start_seconds) * 1e3, 0, 'f', 3);
  for (const auto& [k, v] : e.args)
    s += QStringLiteral("; %1 %2").arg(QString::fromStdString(k), QString::fromStdString(v));
  return s;
}

void TimelineWidget::set_current(int row) {
  current_ = row;
  update();
  emit current_changed(row, details(row));
}

void TimelineWidget::mouseMoveEvent(QMouseEvent* e) {
  const int row = row_at(e->position());
  if (row != current_) set_current(row);
  if (row >= 0) QToolTip::showText(e->globalPosition().toPoint(), details(row), this);
}

void TimelineWidget::wheelEvent(QWheelEvent* e) {
  if (!(e->modifiers() & Qt::ControlModifier)) {
    QWidget::wheelEvent(e);  // the scroll area scrolls
    return;
  }
  set_zoom(zoom_ * (e->angleDelta().y() > 0 ? 1.25 : 0.8));
  e->accept();
}

void TimelineWidget::keyPressEvent(QKeyEvent* e) {
  switch (e->key()) {
    case Qt::Key_Plus:
    case Qt::Key_Equal:
      set_zoom(zoom_ * 1.5);
      break;
    case Qt::Key_Minus:
      set_zoom(zoom_ / 1.5);
      break;
    case Qt::Key_0:
      set_zoom(1);
      break;
    case Qt::Key_Right:
      set_current(std::min(model_->rowCount() - 1, current_ + 1));
      break;
    case Qt::Key_Left:
      set_current(std::max(0, current_ - 1));
      break;
    default:
      QWidget::keyPressEvent(e);
  }
}

}  // namespace parlab::gui
