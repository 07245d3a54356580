#pragma once
// The setup panel: model (preset, TOML file or a bare parameter count), cluster (preset, the
// calibrated cpu-local, a TOML file), workers (slider + spin box) and every plan key. Each edit
// resolves the inputs through the strategy library (resolve_setup); a rejection shows the
// library's message inline under the field it names, and the last valid setup stays on show.
#include <QWidget>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gui/core/lab_setup.h"

class QComboBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QSlider;
class QSpinBox;
class QFormLayout;

namespace parlab::gui {

class SetupPanel : public QWidget {
  Q_OBJECT
 public:
  explicit SetupPanel(QWidget* parent = nullptr);

  SetupInputs inputs() const;
  // Loads inputs into the widgets (History's "open run") and resolves them once.
  void set_inputs(const SetupInputs& in);
  const std::optional<LabSetup>& setup() const { return setup_; }
  const std::optional<SetupError>& error() const { return error_; }
  // The widget each input lives in: "model", "params", "cluster", "workers" or a plan key.
  QWidget* field(const std::string& key) const;
  // The inline message under a field (empty when it has none).
  QString message_for(const std::string& key) const;
  // The inputs an error field names ("plan.tp*pp" -> tp and pp, "--model" -> model).
  static std::vector<std::string> keys_of_error_field(const std::string& field);

 signals:
  void setup_changed(const parlab::gui::LabSetup& setup);
  void setup_invalid(const parlab::gui::SetupError& error);

 private:
  QGroupBox* build_model_and_cluster();
  QGroupBox* build_split();
  void connect_fields();
  void add_field(QFormLayout* form, const std::string& key, const QString& label, QWidget* w);
  void resolve();
  void show_error(const std::optional<SetupError>& e);
  void browse(QComboBox* target, const QString& what);

  QComboBox* model_;
  QLineEdit* params_;
  QComboBox* cluster_;
  QSlider* workers_slider_;
  QSpinBox* workers_;
  std::map<std::string, QWidget*> fields_;
  std::map<std::string, QLabel*> messages_;
  QLabel* summary_;
  std::optional<LabSetup> setup_;
  std::optional<SetupError> error_;
  bool loading_ = false;
};

}  // namespace parlab::gui
