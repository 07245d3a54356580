#include "gui/views/lesson_question.h"

#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "db/results_store.h"

namespace parlab::gui {

LessonQuestion::LessonQuestion(const QString& title, std::string quantity, QWidget* input, Reader read,
                               std::string db_path, QWidget* parent)
    : QGroupBox(title, parent),
      quantity_(std::move(quantity)),
      db_path_(std::move(db_path)),
      input_(input),
      read_(std::move(read)) {
  auto* layout = new QVBoxLayout(this);
  prompt_ = new QLabel(this);
  prompt_->setWordWrap(true);
  prompt_->setTextFormat(Qt::RichText);
  layout->addWidget(prompt_);
  layout->addWidget(input_);
  auto* form = new QFormLayout();
  reason_ = new QLineEdit(this);
  reason_->setPlaceholderText(tr("one sentence: why?"));
  reason_->setAccessibleName(tr("why"));
  form->addRow(tr("&Why"), reason_);
  layout->addLayout(form);
  commit_ = new QPushButton(tr("Commit my answer, then reveal"), this);
  commit_->setAccessibleName(tr("commit and reveal"));
  layout->addWidget(commit_);
  busy_ = new QProgressBar(this);
  busy_->setRange(0, 0);
  busy_->setVisible(false);
  busy_->setMaximumHeight(14);
  layout->addWidget(busy_);
  status_ = new QLabel(this);
  status_->setWordWrap(true);
  layout->addWidget(status_);
  error_ = new QLabel(this);
  error_->setWordWrap(true);
  error_->setStyleSheet("color: #b00020;");
  error_->setVisible(false);
  layout->addWidget(error_);
  result_ = new QLabel(this);
  result_->setWordWrap(true);
  result_->setTextFormat(Qt::RichText);
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse | Qt::TextSelectableByKeyboard);
  result_->setVisible(false);
  layout->addWidget(result_);
  connect(commit_, &QPushButton::clicked, this, &LessonQuestion::commit);
  connect(reason_, &QLineEdit::returnPressed, this, &LessonQuestion::commit);
}

void LessonQuestion::set_prompt(const QString& html) { prompt_->setText(html); }
QString LessonQuestion::result_text() const { return result_->isVisible() ? result_->text() : QString(); }
QString LessonQuestion::error_text() const { return error_->isVisible() ? error_->text() : QString(); }
bool LessonQuestion::busy() const { return busy_->isVisible(); }

void LessonQuestion::lock_input(bool locked) {
  input_->setEnabled(!locked);
  reason_->setEnabled(!locked);
}

bool LessonQuestion::commit() {
  error_->setVisible(false);
  if (busy()) return false;
  if (prediction_ && !revealed_) {
    // Stored already; its reveal failed or never came: ask the engine again.
    busy_->setVisible(true);
    commit_->setEnabled(false);
    emit committed(*predicted_);
    return true;
  }
  if (revealed_) return false;  // answered; reset() asks again
  QString why;
  const std::optional<double> value = read_(&why);
  if (!value) {
    error_->setText(why);
    error_->setVisible(true);
    return false;
  }
  db::NewPrediction p = context_;
  p.quantity = quantity_;
  p.predicted = *value;
  p.reason = reason_->text().trimmed().toStdString();
  try {
    prediction_ = db::ResultsStore::open(db_path_).add_prediction(p);
  } catch (const std::exception& e) {
    error_->setText(tr("Could not store the answer: %1").arg(QString::fromUtf8(e.what())));
    error_->setVisible(true);
    return false;
  }
  predicted_ = *value;
  lock_input(true);
  commit_->setEnabled(false);
  busy_->setVisible(true);
  status_->setText(tr("Answer stored (prediction #%1) before anything was computed. Revealing …").arg(*prediction_));
  emit committed(*value);
  return true;
}

void LessonQuestion::reveal(double value, std::optional<long long> run, const QString& html) {
  busy_->setVisible(false);
  if (!prediction_) return;
  try {
    db::ResultsStore::open(db_path_).reveal_prediction(*prediction_, value, run);
  } catch (const std::exception& e) {
    fail(tr("Could not store the revealed value: %1").arg(QString::fromUtf8(e.what())));
    return;
  }
  revealed_ = value;
  commit_->setEnabled(false);
  status_->setText(tr("Prediction #%1 revealed and stored.").arg(*prediction_));
  result_->setText(html);
  result_->setVisible(true);
  emit revealed_value(value);
}

void LessonQuestion::fail(const QString& why) {
  busy_->setVisible(false);
  commit_->setEnabled(true);
  commit_->setText(tr("Reveal again"));
  error_->setText(tr("The reveal did not complete, your answer stays stored and unrevealed: %1").arg(why));
  error_->setVisible(true);
}

void LessonQuestion::progress(const QString& what) { status_->setText(what); }

void LessonQuestion::reset() {
  prediction_.reset();
  predicted_.reset();
  revealed_.reset();
  lock_input(false);
  busy_->setVisible(false);
  commit_->setEnabled(true);
  commit_->setText(tr("Commit my answer, then reveal"));
  error_->setVisible(false);
  result_->setVisible(false);
  status_->setText(tr("The assumption changed: predict again before you look."));
}

void LessonQuestion::resume(const rubric::Prediction& pending) {
  prediction_ = pending.id;
  predicted_ = pending.predicted;
  lock_input(true);
  commit_->setText(tr("Reveal"));
  status_->setText(tr("You committed an answer earlier (prediction #%1); reveal it.").arg(pending.id));
}

}  // namespace parlab::gui
