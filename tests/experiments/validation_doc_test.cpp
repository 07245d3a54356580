// docs/validation.md is what `parlab validate` prints today: its GPU part (experiments/lib/
// gpu_validation.h, regenerated here) byte for byte, then the CPU section (cpu_validation.h,
// measures_consumers_test.cpp holds it). Any change to a prediction, a source or the text fails
// here until the document is regenerated.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "experiments/lib/gpu_validation.h"
#include "parlab/source_dir.h"

namespace parlab::experiments {
namespace {

TEST(Validation, DocumentIsCurrent) {
  std::ifstream in(std::filesystem::path(PARLAB_SOURCE_DIR) / "docs" / "validation.md");
  ASSERT_TRUE(in) << "docs/validation.md is missing: parlab validate > docs/validation.md";
  std::stringstream committed;
  committed << in.rdbuf();
  const std::string doc = committed.str(), gpu = gpu_validation_markdown();
  EXPECT_EQ(doc.substr(0, std::min(doc.size(), gpu.size())), gpu)
      << "docs/validation.md is stale: regenerate it with parlab validate > docs/validation.md";
  EXPECT_EQ(doc.substr(gpu.size(), 32), "\n<!-- cpu-validation: begin -->\n") << "the CPU section follows the GPU part";
}

}  // namespace
}  // namespace parlab::experiments
