// parlab grade: a results database against a rubric (rubric/grade.h) — one learner's report in
// text, Markdown, HTML, JSON or Gradescope's results.json, or with --class a folder of databases
// as one class table (CSV and HTML).
#include <fmt/core.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "cli/common.h"
#include "rubric/checks.h"
#include "rubric/class_report.h"
#include "rubric/grade.h"
#include "rubric/report.h"
#include "base/errors.h"

namespace parlab::cli {
namespace fs = std::filesystem;
namespace {

struct GradeCliOptions {
  std::string db;
  std::string class_dir;
  std::string rubric;
  std::string format = "text";
  std::string out;
  std::string hardware;
  bool verify = false;
  bool accept_unchained = false;
  bool list_checks = false;
};

// Writes `text` to <out>/<name>, or to stdout without --out.
void emit(const GradeCliOptions& o, const std::string& name, const std::string& text) {
  if (o.out.empty()) {
    fmt::print("{}", text);
    return;
  }
  fs::create_directories(o.out);
  const fs::path file = fs::path(o.out) / name;
  std::ofstream f(file);
  f << text;
  if (!f) throw RuntimeError("cannot write " + file.string());
  fmt::print(stderr, "wrote {}\n", file.string());
}

std::string self_binary() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("parlab") : p.string();
}

void list_checks() {
  for (const rubric::CheckKind& k : rubric::check_kinds()) {
    fmt::print("{}  (reads proofs of kind '{}')\n  {}\n", k.name, k.proof_kind.empty() ? "-" : k.proof_kind, k.what);
    for (const auto& t : k.thresholds) fmt::print("    thresholds.{} = {:g}  {}\n", t.name, t.default_value, t.meaning);
    for (const auto& l : k.lists) fmt::print("    {} = [...]\n", l);
  }
}

void run_grade(const GradeCliOptions& o) {
  if (o.list_checks) return list_checks();
  if (o.db.empty() == o.class_dir.empty())
    throw ConfigError("--db/--class", "(both or neither)", "give exactly one: --db FILE or --class DIR");
  const rubric::Rubric rubric = o.rubric.empty() ? rubric::default_rubric() : rubric::load_rubric(o.rubric);
  rubric::GradeOptions go;
  go.verify = o.verify;
  go.accept_unchained = o.accept_unchained;
  go.hardware = o.hardware;
  go.parlab_bin = self_binary();
  if (!o.out.empty()) go.work_dir = fs::path(o.out) / "verify-runs";
  go.progress = [](const std::string& line) { fmt::print(stderr, "verify: {}\n", line); };

  if (!o.class_dir.empty()) {
    const rubric::ClassReport c = rubric::grade_class(o.class_dir, rubric, go);
    if (o.out.empty()) {
      fmt::print("{}", rubric::class_csv(c));
      return;
    }
    emit(o, "class.csv", rubric::class_csv(c));
    emit(o, "class.html", rubric::class_html(c));
    return;
  }
  const rubric::Report report = rubric::grade_file(o.db, rubric, go);
  if (o.format == "text")
    emit(o, "report.txt", rubric::render_text(report));
  else if (o.format == "md")
    emit(o, "report.md", rubric::render_markdown(report));
  else if (o.format == "json")
    emit(o, "report.json", rubric::to_json(report).dump(2) + "\n");
  else if (o.format == "gradescope")
    emit(o, "results.json", rubric::gradescope_json(report).dump(2) + "\n");
  else {
    // The charts read the same evidence the grade did.
    auto store = db::ResultsStore::open(o.db, {.sweep_stale_runs = false});
    emit(o, "report.html", rubric::render_html(report, rubric::read_evidence(store, o.accept_unchained)));
  }
  if (!o.out.empty())
    fmt::print("{}: {:g}/{:g} = {:.1f}% ({})\n", o.db, report.score, report.max_score, report.percent(),
               report.passed ? "passed" : "not passed");
}

}  // namespace

void add_grade_command(CLI::App& app) {
  auto o = std::make_shared<GradeCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "grade", "Grade a results database against a rubric (default: the chapter's, rubric/parallelism.toml)");
  cmd->footer(
      "Statuses: passed, failed, missing (no evidence), blocked (needs hardware the learner's machine lacks;\n"
      "reported apart, not counted). Performance points count only when their correctness gate passed.\n"
      "Only proof rows that still match their digest are credited: a row edited afterwards is reported\n"
      "as tampered and earns nothing.\n\n"
      "Examples:\n"
      "  parlab grade --db results/parlab.db\n"
      "  parlab grade --db learner.db --format gradescope --out /autograder/results   # results.json\n"
      "  parlab grade --db learner.db --format html --out report/ --verify\n"
      "  parlab grade --class submissions/ --out class/                             # class.csv, class.html\n"
      "  parlab grade --list-checks                                                 # what a rubric may use");
  cmd->add_option("--db", o->db, "Results database to grade");
  cmd->add_option("--class", o->class_dir, "Folder of results databases (*.db, one per learner): a class table");
  cmd->add_option("--rubric", o->rubric, "Rubric TOML (default: the built-in rubric/parallelism.toml)");
  cmd->add_option("--format", o->format, "text | md | html | json | gradescope")
      ->check(CLI::IsMember({"text", "md", "html", "json", "gradescope"}))
      ->capture_default_str();
  cmd->add_option("--out", o->out,
                  "Folder to write the report into (report.txt/.md/.html/.json, results.json); default stdout");
  cmd->add_flag("--verify", o->verify,
                "Re-run the cheap checks (seed example, simulations, one kill-resume trial) and mark evidence that "
                "does not reproduce");
  cmd->add_option("--hardware", o->hardware,
                  "cpu | gpu: the learner's machine (default: from the evidence; gpu when a run trained on CUDA)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  cmd->add_flag("--accept-unchained", o->accept_unchained,
                "Credit proofs written before schema v4 (they carry no digest)");
  cmd->add_flag("--list-checks", o->list_checks, "List the checks a rubric criterion may name, with their thresholds");
  cmd->callback([o] { run_grade(*o); });
}

}  // namespace parlab::cli
