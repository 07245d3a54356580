#pragma once
// `parlab grade --class DIR`: every results database in a folder (*.db, one per learner, named
// after the learner), graded against one rubric; a table with each learner's score and status
// per criterion, and each criterion's pass rate over the class.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "rubric/grade.h"

namespace parlab::rubric {

struct ClassRow {
  std::string learner;  // the file name without .db
  std::filesystem::path db;
  std::optional<Report> report;
  std::string error;  // the database could not be graded (not a parlab file, ...)
};

struct ClassReport {
  std::string rubric_name;
  std::vector<std::string> criteria;  // ids, in rubric order
  std::vector<ClassRow> rows;         // by learner
  // Fraction of graded learners who passed criterion i (blocked ones left out of the count).
  std::vector<double> pass_rates;
  double class_pass_rate = 0;  // learners at or above the pass mark
};

// Throws ConfigError when `dir` is not a folder or holds no *.db file.
ClassReport grade_class(const std::filesystem::path& dir, const Rubric& rubric, const GradeOptions& options = {});
std::string class_csv(const ClassReport& report);
std::string class_html(const ClassReport& report);

}  // namespace parlab::rubric
