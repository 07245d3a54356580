// The arrows of docs/DESIGN.md hold in the source tree. The rules are read from DESIGN.md's layout
// table (its source of truth): a file belongs to the deepest folder with a row and may include its
// own folder and the folders its row names in backticks (`runtime/*`: every runtime folder;
// "everything": no rule). Every source folder of the tree must have a row, and the scanner is
// tested on planted trees first, so a scanner (or a table) that saw nothing could not pass.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "parlab/source_dir.h"

namespace {

namespace fs = std::filesystem;

struct Rule {
  bool anything = false;            // "everything"
  std::set<std::string> may;        // folders (exact) it may include
  std::set<std::string> may_under;  // "runtime/*": any folder below these
};
using Rules = std::map<std::string, Rule>;  // folder ("runtime/comm") -> its rule

// The layout table of DESIGN.md: rows "| `folder/` | what | depends on |".
Rules read_rules(const fs::path& design) {
  std::ifstream in(design);
  std::string line;
  bool in_layout = false;
  Rules rules;
  static const std::regex row(R"(^\|\s*`([a-z_/]+)/`\s*\|.*\|\s*([^|]*)\|\s*$)");
  static const std::regex tick(R"(`([a-z_/*]+)`)");
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) in_layout = line == "## Layout";
    std::smatch m;
    if (!in_layout || !std::regex_match(line, m, row)) continue;
    Rule r;
    const std::string deps = m[2].str();
    r.anything = deps.find("everything") != std::string::npos;
    for (auto it = std::sregex_iterator(deps.begin(), deps.end(), tick); it != std::sregex_iterator(); ++it) {
      std::string d = (*it)[1].str();
      if (d.size() > 2 && d.substr(d.size() - 2) == "/*")
        r.may_under.insert(d.substr(0, d.size() - 2));
      else
        r.may.insert(d);
    }
    rules[m[1].str()] = r;
  }
  return rules;
}

// The deepest folder with a row that holds `path` ("runtime/comm/shm/x.h" -> "runtime/comm").
std::optional<std::string> folder_of(const Rules& rules, const std::string& path) {
  std::optional<std::string> best;
  for (const auto& [f, r] : rules)
    if (path.rfind(f + "/", 0) == 0 && (!best || f.size() > best->size())) best = f;
  return best;
}

bool allowed(const Rule& r, const std::string& target) {
  if (r.anything || r.may.count(target)) return true;
  for (const std::string& u : r.may_under)
    if (target.rfind(u + "/", 0) == 0) return true;
  return false;
}

bool is_source(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".h" || ext == ".cpp" || ext == ".cu" || ext == ".cuh";
}

// "path:line: includes X (folder -> target folder)" for every include against the rules, and
// "path: no row" for a source file no row holds.
std::vector<std::string> violations(const fs::path& root, const Rules& rules) {
  static const std::regex include(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::set<std::string> tops;
  for (const auto& [f, r] : rules) tops.insert(f.substr(0, f.find('/')));
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).generic_string();
    const std::string top = rel.substr(0, rel.find('/'));
    if (!e.is_regular_file() || !is_source(e.path()) || rel.find('/') == std::string::npos) continue;
    if (top.rfind("build", 0) == 0 || top[0] == '.' || top == "third_party") continue;  // build trees, hidden folders
    const std::optional<std::string> from = folder_of(rules, rel);
    if (!from) {
      out.push_back(rel + ": no row of DESIGN.md's layout table holds it");
      continue;
    }
    std::ifstream in(e.path());
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
      std::smatch m;
      if (!std::regex_search(line, m, include)) continue;
      const std::string target = m[1].str();
      if (!tops.count(target.substr(0, target.find('/'))) || target.find('/') == std::string::npos) continue;
      const std::optional<std::string> to = folder_of(rules, target);
      if (!to || *to == *from || allowed(rules.at(*from), *to)) continue;
      out.push_back(rel + ":" + std::to_string(n) + ": includes " + target + " (" + *from + " -> " + *to + ")");
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += x + "\n";
  return s;
}

const fs::path kDesign = fs::path(PARLAB_SOURCE_DIR) / "docs" / "DESIGN.md";

TEST(Layers, TableNamesEveryLayer) {
  const Rules rules = read_rules(kDesign);
  for (const char* f : {"base",
                        "strategy",
                        "trace",
                        "sim",
                        "db",
                        "record",
                        "experiments",
                        "rubric",
                        "cli",
                        "gui",
                        "bench",
                        "tests",
                        "runtime/comm",
                        "runtime/comm/nccl",
                        "runtime/compute",
                        "runtime/compute/cuda",
                        "runtime/gpu",
                        "runtime/model",
                        "runtime/model/cuda",
                        "runtime/train",
                        "runtime/device",
                        "runtime/checkpoint",
                        "runtime/launch",
                        "runtime/diagnose"})
    EXPECT_TRUE(rules.count(f)) << f << " has no row in " << kDesign;
  ASSERT_TRUE(rules.count("base"));
  EXPECT_TRUE(rules.at("base").may.empty()) << "base/ sits below everything";
  EXPECT_TRUE(rules.at("cli").anything);
}

// The arrows the issue named, planted into a copy of the tree's rules, are caught; the allowed
// ones next to them are not; a folder without a row is reported.
TEST(Layers, ScannerFindsPlantedCrossings) {
  const Rules rules = read_rules(kDesign);
  const fs::path root = fs::temp_directory_path() / ("parlab-layers-" + std::to_string(::getpid()));
  fs::remove_all(root);
  write(root / "db/a.cpp", "#include \"base/errors.h\"\n#include \"strategy/plan.h\"\n");
  write(root / "runtime/model/b.cpp",
        "#include \"runtime/compute/cpu/kernels.h\"\n#include \"runtime/compute/cuda/kernels.h\"\n");
  write(root / "runtime/model/cuda/ok.cpp",
        "#include \"runtime/compute/cuda/kernels.h\"\n#include \"runtime/model/lab_mlp.h\"\n");
  write(root / "sim/c.cpp", "#include <vector>\n  #  include \"rubric/grade.h\"\n#include \"trace/trace.h\"\n");
  write(root / "runtime/compute/cuda/d.h", "#include \"runtime/model/lab_mlp.h\"\n");  // the old folder cycle
  write(root / "runtime/launch/e.h", "#pragma once\n#include \"db/results_store.h\"\n#include \"strategy/plan.h\"\n");
  write(root / "experiments/lib/ok.cpp", "#include \"runtime/train/trainer.h\"\n#include \"sim/simulate.h\"\n");
  write(root / "strategy/f.h", "#include \"runtime/comm/communicator.h\"\n#include <nlohmann/json.hpp>\n");
  write(root / "newfolder/g.cpp", "#include \"strategy/plan.h\"\n");
  write(root / "runtime/notes.txt", "#include \"db/x.h\"\n");  // not a source file
  const std::vector<std::string> v = violations(root, rules);
  fs::remove_all(root);
  const std::vector<std::string> want = {
      "db/a.cpp:2: includes strategy/plan.h (db -> strategy)",
      "newfolder/g.cpp: no row of DESIGN.md's layout table holds it",
      "runtime/compute/cuda/d.h:1: includes runtime/model/lab_mlp.h (runtime/compute/cuda -> runtime/model)",
      "runtime/launch/e.h:2: includes db/results_store.h (runtime/launch -> db)",
      "runtime/model/b.cpp:2: includes runtime/compute/cuda/kernels.h (runtime/model -> runtime/compute/cuda)",
      "sim/c.cpp:2: includes rubric/grade.h (sim -> rubric)",
      "strategy/f.h:1: includes runtime/comm/communicator.h (strategy -> runtime/comm)",
  };
  EXPECT_EQ(v, want) << joined(v);
}

TEST(Layers, SourceTreeKeepsTheArrows) {
  const fs::path root = PARLAB_SOURCE_DIR;
  const Rules rules = read_rules(kDesign);
  ASSERT_GE(rules.size(), 20u) << "DESIGN.md's layout table was not read";
  const std::vector<std::string> v = violations(root, rules);
  EXPECT_TRUE(v.empty()) << "includes against docs/DESIGN.md's arrows:\n" << joined(v);
}

}  // namespace
