// The lesson's last two steps, on real worker processes through the fault panel: 4. the
// opening failure (rank 1 skips an all-reduce: what do the others do?) and 5. kill and resume
// (are the final weights bit-identical to an uninterrupted run?).
#include <QButtonGroup>
#include <QJsonArray>
#include <QJsonObject>
#include <QLabel>
#include <QRadioButton>
#include <QVBoxLayout>

#include "gui/views/fault_panel.h"
#include "gui/views/lesson_pages.h"
#include "gui/views/lesson_question.h"
#include "gui/views/run_view.h"

namespace parlab::gui {

namespace {

constexpr int kWorkers = 2;  // rank 1 is the culprit

// What the other ranks did, as the hang question's choices number it: 0 carried on, 1 waited
// until the watchdog named a hang, 2 failed at once.
int hang_outcome(const RunOutcome& o) {
  const QJsonArray incidents = o.json.value("incidents").toArray();
  for (const auto& v : incidents)
    if (v.toObject().value("kind").toString() == "hang") return 1;
  return incidents.isEmpty() && o.ok ? 0 : 2;
}

}  // namespace

FaultPage::FaultPage(const LessonOptions& options, Kind kind, QWidget* parent)
    : LessonPage(
          options, kind == kHang ? 4 : 5, kind == kHang ? tr("The opening failure") : tr("Kill and resume"),
          kind == kHang
              ? tr("\"One rank skips a batch and misses an all-reduce, leaving every other rank hung. An unsafe "
                   "release must degrade to a named baseline or the last known-good version.\" Here it happens on "
                   "real worker processes of this machine: rank 1 skips the all-reduces of one step.")
              : tr("Preserve complete training state: parameters, optimizer moments, step, sampler position and "
                   "RNG. Here rank 1 is killed mid-run; the supervisor restarts the job from its last checkpoint "
                   "and it runs to the end. An uninterrupted run of the same job runs first, for comparison."),
          parent),
      kind_(kind) {
  const QStringList texts =
      kind == kHang
          ? QStringList{tr("They finish the step with a smaller sum and carry on (no error, wrong weights)"),
                        tr("They wait in the all-reduce until the watchdog's timeout; the job is stopped and the "
                           "hang is named with its culprit"),
                        tr("They fail at once with an error")}
          : QStringList{tr("No: something is lost or replayed differently, the weights differ"),
                        tr("Yes: the resumed run ends bit-identical to the uninterrupted one")};
  auto* w = new QWidget(this);
  auto* l = new QVBoxLayout(w);
  l->setContentsMargins(0, 0, 0, 0);
  auto* group = new QButtonGroup(w);
  for (int i = 0; i < texts.size(); ++i) {
    auto* b = new QRadioButton(texts[i], w);
    group->addButton(b, i);
    l->addWidget(b);
    choices_.push_back(b);
  }
  LessonQuestion* q =
      add_question(kind == kHang ? tr("What do the other ranks do?") : tr("Will the final weights be bit-identical?"),
                   kind == kHang ? rubric::lesson::kHang : rubric::lesson::kBitIdentical, w,
                   [group](QString* error) -> std::optional<double> {
                     if (group->checkedId() < 0) {
                       *error = QObject::tr("choose one answer first");
                       return std::nullopt;
                     }
                     return double(group->checkedId());
                   });
  panel_ = new FaultPanel(options.lab, this);
  panel_->fix_fault(kind == kHang ? FaultPanel::kSkipAllreduce : FaultPanel::kKill);
  body_->addWidget(panel_);
  QString error;
  if (const auto s = here_setup(kWorkers, &error)) {
    panel_->set_setup(*s);
    q->set_prompt(
        kind == kHang
            ? tr("<b>%1</b> trains on <b>%2 worker processes</b>; at step 7 of 12, rank 1 skips that step's "
                 "all-reduces. <i>Pause and predict before revealing the answer.</i>")
                  .arg(QString::fromStdString(s->model.name))
                  .arg(kWorkers)
            : tr("<b>%1</b> on <b>%2 worker processes</b>, a checkpoint every 3 steps; rank 1 is killed at step "
                 "7 of 12. <i>Pause and predict before revealing the answer.</i>")
                  .arg(QString::fromStdString(s->model.name))
                  .arg(kWorkers));
    db::NewPrediction c;
    c.model = s->inputs.model_label();
    c.cluster = s->base_cluster.name;
    c.world_size = kWorkers;
    c.source = db::RunKind::kMeasured;
    q->set_context(c);
  } else {
    q->set_prompt(error.toHtmlEscaped());
  }
  QGroupBox* box = add_assumption(kind == kHang ? tr("the collective timeout") : tr("where the kill lands"));
  auto* bl = new QVBoxLayout(box);
  auto* hint = new QLabel(
      kind == kHang
          ? tr("The drill gives each collective 3 s (--timeout 3). In the Run view (Ctrl+6), choose this fault with "
               "another timeout and predict how the detection time moves with it.")
          : tr("The kill lands between checkpoints, so steps after the last one are lost and re-run. In the Run view "
               "(Ctrl+6), change the steps and predict how many are lost; the hash must match either way."),
      box);
  hint->setWordWrap(true);
  bl->addWidget(hint);
  body_->addStretch(1);
  connect(q, &LessonQuestion::committed, this, &FaultPage::reveal);
  connect(panel_, &FaultPanel::done, this, &FaultPage::on_done);
}

void FaultPage::reveal() {
  QString error;
  const auto s = here_setup(kWorkers, &error);
  if (!s) return questions().front()->fail(error);
  if (const auto why = why_not_runnable(*s)) return questions().front()->fail(*why);
  panel_->set_setup(*s);
  if (!panel_->start(kind_ == kHang ? FaultPanel::kSkipAllreduce : FaultPanel::kKill))
    return questions().front()->fail(tr("the fault drill could not start"));
  questions().front()->progress(tr("Running the uninterrupted job, then the one with the fault (see below) …"));
}

void FaultPage::on_done(bool identical) {
  LessonQuestion* q = questions().front();
  if (!q->prediction() || q->answered()) return;
  const RunOutcome& o = panel_->last_outcome();
  if (panel_->reference_failed()) return q->fail(tr("the uninterrupted run did not complete: %1").arg(o.message));
  const double value = kind_ == kHang ? double(hang_outcome(o)) : (identical ? 1.0 : 0.0);
  const int said = int(*q->predicted());
  const QString answer = choices_[size_t(value)]->text();
  QString text = tr("<p>You said: <i>%1</i><br>What happened: <b>%2</b> %3</p>")
                     .arg(choices_[size_t(said)]->text().toHtmlEscaped(), answer.toHtmlEscaped(),
                          said == int(value) ? QString::fromUtf8("✓") : tr("✗ differs"));
  text += "<p>" + panel_->result() + "</p>";
  const QString notice =
      kind_ == kHang
          ? tr("Nothing fails where the fault is: the other ranks sit in a collective that can never complete. Only a "
               "timeout turns the silence into an error, and only the flight recorders say which rank skipped.")
          : tr("Bit-identical needs every piece of state: weights, both AdamW moments, the step, the sampler's "
               "position "
               "and the RNG; and a deterministic order of the sums (one ring, one BLAS thread).");
  const QString check =
      kind_ == kHang
          ? tr("Find the culprit, the detector and the detection time in the verdict above, then the fallback: "
               "the restart from the last checkpoint. The History view (Ctrl+7) has the incident row.")
          : tr("Compare the two hashes above; then read the incident: the step it resumed at and how many "
               "steps it lost (those after the last checkpoint).");
  q->reveal(value, o.run_id, text + lesson_notes(notice, check));
}

}  // namespace parlab::gui
