// The Chart adapter on Qt Charts (Qt 6.4 as Debian 12 ships it). The only file that includes
// Qt Charts headers.
#include <QChart>
#include <QChartView>
#include <QBarCategoryAxis>
#include <QBarSet>
#include <QLegend>
#include <QLineSeries>
#include <QLogValueAxis>
#include <QScatterSeries>
#include <QStackedBarSeries>
#include <QValueAxis>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "gui/views/chart.h"

namespace parlab::gui {

namespace {

class QtChartsChart : public Chart {
 public:
  explicit QtChartsChart(QWidget* parent) : Chart(parent) {
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    view_ = new QChartView(this);
    view_->setRenderHint(QPainter::Antialiasing);
    view_->setFocusPolicy(Qt::NoFocus);
    layout->addWidget(view_);
    setFocusPolicy(Qt::NoFocus);
  }

  void show_spec(const ChartSpec& spec) override {
    spec_ = spec;
    auto* chart = new QChart();
    chart->setTitle(spec.title);
    chart->legend()->setAlignment(Qt::AlignBottom);
    chart->setMargins(QMargins(4, 4, 4, 4));
    if (!spec.categories.isEmpty())
      build_bars(chart, spec);
    else
      build_xy(chart, spec);
    QChart* old = view_->chart();
    view_->setChart(chart);
    delete old;
  }

 private:
  static void build_bars(QChart* chart, const ChartSpec& spec) {
    auto* bars = new QStackedBarSeries();
    double top = 0;
    std::vector<double> sums(size_t(spec.categories.size()), 0.0);
    for (const ChartSeries& s : spec.series) {
      if (s.kind != ChartSeries::kBars) continue;
      auto* set = new QBarSet(s.name);
      if (s.color.isValid()) set->setColor(s.color);
      std::vector<double> ys(size_t(spec.categories.size()), 0.0);
      for (const QPointF& p : s.points)
        if (p.x() >= 0 && p.x() < spec.categories.size()) ys[size_t(p.x())] = p.y();
      for (size_t i = 0; i < ys.size(); ++i) {
        *set << ys[i];
        sums[i] += ys[i];
      }
      bars->append(set);
    }
    for (double v : sums) top = std::max(top, v);
    for (const ChartSeries& s : spec.series)
      if (s.kind == ChartSeries::kOutline)
        for (const QPointF& p : s.points) top = std::max(top, p.y());
    chart->addSeries(bars);
    auto* x = new QBarCategoryAxis();
    x->append(spec.categories);
    x->setTitleText(spec.x_title);
    auto* y = new QValueAxis();
    y->setTitleText(spec.y_title);
    if (spec.reference) top = std::max(top, *spec.reference);
    y->setRange(0, top > 0 ? top * 1.1 : 1);
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    bars->attachAxis(x);
    bars->attachAxis(y);
    // Lines over the categories go on a hidden value axis of the same extent.
    QValueAxis* hx = nullptr;
    const auto over_categories = [&](QLineSeries* line) {
      if (!hx) {
        hx = new QValueAxis();
        hx->setRange(-0.5, spec.categories.size() - 0.5);
        hx->setVisible(false);
        chart->addAxis(hx, Qt::AlignTop);
      }
      chart->addSeries(line);
      line->attachAxis(hx);
      line->attachAxis(y);
    };
    for (const ChartSeries& s : spec.series) {
      if (s.kind != ChartSeries::kOutline) continue;
      // Each bar of the plan before as an outline a little wider than the bars (0.5 of a category).
      auto* line = new QLineSeries();
      line->setName(s.name);
      for (const QPointF& p : s.points) {
        if (p.x() < 0 || p.x() >= spec.categories.size()) continue;
        line->append(p.x() - 0.32, 0);
        line->append(p.x() - 0.32, p.y());
        line->append(p.x() + 0.32, p.y());
        line->append(p.x() + 0.32, 0);
      }
      QPen pen(s.color.isValid() ? s.color : QColor(90, 90, 90, 150));
      pen.setWidth(2);
      pen.setStyle(Qt::DashLine);
      line->setPen(pen);
      over_categories(line);
    }
    if (spec.reference) {
      auto* line = new QLineSeries();
      line->setName(spec.reference_name);
      line->append(-0.5, *spec.reference);
      line->append(spec.categories.size() - 0.5, *spec.reference);
      QPen pen(QColor(200, 30, 30));
      pen.setWidth(2);
      pen.setStyle(Qt::DashLine);
      line->setPen(pen);
      over_categories(line);
    }
  }

  static void build_xy(QChart* chart, const ChartSpec& spec) {
    double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
    for (const ChartSeries& s : spec.series)
      for (const QPointF& p : s.points) {
        xmin = std::min(xmin, p.x());
        xmax = std::max(xmax, p.x());
        ymax = std::max(ymax, p.y());
      }
    if (!std::isfinite(xmin)) xmin = 1, xmax = 2;
    if (xmax <= xmin) xmax = xmin + 1;
    QAbstractAxis* x;
    if (spec.log2_x && xmin > 0) {
      auto* lx = new QLogValueAxis();
      lx->setBase(2);
      lx->setLabelFormat("%g");
      lx->setRange(xmin / 1.2, xmax * 1.2);
      x = lx;
    } else {
      auto* vx = new QValueAxis();
      vx->setRange(xmin, xmax);
      vx->setLabelFormat("%g");
      x = vx;
    }
    x->setTitleText(spec.x_title);
    auto* y = new QValueAxis();
    y->setTitleText(spec.y_title);
    y->setRange(0, ymax > 0 ? ymax * 1.15 : 1);
    y->setLabelFormat("%.3g");
    chart->addAxis(x, Qt::AlignBottom);
    chart->addAxis(y, Qt::AlignLeft);
    for (const ChartSeries& s : spec.series) {
      QXYSeries* xy;
      if (s.kind == ChartSeries::kPoints) {
        auto* sc = new QScatterSeries();
        sc->setMarkerSize(11);
        xy = sc;
      } else {
        auto* line = new QLineSeries();
        line->setPointsVisible(true);
        xy = line;
      }
      xy->setName(s.name);
      if (s.color.isValid()) xy->setColor(s.color);
      if (s.dashed) {
        QPen pen = xy->pen();
        pen.setStyle(Qt::DashLine);
        pen.setWidth(3);
        xy->setPen(pen);
      }
      if (s.kind == ChartSeries::kOutline) {
        static_cast<QLineSeries*>(xy)->setPointsVisible(false);
        QPen pen(s.color.isValid() ? s.color : QColor(90, 90, 90, 140));
        pen.setWidth(2);
        pen.setStyle(Qt::DotLine);
        xy->setPen(pen);
      }
      for (const QPointF& p : s.points) xy->append(p);
      chart->addSeries(xy);
      xy->attachAxis(x);
      xy->attachAxis(y);
    }
  }

  QChartView* view_;
};

}  // namespace

Chart* make_chart(QWidget* parent) { return new QtChartsChart(parent); }

}  // namespace parlab::gui
