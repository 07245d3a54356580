#include "gui/views/setup_panel.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QVBoxLayout>

#include "strategy/io.h"

namespace parlab::gui {

namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

// Enumerated plan keys: the allowed spellings (the first, empty, means "default").
const std::map<std::string, QStringList>& choices() {
  static const std::map<std::string, QStringList> c = {
      {"zero", {"", "0", "1", "2", "3"}},
      {"schedule", {"", "gpipe", "1f1b", "interleaved"}},
      {"recompute", {"", "none", "selective", "full"}},
      {"sp", {"", "off", "on"}},
      {"precision", {"", "fp32", "mixed"}},
  };
  return c;
}

QString label_of(const std::string& key) {
  static const std::map<std::string, QString> l = {
      {"dp", "&dp (data)"}, {"tp", "t&p (tensor)"},           {"pp", "pp (pipeline)"},  {"zero", "&ZeRO stage"},
      {"mb", "microbatch"}, {"microbatches", "microbatches"}, {"gbs", "&global batch"}, {"schedule", "schedule"},
      {"v", "v (chunks)"},  {"recompute", "recompute"},       {"sp", "sequence par."},  {"precision", "precision"}};
  return l.at(key);
}

QString text_of(QWidget* w) {
  if (auto* e = qobject_cast<QLineEdit*>(w)) return e->text();
  if (auto* c = qobject_cast<QComboBox*>(w)) return c->currentText();
  return {};
}

void set_text_of(QWidget* w, const QString& text) {
  if (auto* e = qobject_cast<QLineEdit*>(w)) e->setText(text);
  if (auto* c = qobject_cast<QComboBox*>(w)) c->setCurrentText(text);
}

QComboBox* editable_combo(const QStringList& items, QWidget* parent) {
  auto* c = new QComboBox(parent);
  c->setEditable(true);
  c->addItems(items);
  c->setInsertPolicy(QComboBox::NoInsert);
  return c;
}

}  // namespace

SetupPanel::SetupPanel(QWidget* parent) : QWidget(parent) {
  auto* outer = new QVBoxLayout(this);

  auto* what = new QGroupBox(tr("Model and cluster"), this);
  auto* form = new QFormLayout(what);
  QStringList models;
  for (const auto& n : strategy::model_preset_names()) models << q(n);
  model_ = editable_combo(models, what);
  model_->setToolTip(tr("A preset name or a model TOML file"));
  auto* model_row = new QHBoxLayout();
  auto* model_browse = new QPushButton(tr("File…"), what);
  model_row->addWidget(model_, 1);
  model_row->addWidget(model_browse);
  auto* model_box = new QWidget(what);
  model_box->setLayout(model_row);
  model_row->setContentsMargins(0, 0, 0, 0);
  add_field(form, "model", tr("&Model"), model_box);
  fields_["model"] = model_;
  params_ = new QLineEdit(what);
  params_->setPlaceholderText(tr("or a bare parameter count, e.g. 7.5e9"));
  add_field(form, "params", tr("P&arameters"), params_);
  QStringList clusters;
  for (const auto& n : strategy::cluster_preset_names()) clusters << q(n);
  cluster_ = editable_combo(clusters, what);
  cluster_->setToolTip(
      tr("A preset name (cpu-local reads the calibrated copy when there is one) or a cluster TOML file"));
  auto* cluster_row = new QHBoxLayout();
  auto* cluster_browse = new QPushButton(tr("File…"), what);
  cluster_row->addWidget(cluster_, 1);
  cluster_row->addWidget(cluster_browse);
  cluster_row->setContentsMargins(0, 0, 0, 0);
  auto* cluster_box = new QWidget(what);
  cluster_box->setLayout(cluster_row);
  add_field(form, "cluster", tr("&Cluster"), cluster_box);
  fields_["cluster"] = cluster_;
  workers_slider_ = new QSlider(Qt::Horizontal, what);
  workers_ = new QSpinBox(what);
  workers_slider_->setRange(1, 4);
  workers_->setRange(1, 4);
  workers_slider_->setAccessibleName(tr("workers"));
  auto* workers_row = new QHBoxLayout();
  workers_row->addWidget(workers_slider_, 1);
  workers_row->addWidget(workers_);
  workers_row->setContentsMargins(0, 0, 0, 0);
  auto* workers_box = new QWidget(what);
  workers_box->setLayout(workers_row);
  add_field(form, "workers", tr("&Workers"), workers_box);
  fields_["workers"] = workers_;
  outer->addWidget(what);

  auto* split = new QGroupBox(tr("Split (empty = default)"), this);
  auto* pform = new QFormLayout(split);
  for (const std::string& key : setup_plan_keys()) {
    QWidget* w;
    if (choices().count(key)) {
      w = editable_combo(choices().at(key), split);
    } else {
      auto* e = new QLineEdit(split);
      e->setPlaceholderText(tr("auto"));
      w = e;
    }
    w->setAccessibleName(q(key));
    add_field(pform, key, label_of(key), w);
  }
  outer->addWidget(split);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  outer->addWidget(summary_);
  outer->addStretch();

  connect(model_, &QComboBox::currentTextChanged, this, [this] { resolve(); });
  connect(cluster_, &QComboBox::currentTextChanged, this, [this] { resolve(); });
  connect(params_, &QLineEdit::textChanged, this, [this] { resolve(); });
  connect(workers_slider_, &QSlider::valueChanged, workers_, &QSpinBox::setValue);
  connect(workers_, &QSpinBox::valueChanged, workers_slider_, &QSlider::setValue);
  connect(workers_, &QSpinBox::valueChanged, this, [this] { resolve(); });
  for (const std::string& key : setup_plan_keys()) {
    QWidget* w = fields_.at(key);
    if (auto* e = qobject_cast<QLineEdit*>(w)) connect(e, &QLineEdit::textChanged, this, [this] { resolve(); });
    if (auto* c = qobject_cast<QComboBox*>(w)) connect(c, &QComboBox::currentTextChanged, this, [this] { resolve(); });
  }
  connect(model_browse, &QPushButton::clicked, this, [this] { browse(model_, tr("model")); });
  connect(cluster_browse, &QPushButton::clicked, this, [this] { browse(cluster_, tr("cluster")); });

  SetupInputs defaults;
  set_inputs(defaults);
}

void SetupPanel::add_field(QFormLayout* form, const std::string& key, const QString& label, QWidget* w) {
  form->addRow(label, w);
  fields_[key] = w;
  auto* msg = new QLabel(w->parentWidget());
  msg->setWordWrap(true);
  msg->setStyleSheet("color: #b00020;");
  msg->setVisible(false);
  msg->setAccessibleName(QString::fromStdString(key) + " message");
  form->addRow(QString(), msg);
  messages_[key] = msg;
}

void SetupPanel::browse(QComboBox* target, const QString& what) {
  const QString file =
      QFileDialog::getOpenFileName(this, tr("Open a %1 TOML file").arg(what), QString(), "TOML (*.toml)");
  if (!file.isEmpty()) target->setCurrentText(file);
}

QWidget* SetupPanel::field(const std::string& key) const {
  const auto it = fields_.find(key);
  return it == fields_.end() ? nullptr : it->second;
}

QString SetupPanel::message_for(const std::string& key) const {
  const auto it = messages_.find(key);
  return it == messages_.end() || it->second->isHidden() ? QString() : it->second->text();
}

SetupInputs SetupPanel::inputs() const {
  SetupInputs in;
  in.model = model_->currentText().toStdString();
  in.params = params_->text().toStdString();
  in.cluster = cluster_->currentText().toStdString();
  in.workers = workers_->value();
  for (const std::string& key : setup_plan_keys()) in.set(key, text_of(fields_.at(key)).toStdString());
  return in;
}

void SetupPanel::set_inputs(const SetupInputs& in) {
  loading_ = true;
  model_->setCurrentText(q(in.model));
  params_->setText(q(in.params));
  cluster_->setCurrentText(q(in.cluster));
  // The range first, so a saved run's world is not clamped by the previous cluster's size.
  workers_->setMaximum(std::max(workers_->maximum(), in.workers));
  workers_slider_->setMaximum(workers_->maximum());
  workers_->setValue(in.workers);
  for (const std::string& key : setup_plan_keys()) set_text_of(fields_.at(key), q(in.value(key)));
  loading_ = false;
  resolve();
}

std::vector<std::string> SetupPanel::keys_of_error_field(const std::string& field) {
  if (field.rfind("plan.", 0) == 0) {
    // A product ("tp*pp", "dp*tp*pp") names each of its factors.
    std::vector<std::string> keys;
    std::string rest = field.substr(5);
    for (size_t star; (star = rest.find('*')) != std::string::npos; rest = rest.substr(star + 1))
      keys.push_back(rest.substr(0, star));
    keys.push_back(rest);
    for (std::string& k : keys)
      if (k == "bucket_mb" || k == "optimizer") k = "dp";  // keys the panel has no field for
    return keys;
  }
  if (field == "plan") return {"dp"};
  if (field == "world" || field == "workers") return {"workers"};
  if (field.rfind("--params", 0) == 0) return {"params"};
  if (field == "--cluster" || field.rfind("cluster", 0) == 0) return {"cluster"};
  return {"model"};  // --model, model.*, a TOML file's own keys
}

void SetupPanel::show_error(const std::optional<SetupError>& e) {
  for (auto& [key, label] : messages_) label->setVisible(false);
  for (auto& [key, w] : fields_) w->setStyleSheet(QString());
  if (!e) return;
  for (std::string key : keys_of_error_field(e->field)) {
    if (!messages_.count(key)) key = "model";
    messages_.at(key)->setText(q(e->message));
    messages_.at(key)->setVisible(true);
    fields_.at(key)->setStyleSheet("border: 1px solid #b00020;");
  }
}

void SetupPanel::resolve() {
  if (loading_) return;
  const SetupResult r = resolve_setup(inputs());
  if (r.base_cluster) {
    const int devices = max_workers(*r.base_cluster);
    if (workers_->maximum() != devices && workers_->value() <= devices) {
      workers_->setMaximum(devices);
      workers_slider_->setMaximum(devices);
    }
  }
  error_ = r.error;
  show_error(r.error);
  if (r.setup) {
    setup_ = r.setup;
    summary_->setText(tr("<b>%1</b> on %2 x %3: %4<br>global batch %5 = mb %6 x %7 microbatches x dp %8")
                          .arg(q(setup_->model.name), QString::number(setup_->world()), q(setup_->cluster.device.name),
                               q(setup_->plan.short_name()), QString::number(setup_->plan.global_batch),
                               QString::number(setup_->plan.microbatch), QString::number(setup_->plan.microbatches),
                               QString::number(setup_->plan.dp)));
    emit setup_changed(*setup_);
  } else {
    summary_->setText(
        tr("Not applied (the views show the last valid setup): %1").arg(q(r.error->message).toHtmlEscaped()));
    emit setup_invalid(*r.error);
  }
}

}  // namespace parlab::gui
