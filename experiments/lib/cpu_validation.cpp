#include "experiments/lib/cpu_validation.h"

#include <cmath>
#include <cstdio>

#include "experiments/lib/compare.h"
#include "experiments/lib/fidelity.h"

namespace parlab::experiments {
namespace {

const char* kHeader =
    "## This machine (cpu-local): every split, predicted against measured\n\n"
    "Worker processes on one host, trained for real by `scripts/fidelity-check.sh` (a fresh calibration, then\n"
    "every split on 2, 3 and 4 workers of a model the repository's presets do not hold). Predicted: the calibrated\n"
    "simulation (the analytic walk where a row has no simulation); measured: the median step +- half its\n"
    "interquartile range; error = predicted / measured - 1 (the goal: within 15%; in rounds, the median of\n"
    "each round's error, its prediction made beside its measurement); load: the cores other jobs\n"
    "(or, on a VM, the hypervisor: steal) took during the measurement (above 0.3 it is not of this machine alone).\n\n";

std::string cell(const char* fmt, double x) {
  char b[48];
  std::snprintf(b, sizeof b, fmt, x);
  return b;
}

}  // namespace

std::string cpu_validation_markdown(db::ResultsStore* store) {
  std::string out = std::string(kCpuSectionBegin) + "\n" + kHeader;
  if (!store) {
    out +=
        "No fidelity run is in this build of the document. Run `scripts/fidelity-check.sh`, then\n"
        "`parlab validate --db <its database> > docs/validation.md` to write this machine's table here.\n";
    return out + kCpuSectionEnd + "\n";
  }
  out +=
      "| experiment | split | workers | predicted | measured | error | machine | load |\n"
      "|---|---|---:|---:|---:|---:|---|---:|\n";
  int rows = 0;
  double worst = 0;
  for (const db::ExperimentRecord& e : store->list_experiments()) {
    Comparison c;
    try {
      c = compare_experiment(*store, e.name);
    } catch (const std::exception&) {
      continue;  // no step times (a drill, a ledger)
    }
    for (const CompareRow& r : c.rows) {
      const std::optional<double> predicted = r.simulated ? r.simulated : r.analytic;
      if (!r.measured || !predicted) continue;
      const auto run = store->get_run(*r.measured_run);
      const double err = (r.simulated ? r.simulated_error() : r.analytic_error()).value_or(0);
      worst = std::max(worst, std::fabs(err));
      out += "| " + e.name + " | " + r.split + " | " + std::to_string(r.world) + " | " + format_ms(*predicted) +
             (r.simulated ? "" : " (analytic)") + " | " + format_ms_spread(*r.measured, r.measured_spread.value_or(0)) +
             " | " + format_relative(err) + " | " + (run ? run->host : std::string("?")) + " | " +
             (r.measured_others_cores ? cell("%.2f cores", *r.measured_others_cores) : std::string("-")) + " |\n";
      ++rows;
    }
  }
  out += rows == 0
             ? "\nThe database holds no split with both a prediction and a measurement.\n"
             : "\n" + std::to_string(rows) + " splits; the largest error is " + cell("%.1f%%", 100 * worst) + ".\n";
  return out + kCpuSectionEnd + "\n";
}

std::string without_cpu_section(const std::string& doc) {
  const size_t b = doc.find(kCpuSectionBegin);
  if (b == std::string::npos) return doc;
  const size_t e = doc.find(kCpuSectionEnd, b);
  if (e == std::string::npos) return doc.substr(0, b);
  size_t after = e + std::string(kCpuSectionEnd).size();
  if (after < doc.size() && doc[after] == '\n') ++after;
  return doc.substr(0, b) + doc.substr(after);
}

}  // namespace parlab::experiments
