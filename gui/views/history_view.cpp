#include "gui/views/history_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "gui/core/history_model.h"

namespace parlab::gui {

SetupInputs inputs_of_run(const db::RunRecord& run) {
  SetupInputs in;
  in.model = run.model;
  in.cluster = run.cluster;
  in.workers = run.world_size;
  const nlohmann::json& p = run.plan;
  auto text = [&](const char* key) -> std::string {
    if (!p.contains(key)) return {};
    return p[key].is_string() ? p[key].get<std::string>() : p[key].dump();
  };
  for (const char* key : {"tp", "pp", "zero", "mb", "gbs", "schedule", "recompute", "sp", "precision"})
    in.set(key, text(key));
  if (text("schedule") == "interleaved") in.set("v", text("v"));
  return in;
}

HistoryView::HistoryView(HistoryModel* model, std::string db_path, QWidget* parent)
    : QWidget(parent), model_(model), db_path_(std::move(db_path)) {
  proxy_ = new HistoryFilter(this);
  proxy_->setSourceModel(model);
  auto* layout = new QVBoxLayout(this);
  auto* bar = new QHBoxLayout();
  kind_ = new QComboBox(this);
  kind_->addItems({"", "experiment", "run", "proof", "incident", "prediction"});
  kind_->setItemText(0, tr("everything"));
  kind_->setAccessibleName(tr("kind"));
  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText(tr("filter: model, status, text …"));
  filter_->setClearButtonEnabled(true);
  auto* open = new QPushButton(tr("&Open the run in the setup"), this);
  auto* reload_button = new QPushButton(tr("Re&load"), this);
  auto* kind_label = new QLabel(tr("&Show"), this);
  kind_label->setBuddy(kind_);
  auto* filter_label = new QLabel(tr("&Filter"), this);
  filter_label->setBuddy(filter_);
  bar->addWidget(kind_label);
  bar->addWidget(kind_);
  bar->addWidget(filter_label);
  bar->addWidget(filter_, 1);
  bar->addWidget(open);
  bar->addWidget(reload_button);
  layout->addLayout(bar);
  table_ = new QTableView(this);
  table_->setModel(proxy_);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setSortingEnabled(true);
  table_->sortByColumn(-1, Qt::AscendingOrder);  // recorded order until a header is clicked
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->setAccessibleName(tr("history"));
  layout->addWidget(table_, 1);
  status_ = new QLabel(this);
  layout->addWidget(status_);
  connect(kind_, &QComboBox::currentIndexChanged, this,
          [this](int i) { proxy_->set_kind(i == 0 ? QString() : kind_->itemText(i)); });
  connect(filter_, &QLineEdit::textChanged, proxy_, &HistoryFilter::set_text);
  connect(table_, &QTableView::activated, this, [this](const QModelIndex& i) { open_row(i.row()); });
  connect(open, &QPushButton::clicked, this, [this] {
    const QModelIndex i = table_->currentIndex();
    if (i.isValid()) open_row(i.row());
  });
  connect(reload_button, &QPushButton::clicked, this, &HistoryView::reload);
  reload();
}

void HistoryView::reload() {
  model_->load(db_path_);
  status_->setText(model_->error().isEmpty()
                       ? tr("%1 rows from %2").arg(model_->rowCount()).arg(QString::fromStdString(db_path_))
                       : model_->error());
}

bool HistoryView::open_row(int proxy_row) {
  const QModelIndex src = proxy_->mapToSource(proxy_->index(proxy_row, 0));
  if (!src.isValid()) return false;
  const HistoryRow& r = model_->row(src.row());
  if (!r.run) {
    status_->setText(tr("Only runs open in the setup (this row is a %1).").arg(r.kind));
    return false;
  }
  emit open_run(inputs_of_run(*r.run));
  status_->setText(tr("Run %1 loaded into the setup.").arg(r.id));
  return true;
}

}  // namespace parlab::gui
