// parlab compare: simulated and analytic step times against the measured ones, from the database.
#include <fmt/core.h>

#include <filesystem>

#include "cli/checks.h"
#include "cli/common.h"
#include "db/results_store.h"
#include "experiments/lib/compare.h"
#include "base/errors.h"

namespace parlab::cli {

void add_compare_command(CLI::App& app) {
  struct Options {
    std::string experiment = "scaling_1_2_4";
    std::string db = db::kDefaultDatabasePath;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "compare",
      "Simulated vs measured: one row per plan of an experiment (worker count and split), the measured\n"
      "step time and speedup beside the (calibrated) simulation's and the analytic model's, with their errors.");
  cmd->add_option("--experiment,-e", o->experiment, "Experiment name")->capture_default_str();
  cmd->add_option("--db", o->db, "Results database")->capture_default_str();
  cmd->add_flag("--json", o->json, "Machine-readable output");
  cmd->callback([o] {
    auto store = open_results("--db", o->db, /*read_only=*/true);
    const auto c = experiments::compare_experiment(store, o->experiment);
    if (o->json) {
      nlohmann::json rows = nlohmann::json::array();
      for (size_t i = 0; i < c.rows.size(); ++i) {
        const auto& r = c.rows[i];
        nlohmann::json j{{"workers", r.world}, {"plan", r.plan}, {"split", r.split}, {"global_batch", r.global_batch}};
        if (r.measured) j["measured_step_seconds"] = *r.measured;
        if (r.measured_spread) j["measured_spread_seconds"] = *r.measured_spread;
        if (!r.measured_rounds.empty()) j["measured_round_step_seconds"] = r.measured_rounds;
        if (const auto x = c.measured_speedup(i)) j["measured_speedup"] = *x;
        if (r.measured_others_cores) j["measured_others_busy_cores"] = *r.measured_others_cores;
        if (r.simulated) j["simulated_step_seconds"] = *r.simulated;
        if (r.analytic) j["analytic_step_seconds"] = *r.analytic;
        if (const auto e = r.simulated_error()) j["simulated_error"] = *e;
        if (const auto e = r.analytic_error()) j["analytic_error"] = *e;
        rows.push_back(j);
      }
      nlohmann::json out{{"experiment", c.experiment}, {"rows", rows}};
      if (c.worst_simulated_error) out["worst_simulated_error"] = *c.worst_simulated_error;
      if (c.worst_analytic_error) out["worst_analytic_error"] = *c.worst_analytic_error;
      return print_json(out);
    }
    fmt::print(
        "{}: step time per plan (speedup = t1/tW x gbs_W/gbs_1 against the first row; error = prediction/measured - "
        "1)\n\n{}",
        c.experiment, c.table());
    if (c.worst_simulated_error)
      fmt::print(
          "\nLargest error: simulated {:.1f}%, analytic {:.1f}% (goal for the calibrated simulation: within 15%).\n",
          100 * *c.worst_simulated_error, 100 * c.worst_analytic_error.value_or(0));
  });
}

}  // namespace parlab::cli
