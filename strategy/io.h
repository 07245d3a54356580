#pragma once
// Reading models and clusters (preset names or TOML files) and writing strategy results as JSON.
// The only strategy file that knows TOML and JSON libraries.
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strategy/cluster_spec.h"
#include "strategy/ledger.h"
#include "strategy/model_spec.h"
#include "strategy/plan.h"

namespace parlab::strategy {

// A preset name ("gpt-175b") or a path to a TOML file ("my-model.toml"). Presets ship inside the
// binary (strategy/presets/*); a file of the same name under `<results>/models/` or
// `<results>/clusters/` (e.g. a calibrated cpu-local) takes precedence, where <results> is
// $PARLAB_RESULTS or ./results. Unknown names, unreadable files, TOML syntax errors, unknown
// keys and bad values throw ConfigError naming the source and the key.
ModelSpec load_model(std::string_view name_or_path);
ClusterSpec load_cluster(std::string_view name_or_path);

ModelSpec parse_model_toml(std::string_view text, const std::string& source);
ClusterSpec parse_cluster_toml(std::string_view text, const std::string& source);
// Writes a cluster in the same TOML form the parser reads (calibration writes cpu-local).
std::string cluster_to_toml(const ClusterSpec& cluster, const std::string& header_comment);

std::vector<std::string> model_preset_names();
std::vector<std::string> cluster_preset_names();
// The directory user and calibrated files live in: $PARLAB_RESULTS or "results".
std::string results_dir();

// A model from a bare parameter count (`--params 7.5e9`).
ModelSpec params_model(double param_count);

nlohmann::json to_json(const ModelSpec& model);
nlohmann::json to_json(const ClusterSpec& cluster);
nlohmann::json to_json(const Plan& plan);
nlohmann::json to_json(const MemoryLedger& ledger);
nlohmann::json to_json(const RuleInputs& in, const RuleVerdict& verdict);

}  // namespace parlab::strategy
