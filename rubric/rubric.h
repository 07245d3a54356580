#pragma once
// Rubric definitions as data (rubric/parallelism.toml is the course's; instructors write their
// own in the same form). A rubric is a list of criteria; each names the check that judges it
// (checks.h: which proof kind it reads and what it recomputes), its points, the thresholds the
// check compares figures with, and the correctness criterion its points are gated on.
//
//   name = "parallelism"
//   pass_mark = 0.80
//   [[criterion]]
//   id = "kill_resume"                 # unique; what reports and the class table call it
//   title = "Kill-and-resume is bit-identical in at least 2 trials"
//   points = 15
//   category = "correctness"           # or "performance"
//   check = "kill_resume"              # checks.h: check_kinds()
//   gate = ""                          # performance only: the correctness criterion it needs
//   requires = ""                      # "gpu": blocked (reported apart) on a machine without one
//   fix = "Run `parlab experiment run kill_resume`."
//   [criterion.thresholds]
//   min_trials = 2                     # the check's own names (checks.h), unknown ones rejected
//
// Bad input names the file, the criterion (by index and id) and the field:
//   "my.toml: criterion[2] (kill_resume).thresholds.min_trials = two: must be a number"
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace parlab::rubric {

struct Criterion {
  std::string id;
  std::string title;
  double points = 0;
  std::string category = "correctness";                   // "correctness" | "performance"
  std::string check;                                      // checks.h
  std::string proof;                                      // proof kind read; empty: the check's default
  std::string experiment;                                 // only proofs of this experiment (name); empty: any
  std::string gate;                                       // id of the criterion that must pass for any points
  std::string requires_hardware;                          // "" | "gpu"
  std::string fix;                                        // one line: how to produce or repair the evidence
  std::map<std::string, double> thresholds;               // the check's numbers, defaults filled
  std::map<std::string, std::vector<std::string>> lists;  // the check's lists (e.g. require_splits)

  double threshold(const std::string& name) const;  // throws if the check did not declare it
};

struct Rubric {
  std::string name;
  std::string title;
  std::string source;      // file it came from ("(built in)" for the default)
  double pass_mark = 0.8;  // fraction of the available points
  std::vector<Criterion> criteria;

  const Criterion* find(const std::string& id) const;
  double total_points() const;
};

// Parses rubric TOML. Throws ConfigError naming source, criterion and field.
Rubric parse_rubric(std::string_view text, const std::string& source);
Rubric load_rubric(const std::filesystem::path& path);
// rubric/parallelism.toml as compiled into the library.
const Rubric& default_rubric();
std::string_view default_rubric_text();

}  // namespace parlab::rubric
