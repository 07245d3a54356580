// parlab: choose, simulate and run distributed-training parallelism.
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "cli/common.h"
#include "parlab/version.h"
#include "base/errors.h"

namespace {

// The last word of a failed command. Plain stdio, because fmt::print throws when stderr cannot be
// written (a full disk under a worker's log): the error would become std::terminate and SIGABRT.
void print_error(const std::string& line) noexcept {
  std::fputs(line.c_str(), stderr);
  std::fputc('\n', stderr);
}

// The names of `app`'s subcommands, comma-separated.
std::string subcommand_names(const CLI::App& app) {
  std::string names;
  for (const CLI::App* sub : app.get_subcommands({})) names += (names.empty() ? "" : ", ") + sub->get_name();
  return names;
}

// CLI11's message as one line, made to name the command when the user typed one that does not
// exist or left one out.
std::string parse_error_line(const CLI::App& app, int argc, char** argv, const CLI::ParseError& e) {
  if (argc > 1 && argv[1][0] != '-' && app.get_subcommands().empty())
    return std::string("command = ") + argv[1] + ": no such command; one of " + subcommand_names(app) +
           " (parlab --help)";
  const CLI::App* deepest = &app;
  std::string path = "parlab";
  while (!deepest->get_subcommands().empty()) {
    deepest = deepest->get_subcommands().front();
    path += " " + deepest->get_name();
  }
  std::string line = e.what();
  if (line == "A subcommand is required" && !subcommand_names(*deepest).empty())
    return path + ": a subcommand is required; one of " + subcommand_names(*deepest) + " (" + path + " --help)";
  for (char& c : line)
    if (c == '\n') c = ' ';
  return line + " (" + path + " --help)";
}

// CLI11 converts an integer that does not fit 64 bits to the largest one (strtoll clamps) and
// accepts it: --steps 99999999999999999999 would train for ever. Every option of every command
// refuses integers past 64 bits instead.
void refuse_integer_overflow(CLI::App& app) {
  const CLI::Validator fits(
      [](std::string& value) -> std::string {
        const size_t digits = value.find_first_not_of("0123456789", value[0] == '-' || value[0] == '+' ? 1 : 0);
        if (digits != std::string::npos || value.size() < 19) return {};
        errno = 0;
        if (value[0] == '-')
          (void)std::strtoll(value.c_str(), nullptr, 10);
        else
          (void)std::strtoull(value.c_str(), nullptr, 10);
        return errno == ERANGE ? value + " does not fit a 64-bit integer" : std::string();
      },
      "", "fits 64 bits");
  for (CLI::Option* o : app.get_options())
    if (o->get_type_size_max() > 0) o->check(fits);  // options that take a value (not flags)
  for (CLI::App* sub : app.get_subcommands({})) refuse_integer_overflow(*sub);
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
  parlab::cli::add_grade_command(app);
  parlab::cli::add_validate_command(app);
  refuse_integer_overflow(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return app.exit(e);  // a command's own failure, already reported (its exit code)
  } catch (const CLI::ParseError& e) {
    // Bad input like any other: one line that says what is wrong, exit 2.
    const std::string line = parse_error_line(app, argc, argv, e);
    print_error(line.rfind("parlab", 0) == 0 ? line : "parlab: " + line);
    return 2;
  } catch (const parlab::Error& e) {
    print_error(std::string("parlab: ") + e.what());
    return 2;
  } catch (const std::exception& e) {
    print_error(std::string("parlab: unexpected error: ") + e.what());
    return 1;
  }
  return 0;
}
