#include "gui/views/plan_view.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableView>
#include <QTextBrowser>
#include <QVBoxLayout>

#include "gui/core/candidates_model.h"
#include "gui/core/machine_pricing.h"
#include "gui/core/memory_model.h"
#include "gui/core/speedup_decide.h"

namespace parlab::gui {

namespace {
QString q(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }
// "Price on this machine" profiles here: for worker processes on this host (cpu-local), with layers.
bool prices_here(const LabSetup& s) { return s.model.has_layers() && s.base_cluster.name == "cpu-local"; }
}  // namespace

PlanView::PlanView(CandidatesModel* model, QWidget* parent, LabOptions options)
    : QWidget(parent), model_(model), options_(std::move(options)) {
  job_ = new PlannerJob(this);
  decide_ = new DecideJob(this);
  pricing_ = new MachinePricingJob(this);
  auto* layout = new QVBoxLayout(this);
  auto* head = new QHBoxLayout();
  status_ = new QLabel(this);
  use_ = new QPushButton(tr("&Use the selected plan"), this);
  use_->setEnabled(false);
  measure_ = new QPushButton(tr("&Measure the top candidates"), this);
  measure_->setToolTip(
      tr("Train the planner's top plans and the best of each other family on this machine "
         "(parlab experiment run, kind = decide): the regret of its choice and how well it ranks"));
  measure_->setEnabled(false);
  price_ = new QPushButton(tr("&Price on this machine"), this);
  price_->setToolTip(
      tr("Price the planner's top plans and the best of each other family again on profiles of their own rank "
         "shapes run here (parlab plan --profile; a calibrated cpu-local, a second or two a shape): what ranks "
         "sharing the cores cost each other, which the table's grid leaves out"));
  price_->setEnabled(false);
  head->addWidget(status_, 1);
  head->addWidget(use_);
  head->addWidget(price_);
  head->addWidget(measure_);
  layout->addLayout(head);
  decision_ = new QLabel(this);
  decision_->setWordWrap(true);
  decision_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  layout->addWidget(decision_);
  table_ = new QTableView(this);
  table_->setModel(model);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAccessibleName(tr("planner candidates"));
  layout->addWidget(table_, 2);
  explanation_ = new QTextBrowser(this);
  explanation_->setAccessibleName(tr("planner explanation"));
  layout->addWidget(explanation_, 3);
  connect(job_, &PlannerJob::done, this, &PlanView::on_done);
  connect(use_, &QPushButton::clicked, this, [this] {
    const auto rows = table_->selectionModel() ? table_->selectionModel()->selectedRows() : QModelIndexList();
    const int r = rows.isEmpty() ? 0 : rows.first().row();
    if (model_->report() && r < int(model_->report()->top.size())) emit use_plan(model_->report()->top[size_t(r)].plan);
  });
  connect(measure_, &QPushButton::clicked, this, &PlanView::measure_candidates);
  connect(price_, &QPushButton::clicked, this, &PlanView::price_on_machine);
  connect(pricing_, &MachinePricingJob::progress, this, [this](const QString& line) { decision_->setText(line); });
  connect(pricing_, &MachinePricingJob::finished, this,
          [this](bool ok, const QString& error, const MachinePricing& pricing) {
            price_->setEnabled(setup_ && prices_here(*setup_));
            decision_->setText(ok && setup_ ? describe_machine_pricing(pricing, setup_->world())
                                            : tr("Not priced on this machine: %1").arg(error.toHtmlEscaped()));
          });
  connect(decide_, &DecideJob::progress, this, [this](const QString& line) { decision_->setText(line); });
  connect(decide_, &DecideJob::finished, this, [this](bool ok, const QString& headline, const QString&) {
    measure_->setEnabled(setup_.has_value());
    decision_->setText(ok ? tr("Measured: %1").arg(headline) : tr("Not measured: %1").arg(headline));
  });
}

QString PlanView::explanation() const { return explanation_->toPlainText(); }
QString PlanView::decision() const { return decision_->text(); }

void PlanView::measure_candidates() {
  if (!setup_ || decide_->running()) return;
  measure_->setEnabled(false);
  decision_->setText(tr("Training the candidates on %1 workers (parlab experiment run) …").arg(setup_->world()));
  decide_->start(*setup_, options_.parlab.isEmpty() ? find_parlab() : options_.parlab, options_.db,
                 runs_dir_of(options_));
}

void PlanView::price_on_machine() {
  if (!setup_ || pricing_->running()) return;
  price_->setEnabled(false);
  decision_->setText(
      tr("Profiling the candidates' rank shapes on %1 processes (parlab plan --profile) …").arg(setup_->world()));
  pricing_->start(*setup_, options_.parlab.isEmpty() ? find_parlab() : options_.parlab);
}

void PlanView::set_setup(const LabSetup& setup) {
  setup_ = setup;
  measure_->setEnabled(setup.model.has_layers() && !decide_->running());
  price_->setEnabled(prices_here(setup) && !pricing_->running());
  status_->setText(tr("Searching plans for %1 on %2 devices (global batch %3) …")
                       .arg(QString::fromStdString(setup.model.name))
                       .arg(setup.world())
                       .arg(setup.plan.global_batch));
  use_->setEnabled(false);
  if (!setup.model.has_layers()) {
    job_->cancel();
    model_->clear();
    status_->setText(tr("A bare parameter count has no layers to split: the planner needs a model shape."));
    explanation_->clear();
    return;
  }
  job_->start(setup);
}

void PlanView::on_done(const PlannerOutcome& o) {
  if (!o.report) {
    model_->clear();
    status_->setText(tr("The planner found nothing: %1").arg(QString::fromStdString(o.error)));
    explanation_->clear();
    return;
  }
  const strategy::PlanReport& r = *o.report;
  model_->set_report(r);
  use_->setEnabled(!r.top.empty());
  status_->setText(tr("%1 plans evaluated, %2 valid, %3 fit, in %4 ms; the choice is first.")
                       .arg(r.evaluated)
                       .arg(r.valid)
                       .arg(r.fitting)
                       .arg(r.search_seconds * 1e3, 0, 'f', 1));
  QString html;
  if (!r.top.empty())
    html += tr("<h3>Chosen: %1</h3><p><code>%2</code></p>")
                .arg(q(r.top.front().plan.short_name()), q(r.top.front().plan.to_string()));
  html += "<ul>";
  for (const std::string& line : r.explanation) html += "<li>" + q(line) + "</li>";
  html += "</ul>";
  if (r.smallest_split)
    html += tr("<p><b>Smallest split that fits:</b> %1</p>").arg(q(r.smallest_split->plan.short_name()));
  if (!r.neighbours.empty()) {
    html += tr("<p><b>One step bigger or smaller:</b></p><ul>");
    for (const strategy::SplitComparison& n : r.neighbours)
      html += "<li>" + q(n.sentence.empty() ? n.label + ": " + n.why_not : n.sentence) + "</li>";
    html += "</ul>";
  }
  html += tr("<p><b>The seed's rule</b> would choose %1%2.</p>")
              .arg(q(r.rule_choice_name),
                   r.rule_choice_problem.empty() ? QString() : " (" + q(r.rule_choice_problem) + ")");
  explanation_->setHtml(html);
}

}  // namespace parlab::gui
