#pragma once
// Our charting adapter: views describe a chart as data (ChartSpec) and hand it to a Chart;
// only qtcharts_chart.cpp knows Qt Charts. Qt Charts is deprecated from Qt 6.10 in favour of
// Qt Graphs: a Qt Graphs implementation of Chart replaces that one file.
#include <QColor>
#include <QPointF>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <optional>
#include <vector>

namespace parlab::gui {

struct ChartSeries {
  // kOutline: the plan before the last change, drawn faintly under the current one (bar charts:
  // each category's bar as an outline; x-y charts: a thin line).
  enum Kind { kLine, kPoints, kBars, kOutline };
  QString name;
  Kind kind = kLine;
  // Lines and points: (x, y). Bars: y per category, x = the category's index.
  std::vector<QPointF> points;
  QColor color;         // invalid: the chart's palette
  bool dashed = false;  // lines: told apart from a series drawn on top of it
};

struct ChartSpec {
  QString title, x_title, y_title;
  QStringList categories;  // set: a bar chart over these categories (bars are stacked)
  std::vector<ChartSeries> series;
  std::optional<double> reference;  // a horizontal line (the device capacity)
  QString reference_name;
  bool log2_x = false;  // worker counts 1, 2, 4, ... evenly spaced
};

class Chart : public QWidget {
 public:
  using QWidget::QWidget;
  virtual void show_spec(const ChartSpec& spec) = 0;
  // What is drawn now (the tests read it back).
  const ChartSpec& spec() const { return spec_; }
  const ChartSeries* series(const QString& name) const {
    for (const ChartSeries& s : spec_.series)
      if (s.name == name) return &s;
    return nullptr;
  }

 protected:
  ChartSpec spec_;
};

// The implementation this build uses (Qt Charts).
Chart* make_chart(QWidget* parent);

}  // namespace parlab::gui
