#include "gui/views/chart_panel.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QStackedWidget>
#include <QTableView>
#include <QToolButton>
#include <QVBoxLayout>

#include "gui/views/chart.h"

namespace parlab::gui {

ChartPanel::ChartPanel(const QString& title, QAbstractItemModel* model, QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* head = new QHBoxLayout();
  auto* label = new QLabel("<b>" + title.toHtmlEscaped() + "</b>", this);
  toggle_ = new QToolButton(this);
  toggle_->setText(tr("&Table"));
  toggle_->setCheckable(true);
  toggle_->setToolTip(tr("Show the chart's numbers as a table"));
  toggle_->setAccessibleName(title + tr(" as a table"));
  head->addWidget(label);
  head->addStretch();
  head->addWidget(toggle_);
  layout->addLayout(head);
  stack_ = new QStackedWidget(this);
  chart_ = make_chart(stack_);
  table_ = new QTableView(stack_);
  table_->setModel(model);
  table_->setAlternatingRowColors(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->setAccessibleName(title);
  stack_->addWidget(chart_);
  stack_->addWidget(table_);
  layout->addWidget(stack_, 1);
  connect(toggle_, &QToolButton::toggled, this, [this](bool on) { stack_->setCurrentIndex(on ? 1 : 0); });
}

bool ChartPanel::showing_table() const { return stack_->currentIndex() == 1; }
void ChartPanel::show_table(bool on) { toggle_->setChecked(on); }

void ChartPanel::set_chart_widget(QWidget* widget) {
  stack_->removeWidget(chart_);
  chart_->hide();
  widget->setParent(stack_);
  stack_->insertWidget(0, widget);
  stack_->setCurrentIndex(toggle_->isChecked() ? 1 : 0);
}

}  // namespace parlab::gui
