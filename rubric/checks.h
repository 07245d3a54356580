#pragma once
// The checks a rubric criterion can name (`check = "..."`): one function each, in one table with
// the proof kind it reads and the thresholds it takes (names, defaults, meaning). The loader
// rejects a threshold a check does not declare; the grader calls the function.
//
// A check recomputes what it can from the proof's inputs and evidence instead of trusting the
// writer's `passed` flag, reads only trusted proofs (evidence.h), and says in one line why.
#include <functional>
#include <string>
#include <vector>

#include "rubric/evidence.h"
#include "rubric/grade.h"
#include "rubric/rubric.h"

namespace parlab::rubric {

struct ThresholdSpec {
  std::string name;
  double default_value = 0;
  std::string meaning;
};

struct CheckKind {
  std::string name;
  std::string proof_kind;  // default proof kind read
  std::string what;        // one sentence for --help and reports
  std::vector<ThresholdSpec> thresholds;
  std::vector<std::string> lists;  // list-valued settings it takes
  // Fills status, measurements, parts, proofs, runs, detail (and integrity notes).
  std::function<void(const Criterion&, const Evidence&, const GradeOptions&, CriterionResult&)> judge;
};

const std::vector<CheckKind>& check_kinds();
const CheckKind* find_check(const std::string& name);

// Split label of a plan text ("gbs=64" -> "ddp", "zero=3,gbs=64" -> "zero-3", "tp=2" -> "tp2").
std::string split_of(const std::string& plan_text);
// The largest number under any key ending in "relative_difference" in `j` (recursively); -1 if none.
double max_relative_difference(const nlohmann::json& j);

}  // namespace parlab::rubric
