// parlab validate: the GPU presets against published measurements -- Megatron's step times
// (Korthikanti et al. 2022, Table 5), nccl-tests' NVLink all-reduce bandwidth and the paper's
// activation-memory formulas -- as predicted by the cost model, the simulator and the ledger
// today. docs/validation.md is this output; a test keeps the two equal.
#include <fmt/core.h>

#include "cli/common.h"
#include "sim/validation.h"

namespace parlab::cli {

void add_validate_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Print the validation of the GPU presets against published measurements (Markdown): Megatron step\n"
      "times on A100 (Korthikanti et al. 2022, Table 5), the simulated 8-GPU NVLink all-reduce against\n"
      "nccl-tests, activation memory against the paper's formulas; each figure with its source and the\n"
      "prediction's error. docs/validation.md is this output. Takes about a second.");
  cmd->callback([] { fmt::print("{}", sim::validation_markdown()); });
}

}  // namespace parlab::cli
