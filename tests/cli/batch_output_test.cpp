// The batch runner's two streams through one pipe, as `scripts/quickstart.sh 2>&1 | tee` sees
// them: every experiment's header, progress and result table arrive in order and whole, so no
// table is broken by a progress line. (stdout into a pipe is block-buffered; before the runner
// flushed each block, every header and table arrived after all the progress lines, or cut where
// the buffer filled.)
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "tests/support/scratch_dir.h"
#include "tests/support/subprocess.h"

namespace parlab::testing {
namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool is_progress(const std::string& line) { return line.rfind("[", 0) == 0 && line.find("/") != std::string::npos; }

TEST(BatchOutput, ProgressLinesNeverBreakAResultTableInOneStream) {
  ScratchDir dir;
  const std::string db = (dir.path() / "r.db").string();
  // Both streams into one pipe, in the order the process wrote them.
  const ProcessResult r = run_process(
      {"/bin/sh", "-c", "\"$0\" experiment run seed_budget allreduce_lab --db \"$1\" 2>&1", parlab_bin(), db});
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const std::vector<std::string> lines = lines_of(r.out);
  const std::vector<std::string> names = {"seed_budget", "allreduce_lab"};
  // Per experiment k: its header, then its progress lines, then its report, then the next header.
  int header = -1;  // index into names of the last header seen
  bool in_report = false;
  int progress_lines = 0, report_lines = 0;
  int progress_here = 0;  // progress lines under the current header
  for (const std::string& line : lines) {
    if (line.rfind("== ", 0) == 0) {
      ++header;
      in_report = false;
      progress_here = 0;
      continue;
    }
    if (is_progress(line)) {
      ++progress_lines;
      ++progress_here;
      ASSERT_GE(header, 0) << "a progress line before any header:\n" << r.out;
      ASSERT_LT(header, int(names.size())) << "a progress line after the summary header:\n" << r.out;
      EXPECT_EQ(line.rfind("[" + std::to_string(header + 1) + "/2] " + names[size_t(header)], 0), 0u)
          << "progress of another experiment under header " << header << ": " << line << "\n"
          << r.out;
      EXPECT_FALSE(in_report) << "a progress line inside a result table: " << line << "\n" << r.out;
      continue;
    }
    // The notice follows its header before the progress; after a progress line, it is the report.
    if (progress_here > 0 && !line.empty() && header >= 0 && header < int(names.size()))
      in_report = true, ++report_lines;
  }
  EXPECT_EQ(header, int(names.size())) << "expected two headers and the summary's:\n" << r.out;
  EXPECT_GE(progress_lines, 2) << r.out;
  EXPECT_GT(report_lines, 4) << r.out;
}

}  // namespace
}  // namespace parlab::testing
