// The arrows of docs/DESIGN.md hold in the source tree: no file under runtime/ includes db/ or
// sim/ (or anything above the runtime), strategy/ includes nothing above it, and the trace writer
// depends on nothing but strategy. The scanner is tested on a planted tree first, so a scanner
// that saw nothing could not pass.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "parlab/source_dir.h"

namespace {

namespace fs = std::filesystem;

// For each layer, the top-level folders its files may include (quoted or angled includes whose
// first path component names a folder of the repository; "parlab/" is generated build data).
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> a = {
      {"base", {"base"}},
      {"strategy", {"base", "strategy", "parlab"}},
      {"trace", {"base", "trace", "strategy", "parlab"}},
      {"sim", {"base", "sim", "trace", "strategy", "parlab"}},
      {"runtime", {"base", "runtime", "trace", "strategy", "parlab"}},
  };
  return a;
}

// The repository's own top-level folders: an include starting with any other word is a library's.
const std::set<std::string> kProjectFolders = {"base", "strategy", "trace",  "sim", "runtime", "db",    "record",
                                               "experiments", "rubric", "cli", "gui",   "bench", "tests"};

// "path:line: includes X" for every include of `root`'s layer folders that crosses an arrow.
std::vector<std::string> violations(const fs::path& root) {
  static const std::regex include(R"(^\s*#\s*include\s*[<"]([^>"]+)[>"])");
  std::vector<std::string> out;
  for (const auto& [layer, may] : allowed()) {
    if (!fs::is_directory(root / layer)) continue;
    for (const auto& e : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = e.path().extension().string();
      if (!e.is_regular_file() || (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh")) continue;
      std::ifstream in(e.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        std::smatch m;
        if (!std::regex_search(line, m, include)) continue;
        const std::string target = m[1].str();
        const std::string top = target.substr(0, target.find('/'));
        if (top == target || !kProjectFolders.count(top) || may.count(top)) continue;
        out.push_back(fs::relative(e.path(), root).string() + ":" + std::to_string(n) + ": includes " + target);
      }
    }
  }
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

TEST(Layers, ScannerFindsPlantedCrossings) {
  const fs::path root = fs::temp_directory_path() / ("parlab-layers-" + std::to_string(::getpid()));
  fs::remove_all(root);
  write(root / "runtime/launch/a.h", "#pragma once\n#include \"db/results_store.h\"\n#include \"strategy/plan.h\"\n");
  write(root / "runtime/train/b.cpp", "#include <vector>\n  #  include \"sim/trace.h\"\n#include \"trace/trace.h\"\n");
  write(root / "strategy/c.h", "#include \"runtime/comm/communicator.h\"\n#include <nlohmann/json.hpp>\n");
  write(root / "strategy/ok.h", "#include \"strategy/plan.h\"\n#include \"parlab/version.h\"\n");
  write(root / "sim/d.cpp", "#include \"runtime/train/telemetry.h\"\n");
  write(root / "runtime/notes.txt", "#include \"db/x.h\"\n");  // not a source file
  std::vector<std::string> v = violations(root);
  std::sort(v.begin(), v.end());
  fs::remove_all(root);
  const std::vector<std::string> want = {
      "runtime/launch/a.h:2: includes db/results_store.h", "runtime/train/b.cpp:2: includes sim/trace.h",
      "sim/d.cpp:1: includes runtime/train/telemetry.h", "strategy/c.h:1: includes runtime/comm/communicator.h"};
  EXPECT_EQ(v, want) << joined(v);
}

TEST(Layers, SourceTreeKeepsTheArrows) {
  const fs::path root = PARLAB_SOURCE_DIR;
  ASSERT_TRUE(fs::is_directory(root / "runtime")) << root;
  ASSERT_TRUE(fs::is_directory(root / "strategy")) << root;
  const std::vector<std::string> v = violations(root);
  EXPECT_TRUE(v.empty()) << "includes against docs/DESIGN.md's arrows:\n" << joined(v);
}

}  // namespace
