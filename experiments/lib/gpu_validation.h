#pragma once
// docs/validation.md's GPU part, as Markdown: the rows sim/validation.h computes (Megatron's step
// times and one layer against Korthikanti et al. 2022, the simulated NVLink ring all-reduce
// against nccl-tests' plateaus and held-out runs, the ledger's activations against the paper's
// formulas) with their sources, errors and what explains them, and the simulator's last recorded
// speed (sim/speed_record.inc, as bench_sim --table --record wrote it). `parlab validate` prints it
// before the CPU section (cpu_validation.h); a test regenerates it and compares it with the
// committed file, so the document always shows what the code predicts today.
#include <string>

namespace parlab::experiments {

std::string gpu_validation_markdown();

}  // namespace parlab::experiments
