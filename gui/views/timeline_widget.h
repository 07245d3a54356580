#pragma once
// Draws a TimelineModel: per rank a compute and a comm lane, one box per op (forward,
// backward, optimizer, collectives, send/recv), gaps on the compute lane are the bubble and
// waiting. Zoom with Ctrl+wheel or +/-, 0 resets; hover (or Left/Right for the keyboard)
// shows an op's details.
#include <QWidget>

class QScrollArea;

namespace parlab::gui {

class TimelineModel;

class TimelineWidget : public QWidget {
  Q_OBJECT
 public:
  TimelineWidget(TimelineModel* model, QWidget* parent = nullptr);
  // Follows the width of the scroll area it is shown in (zoom 1 fits its viewport).
  void follow(QScrollArea* area);
  double zoom() const { return zoom_; }
  void set_zoom(double z);
  // The op under the mouse or chosen by keyboard: row of the model, -1 none.
  int current() const { return current_; }
  void set_current(int row);
  QString details(int row) const;
  QSize sizeHint() const override;
  // The time the full width stands for (0: the model's own span), so that two timelines share
  // one axis.
  void set_axis_seconds(double seconds);
  double axis_seconds() const;

 signals:
  void current_changed(int row, const QString& details);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void wheelEvent(QWheelEvent*) override;
  void keyPressEvent(QKeyEvent*) override;

 private:
  QRectF box_of(int row) const;
  int lane_of(int rank, const std::string& stream) const;
  int row_at(QPointF p) const;
  void resize_to_zoom();

  TimelineModel* model_;
  double zoom_ = 1.0;
  double axis_ = 0;
  int current_ = -1;
  int viewport_width_ = 900;
  QScrollArea* area_ = nullptr;
};

}  // namespace parlab::gui
