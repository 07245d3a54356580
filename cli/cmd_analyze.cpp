// parlab analyze: name the culprit. `hang` reads every rank's flight-recorder dump (or a
// simulator result) and names the first collective where the ranks disagree; `stragglers`
// reads per-rank timings and names a rank whose compute is an outlier, with its cost.
#include <fmt/core.h>

#include "cli/checks.h"
#include "cli/common.h"
#include "runtime/diagnose/hang_analysis.h"
#include "runtime/diagnose/straggler.h"

namespace parlab::cli {

namespace {

// `analyze hang --json`: every finding with its culprits.
nlohmann::json hang_json(const diagnose::HangAnalysis& a) {
  nlohmann::json f = nlohmann::json::array();
  for (const auto& x : a.findings) {
    nlohmann::json culprits = nlohmann::json::array();
    for (const auto& c : x.culprits)
      culprits.push_back({{"rank", c.rank},
                          {"never_reached", c.never_reached},
                          {"instead", c.instead},
                          {"left_no_dump", c.left_no_dump}});
    f.push_back({{"group", x.group},
                 {"seq", x.seq},
                 {"op", x.op},
                 {"bytes", x.bytes},
                 {"tag", x.tag},
                 {"waited", x.waited},
                 {"waited_seconds", x.waited_seconds},
                 {"culprits", culprits},
                 {"sentence", x.sentence}});
  }
  return {{"found", a.found}, {"findings", f}, {"notes", a.notes}};
}

}  // namespace

void add_analyze_command(CLI::App& app) {
  struct Options {
    std::string path;
    int window = 20;
    bool json = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("analyze", "Name the culprit of a hang or a slowdown from a run's records");
  cmd->require_subcommand(1);

  CLI::App* hang = cmd->add_subcommand(
      "hang",
      "Read every rank's flight-recorder dump in RUN_DIR (RUN_DIR/flight, written when a collective\n"
      "times out or the supervisor stops a rank; after a restart, those of the latest attempt-<k>/) and\n"
      "name the first collective sequence number where the ranks disagree: who skipped it or never\n"
      "reached it, what they did instead, and how long the others waited. parlab train puts the same\n"
      "sentence in its hang incidents. RUN_DIR may also be a simulator result (parlab simulate --json\n"
      "with a stop fault).");
  hang->add_option("RUN_DIR", o->path, "Run directory, folder of dumps, or simulator JSON")->required();
  hang->add_flag("--json", o->json, "Machine-readable output");
  hang->callback([o] {
    const auto a = diagnose::analyze_path(o->path);
    if (o->json) return print_json(hang_json(a));
    fmt::print("{}", a.summary());
    for (const auto& n : a.notes) fmt::print("  ({})\n", n);
  });

  const diagnose::StragglerOptions d;
  CLI::App* strag = cmd->add_subcommand(
      "stragglers",
      fmt::format("Read per-rank step timings (RUN_DIR/rank-*.jsonl) and name a rank whose compute is an outlier:\n"
                  "a modified z-score above {:.1f} against the other ranks' medians over windows of steps, and more\n"
                  "than {:.1f}x their median, its excess at least {:.0f}% of the median step, in at least {} windows\n"
                  "and {:.0f}% of them. Says how much step time it costs the others.",
                  d.z_threshold, d.ratio_threshold, 100 * d.min_cost_fraction, d.min_windows,
                  100 * d.min_window_fraction));
  strag->add_option("RUN_DIR", o->path, "Run directory of parlab train")->required();
  strag->add_option("--window", o->window, "Steps per window")->capture_default_str();
  strag->add_flag("--json", o->json, "Machine-readable output");
  strag->callback([o] {
    diagnose::StragglerOptions so;
    so.window = static_cast<int>(in_range("--window", o->window, 1, 1'000'000));
    const auto rep = diagnose::detect_stragglers(diagnose::timings_from_run_dir(o->path), so);
    if (o->json) {
      nlohmann::json s = nlohmann::json::array();
      for (const auto& x : rep.stragglers)
        s.push_back({{"rank", x.rank},
                     {"ratio", x.ratio},
                     {"z", x.z},
                     {"windows_flagged", x.windows_flagged},
                     {"cost_seconds_per_step", x.cost_seconds_per_step},
                     {"cost_fraction", x.cost_fraction},
                     {"sentence", x.sentence}});
      return print_json({{"steps", rep.steps},
                         {"ranks", rep.ranks},
                         {"windows", rep.windows},
                         {"method", rep.method},
                         {"stragglers", s}});
    }
    fmt::print("{}  (method: {})\n", rep.summary(), rep.method);
  });
}

}  // namespace parlab::cli
