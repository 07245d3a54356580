#pragma once
// The lesson's five pages, one per step of the chapter. Each asks first (LessonQuestion writes
// the answer to the predictions table before anything is computed), then reveals with the lab's
// own engines -- strategy::apply_rule, the planner, the scaling lab, the analytic model, the
// simulator and real runs (RunController / FaultPanel starting `parlab train`) -- says what to
// notice and how to check the reasoning, and offers one assumption to change. The pages format
// the engines' numbers; they compute none of their own.
#include <QWidget>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"
#include "gui/core/run_controller.h"
#include "gui/views/lab_options.h"
#include "rubric/lesson.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QProcess;
class QPushButton;
class QRadioButton;
class QTableView;
class QVBoxLayout;

namespace parlab::gui {

class FaultPanel;
class LessonQuestion;
class PlannerJob;
class SimulationJob;
class SpeedupModel;
struct PlannerOutcome;
struct SimPoint;

// What the lesson runs "here": the model trained for real on this machine (a small TOML in the
// tests), and how many steps each real run takes.
struct LessonOptions {
  LabOptions lab;
  std::string here_model = "lab-mlp";
  int run_steps = 10;
};

// "What to notice" and "Check your reasoning", as the chapter sets them apart (rich text).
QString lesson_notes(const QString& notice, const QString& check);

class LessonPage : public QWidget {
  Q_OBJECT
 public:
  LessonPage(const LessonOptions& options, int number, const QString& title, const QString& intro, QWidget* parent);
  const std::vector<LessonQuestion*>& questions() const { return questions_; }
  int number() const { return number_; }
  bool complete() const;
  bool busy() const;
  // Shows answers committed in an earlier session whose reveal never came.
  void resume(const rubric::LessonProgress& progress);

 signals:
  // A question was committed or revealed (the lesson's progress changed).
  void progressed();

 protected:
  LessonQuestion* add_question(const QString& title, const std::string& quantity, QWidget* input,
                               std::function<std::optional<double>(QString*)> read);
  QGroupBox* add_assumption(const QString& what);
  // The here setup (the lesson's model on cpu-local) at `workers`; nullopt with a message.
  std::optional<LabSetup> here_setup(int workers, QString* error) const;

  LessonOptions options_;
  std::string db_path_;
  QVBoxLayout* body_;

 private:
  int number_;
  std::vector<LessonQuestion*> questions_;
};

// 1. Find what cannot fit: the seed's worked example through strategy::apply_rule.
class FitPage : public LessonPage {
  Q_OBJECT
 public:
  FitPage(const LessonOptions& options, QWidget* parent = nullptr);
  QCheckBox* verdict_box(int i) const { return boxes_[i]; }
  QDoubleSpinBox* device_field() const { return device_; }
  QDoubleSpinBox* activations_field() const { return activations_; }

 private:
  void update_prompt();
  void reveal();

  QCheckBox* boxes_[4];
  QDoubleSpinBox* device_;
  QDoubleSpinBox* activations_;
};

// 2. Choose the smallest split: the planner on a model that does not fit, and on the one here.
class SplitPage : public LessonPage {
  Q_OBJECT
 public:
  SplitPage(const LessonOptions& options, QWidget* parent = nullptr);
  QCheckBox* axis_box(int question, int axis) const { return axes_[question][axis]; }
  QComboBox* large_model_field() const { return large_model_; }

 private:
  void reveal(int question);
  void on_plan(int question, const PlannerOutcome& o);
  std::optional<LabSetup> setup_of(int question, QString* error) const;

  QCheckBox* axes_[2][3];
  QComboBox* large_model_;
  PlannerJob* jobs_[2];
};

// 3. Model the communication path: the 120 ms scaling lab, then analytic, simulated and
// measured speedup of the model here on 2 workers, side by side.
class CommPage : public LessonPage {
  Q_OBJECT
 public:
  CommPage(const LessonOptions& options, QWidget* parent = nullptr);
  QLineEdit* efficiency_field() const { return efficiency_; }
  QLineEdit* speedup_field() const { return speedup_; }
  QDoubleSpinBox* compute_field() const { return compute_ms_; }
  SpeedupModel* three_numbers() const { return three_; }
  QPushButton* calibrate_button() const { return calibrate_; }

 private:
  void build_efficiency_question();
  void build_speedup_question();
  void connect_jobs();
  void reveal_efficiency();
  void show_assumption();
  void reveal_speedup();
  void on_point(const SimPoint& p);
  void start_next_run();
  void on_run(const RunOutcome& o);
  void finish_speedup();
  void calibrate();

  QLineEdit* efficiency_;
  QLineEdit* speedup_;
  QDoubleSpinBox* compute_ms_;
  QLabel* assumption_result_;
  QPushButton* calibrate_;
  QProcess* calibration_;
  SpeedupModel* three_;
  QTableView* table_;
  SimulationJob* sim_;
  RunController* runs_;
  std::optional<LabSetup> setup_;
  std::vector<int> pending_runs_;
  std::optional<long long> target_run_;
};

// 4. The opening failure (one rank skips an all-reduce) and 5. kill and resume: real runs with
// an injected fault through the fault panel; the incident and the final state hash reveal.
class FaultPage : public LessonPage {
  Q_OBJECT
 public:
  enum Kind { kHang, kKillResume };
  FaultPage(const LessonOptions& options, Kind kind, QWidget* parent = nullptr);
  QRadioButton* choice(int i) const { return choices_[size_t(i)]; }
  FaultPanel* panel() const { return panel_; }

 private:
  void reveal();
  void on_done(bool identical);

  Kind kind_;
  std::vector<QRadioButton*> choices_;
  FaultPanel* panel_;
};

}  // namespace parlab::gui
