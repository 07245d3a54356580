// docs/validation.md is what the code predicts today (parlab validate), and the predictions meet
// the goals where the issue sets them against published figures: the simulated 8-GPU NVLink
// ring all-reduce within 10% of nccl-tests' plateau, the ledger's activations within 3% of
// Korthikanti et al.'s formulas. The Megatron step times (Table 5) are reported in the document
// with their error; the comparison with the committed file catches any change to them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parlab/source_dir.h"
#include "sim/validation.h"

namespace parlab::sim {
namespace {

namespace fs = std::filesystem;

TEST(Validation, DocumentIsCurrent) {
  std::ifstream in(fs::path(PARLAB_SOURCE_DIR) / "docs" / "validation.md");
  ASSERT_TRUE(in) << "docs/validation.md is missing: parlab validate > docs/validation.md";
  std::stringstream committed;
  committed << in.rdbuf();
  EXPECT_EQ(committed.str(), validation_markdown())
      << "docs/validation.md is stale: regenerate it with parlab validate > docs/validation.md";
}

// 1 GiB .. 8 GiB on 8 GPUs of dgx-h100 (nccl-tests: ~370 GB/s) and dgx-a100 (~240 GB/s). At line
// rate (no protocol efficiency) the simulator gave 447 GB/s on H100, 21% high.
TEST(Validation, NvlinkAllReduceBusbwWithinTenPercentOfNcclTests) {
  int compared = 0;
  for (const BusbwRow& r : busbw_rows()) {
    if (r.published_busbw <= 0) continue;
    ++compared;
    EXPECT_LT(std::fabs(r.error()), 0.10) << r.cluster << " " << r.bytes << " B: " << r.simulated_busbw / 1e9 << " GB/s";
  }
  EXPECT_EQ(compared, 8);
}

TEST(Validation, ActivationMemoryWithinThreePercentOfThePaper) {
  for (const ActivationRow& r : activation_rows()) {
    EXPECT_LT(std::fabs(r.error()), 0.03) << r.model << " " << r.variant;
    // The ledger counts everything the formula counts, plus the embedding (and logits): never less.
    EXPECT_GE(r.ledger_bytes, r.paper_bytes) << r.model << " " << r.variant;
  }
}

}  // namespace
}  // namespace parlab::sim
