// parlab validate: the GPU presets against published measurements -- Megatron's step times
// (Korthikanti et al. 2022, Table 5), nccl-tests' NVLink all-reduce bandwidth and the paper's
// activation-memory formulas -- as predicted by the cost model, the simulator and the ledger
// today; then this machine's CPU table, every split predicted against measured, from a fidelity
// run's database (--db; without one the section says how to make it). docs/validation.md is
// this output; a test keeps the two equal.
#include <fmt/core.h>

#include "cli/checks.h"
#include "cli/common.h"
#include "experiments/lib/cpu_validation.h"
#include "experiments/lib/gpu_validation.h"

namespace parlab::cli {

void add_validate_command(CLI::App& app) {
  auto db = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "validate",
      "Print the validation of the GPU presets against published measurements (Markdown): Megatron step\n"
      "times on A100 (Korthikanti et al. 2022, Table 5), the simulated 8-GPU NVLink all-reduce against\n"
      "nccl-tests, activation memory against the paper's formulas; each figure with its source and the\n"
      "prediction's error. With --db, also this machine's table: every split's simulated step against its\n"
      "measured one (scripts/fidelity-check.sh writes that database). docs/validation.md is this output.");
  cmd->add_option("--db", *db, "A fidelity run's results database: adds its CPU table (split x workers)");
  cmd->callback([db] {
    std::string cpu;
    if (db->empty()) {
      cpu = experiments::cpu_validation_markdown(nullptr);
    } else {
      auto store = open_results("--db", *db, /*read_only=*/true);
      cpu = experiments::cpu_validation_markdown(&store);
    }
    fmt::print("{}\n{}", experiments::gpu_validation_markdown(), cpu);
  });
}

}  // namespace parlab::cli
