#include "gui/views/memory_view.h"

#include <QCheckBox>
#include <QLabel>
#include <QVBoxLayout>

#include "gui/core/memory_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"

namespace parlab::gui {

namespace {
constexpr double kGiB = 1024.0 * 1024 * 1024;
QString yes_no(bool b) { return b ? QObject::tr("yes") : QObject::tr("no"); }
}  // namespace

MemoryView::MemoryView(MemoryModel* model, QWidget* parent) : QWidget(parent), model_(model) {
  auto* layout = new QVBoxLayout(this);
  panel_ = new ChartPanel(tr("Memory per rank (GiB) against the device capacity"), model, this);
  layout->addWidget(panel_, 1);
  fit_ = new QLabel(this);
  fit_->setWordWrap(true);
  fit_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  verdict_ = new QLabel(this);
  verdict_->setWordWrap(true);
  verdict_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(fit_);
  layout->addWidget(verdict_);
  previous_ = new QLabel(this);
  previous_->setWordWrap(true);
  previous_->setStyleSheet("color: #555;");
  layout->addWidget(previous_);
  show_formulas_ = new QCheckBox(tr("Show each category as its &formula with these numbers"), this);
  show_formulas_->setChecked(true);
  layout->addWidget(show_formulas_);
  formulas_ = new QLabel(this);
  formulas_->setWordWrap(true);
  formulas_->setTextFormat(Qt::RichText);
  formulas_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(formulas_);
  connect(show_formulas_, &QCheckBox::toggled, formulas_, &QLabel::setVisible);
  connect(model, &MemoryModel::changed, this, &MemoryView::refresh);
  refresh();
}

QString MemoryView::verdict_text() const { return verdict_->text(); }
QString MemoryView::fit_text() const { return fit_->text(); }
QString MemoryView::formulas_text() const {
  return formulas_->isVisible() || !isVisible() ? formulas_->text() : QString();
}
QString MemoryView::previous_text() const { return previous_->text(); }

void MemoryView::refresh() {
  ChartSpec spec;
  spec.x_title = model_->per_stage() ? tr("pipeline stage") : tr("rank");
  spec.y_title = tr("GiB");
  const int cols[] = {MemoryModel::kParams, MemoryModel::kGrads, MemoryModel::kOptimizer, MemoryModel::kActivations,
                      MemoryModel::kTemp};
  const QColor colors[] = {QColor(60, 110, 180), QColor(230, 140, 40), QColor(120, 170, 70), QColor(150, 90, 170),
                           QColor(150, 150, 150)};
  int worst = -1;
  double worst_total = -1;
  for (int r = 0; r < model_->rowCount(); ++r) {
    const bool fits = model_->index(r, MemoryModel::kFits).data(MemoryModel::kValueRole).toBool();
    // Many bars: their numbers only (the axis title says rank or stage; the table has the labels).
    const QString label =
        model_->rowCount() > 8
            ? QString::number(model_->index(r, model_->per_stage() ? MemoryModel::kStage : MemoryModel::kRank)
                                  .data(MemoryModel::kValueRole)
                                  .toInt())
            : model_->row_label(r);
    spec.categories << label + (fits ? "" : tr(" ✗"));
    const double total = model_->index(r, MemoryModel::kTotal).data(MemoryModel::kValueRole).toDouble();
    if (total > worst_total) worst_total = total, worst = r;
  }
  for (int i = 0; i < 5; ++i) {
    ChartSeries s;
    s.kind = ChartSeries::kBars;
    s.name = model_->headerData(cols[i], Qt::Horizontal).toString();
    s.color = colors[i];
    for (int r = 0; r < model_->rowCount(); ++r)
      s.points.emplace_back(r, model_->index(r, cols[i]).data(MemoryModel::kValueRole).toDouble() / kGiB);
    spec.series.push_back(s);
  }
  if (const auto& before = model_->previous()) {
    ChartSeries outline;
    outline.kind = ChartSeries::kOutline;
    outline.name = tr("before: %1").arg(before->label);
    for (size_t r = 0; r < before->total_bytes.size() && int(r) < model_->rowCount(); ++r)
      outline.points.emplace_back(double(r), before->total_bytes[r] / kGiB);
    spec.series.push_back(outline);
  }
  if (model_->rowCount() > 0) {
    spec.reference = model_->index(0, MemoryModel::kCapacity).data(MemoryModel::kValueRole).toDouble() / kGiB;
    spec.reference_name = tr("device capacity");
  }
  panel_->chart()->show_spec(spec);

  if (model_->rowCount() == 0) {
    fit_->setText(tr("No valid setup yet."));
    verdict_->clear();
    formulas_->clear();
    previous_->clear();
    return;
  }
  QString formulas =
      tr("<b>The ledger of %1 with its numbers</b> (strategy::explain_ledger):").arg(model_->formulas_for());
  for (const strategy::LedgerTerm& t : model_->formulas())
    formulas += "<br><code>" + QString::fromStdString(t.formula).toHtmlEscaped() + "</code>";
  formulas_->setText(formulas);
  const auto& before = model_->previous();
  previous_->setText(before
                         ? tr("Dashed outline: the plan before the last change (%1), total per %2; it stays until the "
                              "next change of split or worker count.")
                               .arg(before->label, model_->per_stage() ? tr("stage") : tr("rank"))
                         : QString());
  const QString total = model_->index(worst, MemoryModel::kTotal).data().toString();
  const QString cap = model_->index(worst, MemoryModel::kCapacity).data().toString();
  if (model_->all_fit())
    fit_->setText(
        tr("<b>This plan fits.</b> The fullest %1 needs %2 of %3.").arg(model_->row_label(worst), total, cap));
  else
    fit_->setText(tr("<b style='color:#b00020'>This plan does NOT fit:</b> %1 needs %2, the device holds %3 "
                     "(bars marked ✗ are over capacity).")
                      .arg(model_->row_label(worst), total, cap));
  const strategy::RuleVerdict& v = model_->verdict();
  QStringList cands;
  for (const auto& c : v.candidates) cands << QString::fromStdString(c);
  verdict_->setText(
      tr("<b>The seed's rule on one unsplit replica</b> (%1 of %2):<br>"
         "DDP fits: <b>%3</b> &nbsp; shard model state: <b>%4</b> &nbsp; tensor split needed: <b>%5</b> &nbsp; "
         "pipeline candidate: <b>%6</b><br>blocker: <b>%7</b> &nbsp; proposed splits, smallest first: %8")
          .arg(format_gib(v.replica_bytes), format_gib(model_->rule_inputs().device_bytes), yes_no(v.ddp_fits),
               yes_no(v.shard_model_state), yes_no(v.tensor_split_needed), yes_no(v.pipeline_candidate),
               QString::fromStdString(v.blocker), cands.join(", ")));
}

}  // namespace parlab::gui
