// parlab experiment: run experiment definitions as a batch and record everything in the
// results database; list what the database holds.
#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "experiments/lib/runner.h"
#include "base/errors.h"
#include "base/units.h"
#include "parlab/source_dir.h"

namespace parlab::cli {
namespace fs = std::filesystem;
namespace {

// An experiment is a path, or a name found in ./experiments or the source tree's experiments/.
fs::path find_experiment(const std::string& name) {
  const fs::path direct(name);
  if (fs::exists(direct)) return direct;
  for (const fs::path& dir : {fs::path("experiments"), fs::path(PARLAB_SOURCE_DIR) / "experiments"}) {
    const fs::path p = dir / (name + (name.ends_with(".toml") ? "" : ".toml"));
    if (fs::exists(p)) return p;
  }
  throw ConfigError("experiment", name,
                    "no such file, and no experiments/" + name + (name.ends_with(".toml") ? "" : ".toml"));
}

std::string self_binary() {
  std::error_code ec;
  const auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("parlab") : p.string();
}

struct ExperimentOptions {
  std::vector<std::string> files;
  std::string db = db::kDefaultDatabasePath;
};

// What the batch prints has two streams: results (tables, on stdout) and progress (on stderr).
// Each is written whole and flushed, so where both reach one terminal or file they alternate
// line-complete and in order, never one inside the other.
void results_block(const std::string& text) {
  if (text.empty()) return;
  std::fputs(text.c_str(), stdout);
  std::fflush(stdout);
}

void progress_line(const std::string& line) {
  std::fflush(stdout);
  std::fputs((line + "\n").c_str(), stderr);
  std::fflush(stderr);
}

void run_batch(const ExperimentOptions& o) {
  if (o.files.empty()) throw ConfigError("experiment run", "(none)", "name at least one experiment file");
  // Parse everything first: a typo in the fourth file should not surface after three ran.
  std::vector<experiments::ExperimentSpec> specs;
  for (const auto& f : o.files) specs.push_back(experiments::load_experiment(find_experiment(f)));
  auto store = open_results("--db", o.db, /*read_only=*/false);
  experiments::RunnerOptions ro;
  ro.parlab_bin = self_binary();
  ro.work_dir = fs::path(o.db).parent_path() / "runs";
  std::vector<experiments::Outcome> outcomes;
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& spec = specs[i];
    const std::string prefix = fmt::format("[{}/{}] {}", i + 1, specs.size(), spec.name);
    ro.progress = [prefix](const std::string& line) {
      progress_line(fmt::format("{}{}", prefix, line.rfind("  ", 0) == 0 ? ":" + line.substr(1) : ": " + line));
    };
    // Each block goes out whole, before the progress of the next experiment: stdout into a pipe
    // is block-buffered, and a buffer flushed mid-table put "[2/7] ..." lines inside the tables
    // of `quickstart.sh 2>&1 | tee` (stderr is unbuffered).
    results_block(
        fmt::format("\n== {} — {} ==\n{}", spec.name, spec.title, spec.notice.empty() ? "" : spec.notice + "\n\n"));
    progress_line(fmt::format("{}: running ({})", prefix, spec.kind));
    auto out = experiments::run_experiment(spec, store, ro);
    results_block(out.report + (out.error.empty() ? "" : "FAILED: " + out.error + "\n"));
    outcomes.push_back(std::move(out));
  }
  results_block("\n== Summary ==\n");
  Table t({"experiment", "kind", "result", "time", "runs", "headline"});
  bool all_ok = true;
  for (const auto& out : outcomes) {
    all_ok = all_ok && out.ok;
    std::string runs;
    if (!out.runs.empty())
      runs = out.runs.size() == 1 ? std::to_string(out.runs.front())
                                  : fmt::format("{}-{}", out.runs.front(), out.runs.back());
    t.add({out.name, out.kind, out.ok ? "ok" : "FAILED", units::format_seconds(out.seconds), runs, out.headline});
  }
  results_block(fmt::format("{}\nResults are in {} (parlab experiment list --db {}).\n", t.str(), o.db, o.db));
  if (!all_ok) throw RuntimeError("some experiments failed (see above); their partial results are in " + o.db);
}

void list_db(const ExperimentOptions& o) {
  auto store = open_results("--db", o.db, /*read_only=*/true);
  Table t({"experiment", "runs", "analytic", "simulated", "measured", "failed/killed", "proofs"});
  for (const auto& e : store.list_experiments()) {
    int kinds[3] = {0, 0, 0}, bad = 0;
    const auto runs = store.runs_of_experiment(e.id);
    for (const auto& r : runs) {
      ++kinds[int(r.kind)];
      bad += r.status == db::RunStatus::kFailed || r.status == db::RunStatus::kKilled;
    }
    int passed = 0, total = 0;
    for (const auto& p : store.proofs_of_experiment(e.id)) ++total, passed += p.passed;
    t.add({e.name, std::to_string(runs.size()), std::to_string(kinds[0]), std::to_string(kinds[1]),
           std::to_string(kinds[2]), std::to_string(bad), total ? fmt::format("{}/{} passed", passed, total) : "-"});
  }
  fmt::print("{} (schema v{})\n{}", o.db, store.schema_version(), t.str());
}

}  // namespace

void add_experiment_command(CLI::App& app) {
  auto o = std::make_shared<ExperimentOptions>();
  CLI::App* cmd =
      app.add_subcommand("experiment", "Run experiment definitions (experiments/*.toml) and list recorded results");
  cmd->require_subcommand(1);
  CLI::App* run =
      cmd->add_subcommand("run",
                          "Run experiments as a batch, record every result in the database, print a summary.\n"
                          "FILE is a path or a name in experiments/ (seed_budget, scaling_1_2_4, equivalence,\n"
                          "kill_resume, allreduce_lab, llm_planning). Kinds: " +
                              experiments::experiment_kinds());
  run->add_option("files", o->files, "Experiment files or names")->required();
  run->add_option("--db", o->db, "Results database")->capture_default_str();
  run->callback([o] { run_batch(*o); });
  CLI::App* list = cmd->add_subcommand("list", "What the results database holds, per experiment");
  list->add_option("--db", o->db, "Results database")->capture_default_str();
  list->callback([o] { list_db(*o); });
}

}  // namespace parlab::cli
