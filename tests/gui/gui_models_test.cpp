// The views show exactly what the libraries compute for the same inputs: the memory bars are
// strategy::compute_ledger's, the analytic speedup series strategy::estimate_step's, the
// scaling-lab preset strategy::scaling_lab's; an over-capacity plan is marked as not fitting;
// and every item model passes QAbstractItemModelTester while the lab changes it.
#include <QAbstractItemModelTester>
#include <QFile>
#include <QPushButton>
#include <QApplication>
#include <QTabWidget>
#include <QTableView>
#include <QToolButton>
#include <QTest>

#include "db/results_store.h"
#include "gui/core/candidates_model.h"
#include "gui/core/history_model.h"
#include "gui/core/live_steps_model.h"
#include "gui/core/machine_pricing.h"
#include "gui/core/memory_model.h"
#include "gui/core/predictions_model.h"
#include "gui/core/simulation_job.h"
#include "gui/core/speedup_model.h"
#include "gui/core/timeline_model.h"
#include "gui/views/chart.h"
#include "gui/views/chart_panel.h"
#include "gui/views/history_view.h"
#include "gui/views/memory_view.h"
#include "gui/views/plan_view.h"
#include "gui/views/screenshot.h"
#include "gui/views/speedup_view.h"
#include "gui/views/lesson_view.h"
#include "gui/views/timeline_view.h"
#include "gui/views/timeline_widget.h"
#include "gui/core/lesson_model.h"
#include "trace/trace.h"
#include "gui_test_support.h"
#include "strategy/cost_model.h"
#include "strategy/io.h"
#include "strategy/measures.h"
#include "strategy/ledger.h"
#include "strategy/scaling_lab.h"

using namespace parlab;
using namespace parlab::gui;
using namespace parlab::gui::test;

namespace {

// What `parlab plan --profile --json` prints under on_this_machine (the rest left out).
const char* const kPricedJson =
    R"({"world": 2, "on_this_machine": {"choice": "zero=1,dp=2", "notes": ["compute model: a profile"],
  "candidates": [
    {"plan": "zero=1,dp=2", "name": "ZeRO-1 x2", "family": "ZeRO", "origin": "top 2", "predicted_step_seconds": 0.137, "planner_step_seconds": 0.155, "global_batch": 16},
    {"plan": "tp=2", "name": "TP 2", "family": "tensor", "origin": "top 1", "predicted_step_seconds": 0.215, "planner_step_seconds": 0.150, "global_batch": 16},
    {"plan": "dp=2", "name": "DDP x2", "family": "DDP", "origin": "best DDP", "predicted_step_seconds": 0.240, "planner_step_seconds": 0.174, "global_batch": 16}]}})";

// A stand-in program at `path`: `body`, executable by its owner.
bool write_executable(const QString& path, const QByteArray& body) {
  QFile f(path);
  if (!f.open(QIODevice::WriteOnly) || f.write(body) != body.size()) return false;
  return f.setPermissions(QFile::ReadOwner | QFile::WriteOwner | QFile::ExeOwner);
}

constexpr double kGiB = 1024.0 * 1024 * 1024;

// The memory chart against the library's ledger of every rank.
void check_memory(Lab& lab, const Expected& e) {
  const Chart* chart = lab.window->memory_view()->panel()->chart();
  const MemoryModel* m = lab.window->memory_model();
  QCOMPARE(m->rowCount(), e.plan.world());
  const char* names[] = {"parameters", "gradients", "optimizer", "activations", "temporary"};
  for (int r = 0; r < e.plan.world(); ++r) {
    const strategy::MemoryLedger l = strategy::compute_ledger(e.model, e.plan, e.cluster, r);
    const double want[] = {l.params_bytes, l.grads_bytes, l.optimizer_bytes, l.activations_bytes, l.temp_bytes};
    for (int i = 0; i < 5; ++i) {
      const ChartSeries* s = chart->series(names[i]);
      QVERIFY2(s, names[i]);
      QCOMPARE(s->points.at(size_t(r)).y(), want[i] / kGiB);
      QCOMPARE(m->index(r, MemoryModel::kParams + i).data(MemoryModel::kValueRole).toDouble(), want[i]);
    }
    QCOMPARE(m->index(r, MemoryModel::kFits).data(MemoryModel::kValueRole).toBool(), l.fits());
  }
  QCOMPARE(*chart->spec().reference, e.cluster.device.memory_bytes / kGiB);
}

// The analytic speedup series against estimate_step at each worker count of cpu-local (1, 2, 4).
void check_speedup(Lab& lab, const std::string& plan_text) {
  const Chart* chart = lab.window->speedup_view()->panel()->chart();
  const ChartSeries* s = chart->series("analytic");
  QVERIFY(s);
  const std::vector<int> workers = {1, 2, 4};
  QCOMPARE(s->points.size(), workers.size());
  std::vector<double> t, gbs;
  for (int w : workers) {
    const Expected e = expected_scaled("lab-mlp", "cpu-local", w, plan_text);
    t.push_back(strategy::estimate_step(e.model, e.plan, e.cluster, false).step_seconds);
    gbs.push_back(double(e.plan.global_batch));
  }
  for (size_t i = 0; i < workers.size(); ++i) {
    QCOMPARE(s->points[i].x(), double(workers[i]));
    QCOMPARE(s->points[i].y(), (gbs[i] / t[i]) / (gbs[0] / t[0]));
    QCOMPARE(lab.window->speedup_model()->value(int(i), SpeedupModel::kAnalyticStep).value(), t[i]);
  }
}

}  // namespace

class GuiModelsTest : public QObject {
  Q_OBJECT
 private slots:
  void memory_and_speedup_follow_workers_and_split() {
    Lab lab;
    set_workers(lab.setup(), 4);
    QVERIFY(!lab.setup()->error());
    check_memory(lab, expected("lab-mlp", "cpu-local", 4, ""));
    check_speedup(lab, "");
    type_into(lab.setup(), "zero", "1");
    QVERIFY2(!lab.setup()->error(), lab.setup()->error() ? lab.setup()->error()->message.c_str() : "");
    check_memory(lab, expected("lab-mlp", "cpu-local", 4, "zero=1"));
    check_speedup(lab, "zero=1");
    type_into(lab.setup(), "gbs", "256");
    check_memory(lab, expected("lab-mlp", "cpu-local", 4, "zero=1,gbs=256"));
    check_speedup(lab, "zero=1,gbs=256");
    set_workers(lab.setup(), 2);
    check_memory(lab, expected("lab-mlp", "cpu-local", 2, "zero=1,gbs=256"));
  }

  // "ZeRO-1 divided the optimizer state by 4" is seen, not remembered: the plan before the last
  // change of split or worker count stays as an outline (its totals, the ledger's), until the
  // next change; another model clears it. The formulas under the bars are explain_ledger's.
  void memory_and_speedup_keep_the_plan_before_as_an_outline() {
    Lab lab;
    set_workers(lab.setup(), 4);
    MemoryView* mv = lab.window->memory_view();
    const QString ddp_name = QString::fromStdString(expected("lab-mlp", "cpu-local", 4, "").plan.short_name());
    const QString before_name = "before: " + ddp_name + " on 4 workers";
    QVERIFY(!mv->panel()->chart()->series(before_name));
    const std::vector<double> speedup_before = [&] {
      std::vector<double> v;
      for (int r = 0; r < lab.window->speedup_model()->rowCount(); ++r)
        v.push_back(*lab.window->speedup_model()->value(r, SpeedupModel::kAnalyticSpeedup));
      return v;
    }();
    type_into(lab.setup(), "zero", "1");
    QVERIFY(!lab.setup()->error());
    const auto ddp = expected("lab-mlp", "cpu-local", 4, "");
    const ChartSeries* outline = mv->panel()->chart()->series(before_name);
    QVERIFY2(outline, qPrintable(mv->previous_text()));
    QCOMPARE(outline->kind, ChartSeries::kOutline);
    QCOMPARE(outline->points.size(), size_t(4));
    for (int r = 0; r < 4; ++r)
      QCOMPARE(outline->points[size_t(r)].y(),
               strategy::compute_ledger(ddp.model, ddp.plan, ddp.cluster, r).total_bytes() / kGiB);
    const auto zero1 = expected("lab-mlp", "cpu-local", 4, "zero=1");
    QVERIFY(strategy::compute_ledger(zero1.model, zero1.plan, zero1.cluster, 0).optimizer_bytes <
            strategy::compute_ledger(ddp.model, ddp.plan, ddp.cluster, 0).optimizer_bytes);
    QVERIFY(mv->previous_text().contains(ddp_name + " on 4 workers"));
    // The speedup view keeps the analytic curve before the change the same way.
    const ChartSeries* sp = lab.window->speedup_view()->panel()->chart()->series(before_name + " (analytic)");
    QVERIFY(sp);
    QCOMPARE(sp->kind, ChartSeries::kOutline);
    QCOMPARE(sp->points.size(), speedup_before.size());
    for (size_t i = 0; i < speedup_before.size(); ++i) QCOMPARE(sp->points[i].y(), speedup_before[i]);
    // The formulas are the library's, for the fullest rank, with ZeRO-1's shard named.
    const auto explained =
        strategy::explain_ledger(zero1.model, zero1.model.layer_list(), zero1.plan, zero1.cluster, 0);
    for (const auto& t : explained.terms)
      QVERIFY2(mv->formulas_text().contains(QString::fromStdString(t.formula).toHtmlEscaped()), t.formula.c_str());
    QVERIFY(mv->formulas_text().contains("(ZeRO-1 over dp 4)"));
    // The next change replaces the outline; another model clears it.
    set_workers(lab.setup(), 2);
    QVERIFY(
        mv->panel()->chart()->series("before: " + QString::fromStdString(zero1.plan.short_name()) + " on 4 workers"));
    QVERIFY(!mv->panel()->chart()->series(before_name));
    type_into(lab.setup(), "model", QString::fromStdString(source_path("tests/experiments/data/tiny-mlp.toml")));
    QVERIFY(!lab.setup()->error());
    QVERIFY(mv->previous_text().isEmpty());
  }

  // One measured step against the simulated one: the chosen step's events from 0, both
  // timelines on one axis, and the view says which step it took.
  void timeline_sets_one_measured_step_against_the_simulated_one() {
    Lab lab;
    std::vector<trace::Event> events;
    for (int step = 3; step <= 5; ++step) {
      const double t0 = 10.0 + step;  // steps one second apart; step 4 lasts 0.5 s
      const double len = step == 4 ? 0.5 : 0.25;
      events.push_back({0, "compute", "forward", t0, t0 + len / 2, {{"step", std::to_string(step)}}});
      events.push_back({1, "comm", "all-reduce", t0 + len / 2, t0 + len, {{"step", std::to_string(step)}}});
    }
    const std::string path = lab.dir.filePath("trace.json").toStdString();
    trace::write_chrome_trace_file(path, events);
    TimelineView* tv = lab.window->timeline_view();
    tv->load_measured(QString::fromStdString(path));
    QCOMPARE(tv->measured_step().value_or(-1), 4);  // the middle of steps 3..5
    QCOMPARE(lab.window->measured_timeline()->rowCount(), 2);
    QVERIFY(std::abs(lab.window->measured_timeline()->span_seconds() - 0.5) < 1e-6);
    QVERIFY(tv->alignment_text().contains("Measured step 4"));
    tv->simulate();
    QVERIFY(wait_until([&] { return !tv->job()->running(); }, 60000));
    const double sim = lab.window->simulated_timeline()->span_seconds();
    QVERIFY(sim > 0);
    QCOMPARE(tv->simulated_widget()->axis_seconds(), std::max(sim, 0.5));
    QCOMPARE(tv->measured_widget()->axis_seconds(), tv->simulated_widget()->axis_seconds());
    tv->show_measured_step(5);
    QCOMPARE(tv->measured_step().value_or(-1), 5);
    QVERIFY(std::abs(lab.window->measured_timeline()->span_seconds() - 0.25) < 1e-6);
    QVERIFY(tv->alignment_text().contains("Measured step 5 (of steps 3..5"));
  }

  void scaling_lab_preset_is_the_libraries() {
    Lab lab;
    lab.window->speedup_view()->set_preset(SpeedupView::kScalingLab);
    const ChartSeries* s = lab.window->speedup_view()->panel()->chart()->series("analytic");
    QVERIFY(s);
    const auto rows = strategy::scaling_lab(strategy::ScalingLabInputs{});
    QCOMPARE(s->points.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      QCOMPARE(s->points[i].x(), double(rows[i].workers));
      QCOMPARE(s->points[i].y(), rows[i].speedup);
    }
    // The chapter's example: two workers reach about 1.9x.
    QVERIFY(std::abs(s->points[1].y() - 1.914) < 0.01);
  }

  void over_capacity_plan_is_marked_not_fitting() {
    Lab lab;
    SetupInputs in;
    in.model = "gpt-175b";
    in.cluster = "dgx-a100";
    in.workers = 8;
    lab.setup()->set_inputs(in);
    QVERIFY2(!lab.setup()->error(), lab.setup()->error() ? lab.setup()->error()->message.c_str() : "");
    const Expected e = expected("gpt-175b", "dgx-a100", 8, "");
    QVERIFY(!strategy::compute_ledger(e.model, e.plan, e.cluster, 0).fits());  // the library's verdict
    check_memory(lab, e);
    QVERIFY(!lab.window->memory_model()->all_fit());
    for (const QString& c : lab.window->memory_view()->panel()->chart()->spec().categories)
      QVERIFY2(c.contains("✗"), qPrintable(c));
    QVERIFY(lab.window->memory_view()->fit_text().contains("NOT fit"));
    const strategy::RuleVerdict v = strategy::apply_rule(strategy::rule_inputs(e.model, e.plan, e.cluster));
    QVERIFY(!v.ddp_fits);
    QVERIFY(lab.window->memory_view()->verdict_text().contains(QString::fromStdString(v.blocker)));
    // Split over 64 devices (8 nodes) with ZeRO-3 and full recompute: the library says it fits, and nothing is marked.
    in.workers = 64;
    in.set("zero", "3");
    in.set("mb", "1");
    in.set("recompute", "full");
    lab.setup()->set_inputs(in);
    QVERIFY2(!lab.setup()->error(), lab.setup()->error() ? lab.setup()->error()->message.c_str() : "");
    const Expected fit = expected("gpt-175b", "dgx-a100", 64, "zero=3,mb=1,recompute=full");
    QVERIFY(lab.window->memory_model()->per_stage());  // 64 ranks: one row per stage
    const bool fits = strategy::worst_stage(strategy::ledger_per_stage(fit.model, fit.plan, fit.cluster)).fits();
    QVERIFY(fits);
    QVERIFY(lab.window->memory_model()->all_fit());
    for (const QString& c : lab.window->memory_view()->panel()->chart()->spec().categories)
      QVERIFY2(!c.contains("✗"), qPrintable(c));
    QVERIFY(lab.window->memory_view()->fit_text().contains("fits"));
  }

  void every_item_model_passes_the_tester() {
    Lab lab;
    using Mode = QAbstractItemModelTester::FailureReportingMode;
    MainWindow* w = lab.window.get();
    QAbstractItemModelTester t1(w->memory_model(), Mode::QtTest);
    QAbstractItemModelTester t2(w->speedup_model(), Mode::QtTest);
    QAbstractItemModelTester t3(w->candidates_model(), Mode::QtTest);
    QAbstractItemModelTester t4(w->simulated_timeline(), Mode::QtTest);
    QAbstractItemModelTester t5(w->measured_timeline(), Mode::QtTest);
    QAbstractItemModelTester t6(w->history_model(), Mode::QtTest);
    QAbstractItemModelTester t7(w->history_view()->filter(), Mode::QtTest);
    QAbstractItemModelTester t8(w->predictions_model(), Mode::QtTest);
    LiveStepsModel live;
    QAbstractItemModelTester t9(&live, Mode::QtTest);
    QAbstractItemModelTester t10(w->lesson_view()->model(), Mode::QtTest);

    set_workers(lab.setup(), 4);
    type_into(lab.setup(), "tp", "2");
    QVERIFY(wait_until([&] { return !w->plan_view()->job()->running(); }, 60000));
    QVERIFY(w->candidates_model()->rowCount() > 0);
    w->speedup_view()->simulate();
    QVERIFY(wait_until([&] { return !w->speedup_view()->job()->running(); }, 60000));
    QVERIFY(w->speedup_model()->value(0, SpeedupModel::kSimulatedStep).has_value());
    w->timeline_view()->simulate();
    QVERIFY(wait_until([&] { return !w->timeline_view()->job()->running(); }, 60000));
    QVERIFY(w->simulated_timeline()->rowCount() > 0);
    {
      auto store = db::ResultsStore::open(lab.options.db.toStdString());
      const db::RunId run =
          store.begin_run({.kind = db::RunKind::kMeasured, .model = "lab-mlp", .cluster = "cpu-local"});
      store.add_incident(run, {.kind = db::IncidentKind::kKilled, .rank = 1, .detail = "injected"});
      store.mark_run_status(run, db::RunStatus::kKilled);
      store.add_prediction({.model = "lab-mlp", .world_size = 2, .predicted = 1.7, .reason = "halves"});
    }
    w->history_view()->reload();
    QCOMPARE(w->history_model()->rowCount(), 3);
    w->history_view()->kind_field()->setCurrentText("run");
    QCOMPARE(w->history_view()->filter()->rowCount(), 1);
    w->history_view()->filter_field()->setText("nothing matches this");
    QCOMPARE(w->history_view()->filter()->rowCount(), 0);
    w->predictions_model()->load(lab.options.db.toStdString());
    QCOMPARE(w->predictions_model()->rowCount(), 1);
    w->lesson_view()->reload();
    QCOMPARE(w->lesson_view()->model()->rowCount(), 5);
    live.add(0, 1.5, 0.01);
    live.add(1, 1.2, 0.01);
    live.clear();
    w->memory_model()->clear();
  }

  // A speedup row is one plan (the setup's split at W, keyed by its whole text), and a measured
  // speedup is strategy/measures.h's: the median of paired per-round ratios where the runs
  // recorded their rounds -- on noisy rounds not the ratio of the medians.
  void speedup_rows_are_plans_and_measured_speedups_are_paired() {
    Lab lab;
    set_workers(lab.setup(), 2);
    QVERIFY(lab.setup()->setup());
    const LabSetup s = *lab.setup()->setup();
    SpeedupModel* m = lab.window->speedup_model();
    QVERIFY(m->rowCount() >= 2);
    for (const SpeedupPoint& p : m->rows()) QCOMPARE(p.plan, plan_at_workers(s, p.workers).to_string());
    const std::vector<double> one = {1.0, 1.2, 1.0}, two = {0.5, 0.6, 0.55};
    {
      auto store = db::ResultsStore::open(lab.options.db.toStdString());
      for (const auto& [w, v] : {std::pair{1, one}, std::pair{2, two}}) {
        const db::RunId id = store.begin_run({.kind = db::RunKind::kMeasured,
                                              .model = s.inputs.model_label(),
                                              .cluster = s.inputs.cluster,
                                              .plan = strategy::to_json(plan_at_workers(s, w)),
                                              .world_size = w});
        store.set_run_metric(id, "step_seconds", parlab::median(v));
        store.set_run_metric(id, "rounds.step_seconds", parlab::median(v));
        for (size_t r = 0; r < v.size(); ++r) store.set_run_metric(id, strategy::round_step_metric(int(r)), v[r]);
        store.mark_run_status(id, db::RunStatus::kCompleted);
      }
    }
    lab.window->speedup_view()->refresh_measured();
    const int r2 = m->row_of(2);
    QCOMPARE(m->row_of_plan(plan_at_workers(s, 2).to_string()), r2);
    const double g1 = double(plan_at_workers(s, 1).global_batch), g2 = double(plan_at_workers(s, 2).global_batch);
    const double paired = strategy::speedup(one, two, g1, g2).value;
    QCOMPARE(m->value(r2, SpeedupModel::kMeasuredSpeedup).value(), paired);
    QVERIFY(std::fabs(paired - strategy::speedup(parlab::median(one), parlab::median(two), g1, g2)) > 0.1);
    QCOMPARE(m->value(r2, SpeedupModel::kMeasuredEfficiency).value(), strategy::efficiency(paired, 2, 1));
    QVERIFY(!m->set_step_of_plan("no such plan", SeriesSource::kMeasured, 1.0));
    QVERIFY(m->set_step_of_plan(plan_at_workers(s, 2).to_string(), SeriesSource::kSimulated, 0.5));
    QCOMPARE(m->value(r2, SpeedupModel::kSimulatedStep).value(), 0.5);
  }

  // "Measure the top candidates" writes the decide experiment for the setup and runs it through
  // `parlab experiment run` into the lab's database; its headline comes back. A stand-in parlab
  // records what it was asked and prints the batch summary's line (the training is the
  // experiments' tests').
  void measure_top_candidates_runs_the_decide_experiment() {
    Lab lab;
    set_workers(lab.setup(), 2);
    PlanView* v = lab.window->plan_view();
    QVERIFY(v->measure_button()->isEnabled());
    const QString fake = lab.dir.filePath("parlab-fake.sh"), args = lab.dir.filePath("args.txt");
    QVERIFY(write_executable(fake, ("#!/bin/sh\necho \"$@\" > '" + args + "'\ncat \"$3\" >> '" + args +
                                    "'\n"
                                    "echo 'decide_like: running' >&2\n"
                                    "echo 'lab_decide  decide  ok  1.0 s  1-4  first choice DDP x2: regret 0.0% "
                                    "against the fastest measured, DDP x2'\n")
                                       .toUtf8()));
    const QByteArray saved = qgetenv("PARLAB_BIN");
    qputenv("PARLAB_BIN", fake.toUtf8());
    QTest::mouseClick(v->measure_button(), Qt::LeftButton);
    QVERIFY(!v->measure_button()->isEnabled());  // one measurement at a time
    QVERIFY(wait_until([&] { return v->decision().startsWith("Measured"); }, 30000));
    qputenv("PARLAB_BIN", saved);
    QCOMPARE(v->decision(), QString("Measured: first choice DDP x2: regret 0.0% against the fastest measured, DDP x2"));
    QVERIFY(v->measure_button()->isEnabled());
    QFile a(args);
    QVERIFY(a.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(a.readAll());
    QVERIFY2(text.startsWith("experiment run " + runs_dir_of(lab.options) + "/lab_decide.toml --db " + lab.options.db),
             qPrintable(text));
    QVERIFY2(text.contains("kind = \"decide\""), qPrintable(text));
    QVERIFY2(text.contains("workers = 2\n"), qPrintable(text));
    QVERIFY2(text.contains("gbs = " + QString::number(lab.setup()->setup()->plan.global_batch) + "\n"),
             qPrintable(text));
  }

  // `parlab plan --json`'s on_this_machine (cli/cmd_plan.cpp; its contents are held by
  // BatchEndToEnd.PlanPricesItsCandidatesOnProfilesOfThisMachine) read back: every candidate, the
  // choice, and the grid's favourite named where the profiles put another first.
  void machine_pricing_reads_the_plan_commands_json() {
    const QByteArray json = kPricedJson;
    const MachinePricing p = parse_machine_pricing(json);
    QCOMPARE(int(p.candidates.size()), 3);
    QCOMPARE(QString::fromStdString(p.choice), QString("zero=1,dp=2"));
    QCOMPARE(QString::fromStdString(p.candidates[1].name), QString("TP 2"));
    QCOMPARE(p.candidates[1].grid_seconds, 0.150);
    QCOMPARE(p.candidates[1].profile_seconds, 0.215);
    QCOMPARE(QString::fromStdString(p.candidates[2].family), QString("DDP"));
    QCOMPARE(int(p.notes.size()), 1);
    const QString text = describe_machine_pricing(p, 2);
    QVERIFY2(text.contains("Choice on this machine: ZeRO-1 x2"), qPrintable(text));
    QVERIFY2(text.contains("137.0 ms (grid 155.0 ms)"), qPrintable(text));
    QVERIFY2(text.contains("The grid put TP 2 first"), qPrintable(text));
    bool threw = false;
    try {
      parse_machine_pricing("{\"top\": []}");
    } catch (const std::exception& e) {
      threw = QString(e.what()).contains("on_this_machine");
    }
    QVERIFY2(threw, "a plan output without on_this_machine must say so");
    threw = false;
    try {
      parse_machine_pricing("not json");
    } catch (const std::exception& e) {
      threw = QString(e.what()).contains("not JSON");
    }
    QVERIFY(threw);
  }

  // "Price on this machine" runs `parlab plan --profile --json` for the setup and shows the
  // choice on this machine; a failure shows the command's own message. A stand-in parlab records
  // its arguments and prints what the real one prints (the profiles are the experiments' tests').
  void price_on_this_machine_runs_the_profiled_plan() {
    Lab lab;
    set_workers(lab.setup(), 2);
    PlanView* v = lab.window->plan_view();
    QVERIFY(v->price_button()->isEnabled());
    const QString fake = lab.dir.filePath("parlab-plan-fake.sh"), args = lab.dir.filePath("plan-args.txt"),
                  out = lab.dir.filePath("plan.json");
    {
      QFile o(out);
      QVERIFY(o.open(QIODevice::WriteOnly));
      o.write(kPricedJson);
    }
    QVERIFY(write_executable(
        fake,
        ("#!/bin/sh\necho \"$@\" > '" + args + "'\necho '  profiling the workload ...' >&2\n" +
         "if [ -n \"$FAKE_FAIL\" ]; then echo 'parlab: --profile: needs a calibrated cpu-local' >&2; exit 2; fi\n" +
         "cat '" + out + "'\n")
            .toUtf8()));
    const QByteArray saved = qgetenv("PARLAB_BIN");
    qputenv("PARLAB_BIN", fake.toUtf8());
    QTest::mouseClick(v->price_button(), Qt::LeftButton);
    QVERIFY(!v->price_button()->isEnabled());  // one pricing at a time
    QVERIFY(wait_until([&] { return v->decision().contains("Choice on this machine"); }, 30000));
    QVERIFY(v->price_button()->isEnabled());
    QFile a(args);
    QVERIFY(a.open(QIODevice::ReadOnly));
    const QString text = QString::fromUtf8(a.readAll()).trimmed();
    const QString gbs = QString::number(lab.setup()->setup()->plan.global_batch);
    QVERIFY2(text.startsWith("plan --model "), qPrintable(text));
    QVERIFY2(text.endsWith("--world 2 --gbs " + gbs + " --profile --json"), qPrintable(text));
    qputenv("FAKE_FAIL", "1");
    QTest::mouseClick(v->price_button(), Qt::LeftButton);
    QVERIFY(wait_until([&] { return v->decision().startsWith("Not priced"); }, 30000));
    qunsetenv("FAKE_FAIL");
    qputenv("PARLAB_BIN", saved);
    QVERIFY2(v->decision().contains("needs a calibrated cpu-local"), qPrintable(v->decision()));
  }

  void every_view_is_reachable_by_keyboard() {
    Lab lab;
    lab.window->show();
    lab.window->activateWindow();
    QVERIFY(QTest::qWaitForWindowActive(lab.window.get()));
    QTabWidget* tabs = lab.window->tabs();
    for (int i = tabs->count() - 1; i >= 0; --i) {
      QTest::keyClick(lab.window.get(), Qt::Key(Qt::Key_1 + i), Qt::ControlModifier);
      QCOMPARE(tabs->currentIndex(), i);
    }
    // A chart's table toggle is a keyboard-reachable button that shows the same model's numbers.
    ChartPanel* p = lab.window->memory_view()->panel();
    QVERIFY(p->table_toggle()->focusPolicy() & Qt::TabFocus);
    QTest::keyClick(lab.window.get(), Qt::Key_1, Qt::ControlModifier);
    p->table_toggle()->setFocus();
    QTest::keyClick(p->table_toggle(), Qt::Key_Space);
    QVERIFY(p->showing_table());
    QCOMPARE(p->table()->model(), static_cast<QAbstractItemModel*>(lab.window->memory_model()));
    QTest::keyClick(lab.window.get(), Qt::Key_L, Qt::ControlModifier);
    QCOMPARE(QApplication::focusWidget(), lab.setup()->field("model"));
  }

  void opening_a_run_loads_its_plan_into_the_setup() {
    Lab lab;
    const Expected e = expected("lab-mlp", "cpu-local", 4, "tp=2,zero=1,gbs=256");
    {
      auto store = db::ResultsStore::open(lab.options.db.toStdString());
      store.begin_run({.kind = db::RunKind::kMeasured,
                       .model = "lab-mlp",
                       .cluster = "cpu-local",
                       .plan = strategy::to_json(e.plan),
                       .world_size = 4});
    }
    lab.window->history_view()->reload();
    lab.window->history_view()->kind_field()->setCurrentText("run");
    QVERIFY(lab.window->history_view()->open_row(0));
    QVERIFY2(!lab.setup()->error(), lab.setup()->error() ? lab.setup()->error()->message.c_str() : "");
    const strategy::Plan& p = lab.setup()->setup()->plan;
    QCOMPARE(lab.setup()->setup()->world(), 4);
    QCOMPARE(p.tp, e.plan.tp);
    QCOMPARE(p.dp, e.plan.dp);
    QCOMPARE(p.zero, e.plan.zero);
    QCOMPARE(p.global_batch, e.plan.global_batch);
    QCOMPARE(p.to_string(), e.plan.to_string());
    check_memory(lab, e);
  }
};

QTEST_MAIN(GuiModelsTest)
#include "gui_models_test.moc"
