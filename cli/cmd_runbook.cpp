// parlab runbook: the hang and straggler runbook (symptom, detector and its thresholds, owner,
// how to name the culprit, mitigation, stop condition, fallback), rendered from the detector
// table the supervisor and the job runner read (runtime/launch/detectors.h). docs/runbook.md is
// `parlab runbook --markdown`; a test keeps the two equal.
#include <fmt/core.h>

#include "cli/common.h"
#include "runtime/launch/detectors.h"

namespace parlab::cli {

void add_runbook_command(CLI::App& app) {
  auto markdown = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "runbook",
      "Print the hang and straggler runbook: what you see, the detector that fires and its thresholds,\n"
      "who owns it, the command that names the culprit, the mitigation, the stop condition and the\n"
      "fallback, from the same constants parlab train uses");
  cmd->add_flag("--markdown", *markdown, "Markdown (docs/runbook.md is this output)");
  cmd->callback([markdown] { fmt::print("{}", launch::render_runbook(*markdown)); });
}

}  // namespace parlab::cli
