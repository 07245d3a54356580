// parlab: choose, simulate and run distributed-training parallelism.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>

#include "cli/common.h"
#include "parlab/version.h"
#include "strategy/errors.h"

namespace {

// The last word of a failed command. Plain stdio, because fmt::print throws when stderr cannot be
// written (a full disk under a worker's log): the error would become std::terminate and SIGABRT.
void print_error(const std::string& line) noexcept {
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "parlab: choose, simulate and run distributed-training parallelism.\n"
      "Parallelize the resource that actually exceeds its budget, and stop when the added\n"
      "communication costs more than the split saves."};
  app.set_version_flag("--version", parlab::kVersion);
  app.require_subcommand(1);
  parlab::cli::add_plan_command(app);
  parlab::cli::add_simulate_command(app);
  parlab::cli::add_scaling_command(app);
  parlab::cli::add_experiment_command(app);
  parlab::cli::add_calibrate_command(app);
  parlab::cli::add_compare_command(app);
  parlab::cli::add_analyze_command(app);
  parlab::cli::add_train_command(app);
  parlab::cli::add_bench_command(app);
  parlab::cli::add_proof_command(app);
  parlab::cli::add_runbook_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const parlab::Error& e) {
    print_error(std::string("parlab: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(std::string("parlab: unexpected error: ") + e.what());
    return 1;
  }
  return 0;
}
