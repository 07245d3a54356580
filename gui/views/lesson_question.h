#pragma once
// One question of the lesson: "pause and predict before revealing the answer". The learner's
// answer (a number, a choice or a set of choices, encoded as a number by the page) and a
// sentence why are written to the predictions table when they press Commit -- before anything
// is computed -- and the page then runs the lab's engine and hands back the revealed value with
// the text to show, which is written as the prediction's reveal. Until then the answer is shown
// as committed and cannot be changed; an engine that failed can be retried without a new row.
#include <QDoubleSpinBox>
#include <QGroupBox>
#include <QWheelEvent>
#include <functional>
#include <optional>
#include <string>

#include "db/records.h"
#include "rubric/evidence.h"

class QLabel;
class QLineEdit;
class QProgressBar;
class QPushButton;

namespace parlab::gui {

// A spin box for the lesson's assumptions: the wheel scrolls the page unless the box has focus
// (scrolling past it used to change the assumption and reset the learner's answer).
class LessonSpinBox : public QDoubleSpinBox {
 public:
  explicit LessonSpinBox(QWidget* parent = nullptr) : QDoubleSpinBox(parent) { setFocusPolicy(Qt::StrongFocus); }

 protected:
  void wheelEvent(QWheelEvent* e) override {
    if (hasFocus())
      QDoubleSpinBox::wheelEvent(e);
    else
      e->ignore();
  }
};

class LessonQuestion : public QGroupBox {
  Q_OBJECT
 public:
  // Reads the learner's input: the value to store, or nullopt with a message in *error.
  using Reader = std::function<std::optional<double>(QString* error)>;

  LessonQuestion(const QString& title, std::string quantity, QWidget* input, Reader read, std::string db_path,
                 QWidget* parent = nullptr);
  void set_prompt(const QString& html);
  // What reveals it: model, cluster, world size, source, plan (stored with the prediction).
  void set_context(const db::NewPrediction& context) { context_ = context; }

  // The Commit button (or Enter in the Why field): stores the prediction (or, when one is stored and its reveal failed,
  // asks for the reveal again) and emits committed(). False with a message when the input is bad.
  bool commit();
  // The engine's answer: stored as the reveal, shown with the prediction beside it.
  void reveal(double value, std::optional<long long> run, const QString& html);
  void fail(const QString& why);
  void progress(const QString& what);
  // Ask again (an assumption changed): a new prediction row on the next commit.
  void reset();
  // A prediction committed in an earlier session whose reveal never came.
  void resume(const rubric::Prediction& pending);

  const std::string& quantity() const { return quantity_; }
  bool answered() const { return revealed_.has_value(); }
  bool busy() const;
  std::optional<long long> prediction() const { return prediction_; }
  std::optional<double> predicted() const { return predicted_; }
  std::optional<double> revealed() const { return revealed_; }
  QPushButton* commit_button() const { return commit_; }
  QLineEdit* reason_field() const { return reason_; }
  QString result_text() const;
  QString error_text() const;

 signals:
  void committed(double predicted);
  void revealed_value(double value);

 private:
  void lock_input(bool locked);

  std::string quantity_, db_path_;
  QWidget* input_;
  Reader read_;
  db::NewPrediction context_;
  QLabel* prompt_;
  QLineEdit* reason_;
  QPushButton* commit_;
  QProgressBar* busy_;
  QLabel* status_;
  QLabel* error_;
  QLabel* result_;
  std::optional<long long> prediction_;
  std::optional<double> predicted_, revealed_;
};

}  // namespace parlab::gui
