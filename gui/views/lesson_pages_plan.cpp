// The lesson's frame (LessonPage) and its first two steps: find what cannot fit (the seed's
// rule) and choose the smallest split (the planner).
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>

#include "gui/core/planner_job.h"
#include "gui/views/lesson_pages.h"
#include "gui/views/lesson_question.h"
#include "strategy/ledger.h"
#include "strategy/planner.h"
#include "base/units.h"

namespace parlab::gui {

namespace {

QString yes_no(bool b) { return b ? QObject::tr("yes") : QObject::tr("no"); }
QString gb(double bytes) { return QString::fromStdString(units::format_bytes(bytes)); }

}  // namespace

QString lesson_notes(const QString& notice, const QString& check) {
  return QObject::tr("<p><b>What to notice.</b> %1</p><p><b>Check your reasoning.</b> %2</p>").arg(notice, check);
}

// ---- the frame ----

LessonPage::LessonPage(const LessonOptions& options, int number, const QString& title, const QString& intro,
                       QWidget* parent)
    : QWidget(parent), options_(options), db_path_(options.lab.db.toStdString()), number_(number) {
  body_ = new QVBoxLayout(this);
  auto* heading = new QLabel(tr("<h2>Step %1 of 5 — %2</h2>").arg(number).arg(title), this);
  body_->addWidget(heading);
  auto* text = new QLabel(intro, this);
  text->setWordWrap(true);
  text->setTextFormat(Qt::RichText);
  body_->addWidget(text);
}

bool LessonPage::complete() const {
  for (const LessonQuestion* q : questions_)
    if (!q->answered()) return false;
  return !questions_.empty();
}

bool LessonPage::busy() const {
  for (const LessonQuestion* q : questions_)
    if (q->busy()) return true;
  return false;
}

void LessonPage::resume(const rubric::LessonProgress& progress) {
  for (const rubric::Prediction& p : progress.pending)
    for (LessonQuestion* q : questions_)
      if (q->quantity() == p.quantity && !q->prediction()) q->resume(p);
}

LessonQuestion* LessonPage::add_question(const QString& title, const std::string& quantity, QWidget* input,
                                         std::function<std::optional<double>(QString*)> read) {
  auto* q = new LessonQuestion(title, quantity, input, std::move(read), db_path_, this);
  body_->addWidget(q);
  questions_.push_back(q);
  connect(q, &LessonQuestion::committed, this, &LessonPage::progressed);
  connect(q, &LessonQuestion::revealed_value, this, &LessonPage::progressed);
  return q;
}

QGroupBox* LessonPage::add_assumption(const QString& what) {
  auto* box = new QGroupBox(tr("Change one assumption: %1").arg(what), this);
  body_->addWidget(box);
  return box;
}

std::optional<LabSetup> LessonPage::here_setup(int workers, QString* error) const {
  SetupInputs in;
  in.model = options_.here_model;
  in.cluster = "cpu-local";
  in.workers = workers;
  SetupResult r = resolve_setup(in);
  if (!r.setup && error) *error = QString::fromStdString(r.error ? r.error->message : "no setup");
  return r.setup;
}

// ---- 1. Find what cannot fit ----

FitPage::FitPage(const LessonOptions& options, QWidget* parent)
    : LessonPage(options, 1, tr("Find what cannot fit"),
                 tr("Estimate parameter, gradient, optimizer, activation and temporary-buffer memory at the desired "
                    "shape. Identify whether the blocker is total state, one oversized layer, or activations. The "
                    "chapter's worked example is a memory ledger for one replica on one device; the seed's rule "
                    "turns it into four verdicts (strategy::apply_rule)."),
                 parent) {
  const char* names[4] = {"DDP fits (the replica fits on one device)", "shard model state (the replica does not fit)",
                          "tensor split needed (one layer does not fit)",
                          "pipeline candidate (activations outweigh parameters)"};
  auto* boxes = new QWidget(this);
  auto* bl = new QVBoxLayout(boxes);
  bl->setContentsMargins(0, 0, 0, 0);
  for (int i = 0; i < 4; ++i) {
    boxes_[i] = new QCheckBox(tr(names[i]), boxes);
    bl->addWidget(boxes_[i]);
  }
  LessonQuestion* q = add_question(tr("Which of the four verdicts hold? Tick each one that is true."),
                                   rubric::lesson::kVerdicts, boxes, [this](QString*) -> std::optional<double> {
                                     int mask = 0;
                                     for (int i = 0; i < 4; ++i) mask |= boxes_[i]->isChecked() ? 1 << i : 0;
                                     return double(mask);
                                   });
  QGroupBox* box = add_assumption(tr("the device or the activations (then predict again)"));
  auto* form = new QFormLayout(box);
  device_ = new LessonSpinBox(box);
  device_->setRange(1, 10000);
  device_->setDecimals(0);
  device_->setValue(80);
  device_->setSuffix(" GB");
  device_->setAccessibleName(tr("device memory"));
  activations_ = new LessonSpinBox(box);
  activations_->setRange(0, 10000);
  activations_->setDecimals(0);
  activations_->setValue(18);
  activations_->setSuffix(" GB");
  activations_->setAccessibleName(tr("activations"));
  form->addRow(tr("&Device memory"), device_);
  form->addRow(tr("&Activations"), activations_);
  body_->addStretch(1);
  const auto changed = [this, q] {
    if (q->prediction()) q->reset();
    update_prompt();
  };
  connect(device_, &QDoubleSpinBox::valueChanged, this, changed);
  connect(activations_, &QDoubleSpinBox::valueChanged, this, changed);
  connect(q, &LessonQuestion::committed, this, &FitPage::reveal);
  update_prompt();
}

void FitPage::update_prompt() {
  questions().front()->set_prompt(
      tr("A device of <b>%1 GB</b>; one replica holds parameters <b>28 GB</b>, gradients <b>28 GB</b>, optimizer state "
         "<b>56 GB</b> and activations <b>%2 GB</b>; the largest layer needs <b>6 GB</b>. <i>Pause and predict before "
         "revealing the answer.</i>")
          .arg(device_->value())
          .arg(activations_->value()));
  LessonQuestion* q = questions().front();
  db::NewPrediction c;
  c.model = "seed worked example";
  c.cluster = QString("%1 GB device").arg(device_->value()).toStdString();
  c.source = db::RunKind::kAnalytic;
  c.plan = {{"device_gb", device_->value()}, {"activations_gb", activations_->value()}};
  q->set_context(c);
}

void FitPage::reveal() {
  strategy::RuleInputs in;
  in.params_bytes = 28 * units::kGB;
  in.grads_bytes = 28 * units::kGB;
  in.optimizer_bytes = 56 * units::kGB;
  in.activations_bytes = activations_->value() * units::kGB;
  in.largest_layer_bytes = 6 * units::kGB;
  in.device_bytes = device_->value() * units::kGB;
  const strategy::RuleVerdict v = strategy::apply_rule(in);
  const bool got[4] = {v.ddp_fits, v.shard_model_state, v.tensor_split_needed, v.pipeline_candidate};
  int mask = 0;
  QString rows;
  const char* names[4] = {"DDP fits", "shard model state", "tensor split needed", "pipeline candidate"};
  const int predicted = int(*questions().front()->predicted());
  for (int i = 0; i < 4; ++i) {
    mask |= got[i] ? 1 << i : 0;
    const bool said = predicted & (1 << i);
    rows +=
        tr("<tr><td>%1</td><td>%2</td><td><b>%3</b></td><td>%4</td></tr>")
            .arg(tr(names[i]), yes_no(said), yes_no(got[i]), said == got[i] ? QString::fromUtf8("✓") : tr("✗ differs"));
  }
  QStringList cands;
  for (const auto& c : v.candidates) cands << QString::fromStdString(c);
  const QString table =
      tr("<table cellspacing=6><tr><th align=left>verdict</th><th>you</th><th>the rule</th><th></th></tr>%1</table>")
          .arg(rows);
  const QString facts =
      tr("<p>Replica = 28 + 28 + 56 + %1 = <b>%2</b> against a <b>%3</b> device. Blocker: <b>%4</b>. "
         "The rule proposes, smallest first: <b>%5</b>.</p>")
          .arg(activations_->value())
          .arg(gb(v.replica_bytes), gb(in.device_bytes), QString::fromStdString(v.blocker), cands.join(", "));
  const QString notice =
      v.ddp_fits
          ? tr("The replica fits: plain DDP is the smallest split, and anything more only adds communication.")
          : tr("The replica needs %1, so plain DDP cannot fit before temporary buffers are even counted. The "
               "largest layer (6 GB) %2, so %3.")
                .arg(gb(v.replica_bytes))
                .arg(v.tensor_split_needed ? tr("does not fit either") : tr("fits comfortably"))
                .arg(v.tensor_split_needed ? tr("an operator must be split (tensor parallelism)")
                                           : tr("tensor parallelism is not the first remedy; sharding the replicated "
                                                "state is the more direct candidate"));
  const QString check =
      tr("Add the four parts yourself and compare with the device; compare the largest layer with the "
         "device, and activations with parameters. Then change the device or the activations below and "
         "predict which verdict flips first.");
  questions().front()->reveal(double(mask), std::nullopt, table + facts + lesson_notes(notice, check));
}

// ---- 2. Choose the smallest split ----

SplitPage::SplitPage(const LessonOptions& options, QWidget* parent)
    : LessonPage(options, 2, tr("Choose the smallest split"),
                 tr("Use DDP when a replica fits, sharding when total state does not, tensor parallelism when an "
                    "operator is too large, and pipelines when layer groups offer natural stages. The planner "
                    "(strategy::search_plans) enumerates every split, drops those that do not fit, and prefers the one "
                    "that splits least unless a bigger one is clearly faster."),
                 parent) {
  large_model_ = new QComboBox(this);
  large_model_->addItems({"gpt-175b", "gpt-22b", "llama2-70b", "gpt-530b"});
  large_model_->setAccessibleName(tr("large model"));
  for (int q = 0; q < 2; ++q) {
    jobs_[q] = new PlannerJob(this);
    auto* w = new QWidget(this);
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    const char* axes[3] = {"ZeRO sharding", "tensor parallel", "pipeline parallel"};
    for (int a = 0; a < 3; ++a) {
      axes_[q][a] = new QCheckBox(tr(axes[a]), w);
      l->addWidget(axes_[q][a]);
    }
    l->addWidget(new QLabel(tr("(none ticked: plain DDP)"), w));
    l->addStretch(1);
    LessonQuestion* question =
        add_question(q == 0 ? tr("A model that does not fit") : tr("The model here, on this machine"),
                     q == 0 ? rubric::lesson::kSplitLarge : rubric::lesson::kSplitHere, w,
                     [this, q](QString*) -> std::optional<double> {
                       int mask = 0;
                       const int bits[3] = {strategy::kSplitZero, strategy::kSplitTensor, strategy::kSplitPipeline};
                       for (int a = 0; a < 3; ++a) mask |= axes_[q][a]->isChecked() ? bits[a] : 0;
                       return double(mask);
                     });
    connect(question, &LessonQuestion::committed, this, [this, q] { reveal(q); });
    connect(jobs_[q], &PlannerJob::done, this, [this, q](const PlannerOutcome& o) { on_plan(q, o); });
  }
  QGroupBox* box = add_assumption(tr("the model that does not fit (then predict again)"));
  auto* form = new QFormLayout(box);
  form->addRow(tr("&Model on 1024 x A100 80 GB"), large_model_);
  body_->addStretch(1);
  const auto prompts = [this] {
    QString error;
    for (int q = 0; q < 2; ++q) {
      const auto s = setup_of(q, &error);
      const QString who = s ? tr("<b>%1</b> on <b>%2 x %3</b> (%4 of memory each)")
                                  .arg(QString::fromStdString(s->model.name))
                                  .arg(s->world())
                                  .arg(QString::fromStdString(s->base_cluster.name))
                                  .arg(gb(s->cluster.device.memory_bytes))
                            : error.toHtmlEscaped();
      questions()[size_t(q)]->set_prompt(
          tr("%1: which splits beyond plain DDP does the <b>smallest plan that fits</b> need? Tick none for DDP.")
              .arg(who));
      if (s) {
        db::NewPrediction c;
        c.model = s->model.name;
        c.cluster = s->base_cluster.name;
        c.world_size = s->world();
        c.source = db::RunKind::kAnalytic;
        questions()[size_t(q)]->set_context(c);
      }
    }
  };
  connect(large_model_, &QComboBox::currentTextChanged, this, [this, prompts] {
    if (questions().front()->prediction()) questions().front()->reset();
    prompts();
  });
  prompts();
}

std::optional<LabSetup> SplitPage::setup_of(int q, QString* error) const {
  if (q == 1) return here_setup(2, error);
  SetupInputs in;
  in.model = large_model_->currentText().toStdString();
  in.cluster = "dgx-a100";
  in.workers = 1024;
  SetupResult r = resolve_setup(in);
  if (!r.setup && error) *error = QString::fromStdString(r.error ? r.error->message : "no setup");
  return r.setup;
}

void SplitPage::reveal(int q) {
  QString error;
  const auto s = setup_of(q, &error);
  if (!s) return questions()[size_t(q)]->fail(error);
  questions()[size_t(q)]->progress(tr("The planner is searching every split of %1 on %2 devices …")
                                       .arg(QString::fromStdString(s->model.name))
                                       .arg(s->world()));
  jobs_[q]->start(*s);
}

void SplitPage::on_plan(int q, const PlannerOutcome& o) {
  LessonQuestion* question = questions()[size_t(q)];
  if (!o.report) return question->fail(QString::fromStdString(o.error));
  const strategy::PlanReport& r = *o.report;
  if (!r.smallest_split) return question->fail(tr("no plan fits (%1 evaluated)").arg(r.evaluated));
  const strategy::Plan& smallest = r.smallest_split->plan;
  const int axes = strategy::split_axes(smallest);
  const int said = int(*question->predicted());
  QString text =
      tr("<p>You said <b>%1</b>; the planner's smallest plan that fits is <b>%2</b>: <b>%3</b> "
         "(%4 of %5 per device, %6 per step). %7</p>")
          .arg(QString::fromStdString(strategy::split_axes_name(said)),
               QString::fromStdString(strategy::split_axes_name(axes)), QString::fromStdString(smallest.short_name()),
               gb(r.smallest_split->worst.total_bytes()), gb(r.smallest_split->worst.device_bytes),
               QString::fromStdString(units::format_seconds(r.smallest_split->step_seconds())),
               said == axes ? QString::fromUtf8("✓") : tr("✗ differs"));
  text += "<p>";
  // The planner's own explanation: what cannot fit, the smallest split, the fastest, and the
  // neighbouring plans with what one more (or one less) step of splitting costs.
  for (const std::string& line : r.explanation) text += QString::fromStdString(line).toHtmlEscaped() + "<br>";
  text += "</p>";
  const QString notice = axes == 0 ? tr("A replica fits here: every split beyond DDP would only add communication.")
                                   : tr("The planner splits only what exceeds its budget (%1), and each neighbour "
                                        "says what one more step of splitting would cost.")
                                         .arg(QString::fromStdString(r.rule.blocker));
  const QString check =
      tr("Read the ledger of the chosen plan in the Memory view (use the plan from the Plan view) and "
         "find the category that would not fit one step smaller.");
  question->reveal(double(axes), std::nullopt, text + lesson_notes(notice, check));
}

}  // namespace parlab::gui
