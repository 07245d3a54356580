#include "gui/core/lab_setup.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <set>

#include "base/errors.h"
#include "strategy/io.h"

namespace parlab::gui {

const std::vector<std::string>& setup_plan_keys() {
  static const std::vector<std::string> keys = {"dp",  "tp",       "pp", "zero",      "mb", "microbatches",
                                                "gbs", "schedule", "v",  "recompute", "sp", "precision"};
  return keys;
}

std::string SetupInputs::value(const std::string& key) const {
  for (const auto& [k, v] : plan)
    if (k == key) return v;
  return {};
}

void SetupInputs::set(const std::string& key, const std::string& text) {
  for (auto& [k, v] : plan)
    if (k == key) {
      v = text;
      return;
    }
  plan.emplace_back(key, text);
}

namespace {
std::string trimmed(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return {};
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}
}  // namespace

std::string SetupInputs::plan_text() const {
  std::string out;
  for (const std::string& key : setup_plan_keys()) {
    const std::string v = trimmed(value(key));
    if (v.empty()) continue;
    out += (out.empty() ? "" : ",") + key + "=" + v;
  }
  return out;
}

std::string SetupInputs::model_label() const { return trimmed(params).empty() ? model : "params=" + trimmed(params); }

namespace {
std::string absolute_if_file(const std::string& name) {
  return std::filesystem::exists(name) ? std::filesystem::absolute(name).string() : name;
}
}  // namespace

std::string SetupInputs::model_for_child() const { return absolute_if_file(model); }
std::string SetupInputs::cluster_for_child() const { return absolute_if_file(cluster); }

int max_workers(const strategy::ClusterSpec& cluster) {
  return cluster.shares_cores() ? cluster.devices() : kMaxWorkers;
}

SetupResult resolve_setup(const SetupInputs& in) {
  SetupResult r;
  try {
    const std::string params = trimmed(in.params);
    if (!params.empty()) {
      double count = 0;
      size_t used = 0;
      try {
        count = std::stod(params, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != params.size()) throw ConfigError("--params", params, "must be a parameter count such as 7.5e9");
      r.model = strategy::params_model(count);
    } else {
      if (trimmed(in.model).empty()) throw ConfigError("--model", "(empty)", "name a preset or a TOML file");
      r.model = strategy::load_model(trimmed(in.model));
    }
    if (trimmed(in.cluster).empty()) throw ConfigError("--cluster", "(empty)", "name a preset or a TOML file");
    r.base_cluster = strategy::load_cluster(trimmed(in.cluster));
    if (in.workers < 1 || in.workers > max_workers(*r.base_cluster))
      throw ConfigError("workers", std::to_string(in.workers),
                        "must be between 1 and " + std::to_string(max_workers(*r.base_cluster)) + " for cluster " +
                            r.base_cluster->name);
    // One value per field: a comma or '=' would smuggle further keys into the plan text.
    for (const std::string& key : setup_plan_keys()) {
      const std::string v = trimmed(in.value(key));
      if (v.find_first_of(",=") != std::string::npos)
        throw ConfigError("plan." + key, v, "must be a single value (no ',' or '=')");
    }
    LabSetup s;
    s.inputs = in;
    s.model = *r.model;
    s.base_cluster = *r.base_cluster;
    s.cluster = strategy::with_world(s.base_cluster, in.workers);
    s.plan = strategy::resolve(strategy::parse_plan(in.plan_text()), s.model, in.workers);
    strategy::validate(s.plan, s.model, s.cluster);
    r.setup = std::move(s);
  } catch (const ConfigError& e) {
    r.error = SetupError{e.field(), e.what()};
  } catch (const std::exception& e) {
    // Anything else the libraries raise (an unreadable file, a model the ledger cannot size)
    // still ends as one line, never as a crash of the lab.
    r.error = SetupError{"", e.what()};
  }
  return r;
}

strategy::Plan plan_at_workers(const LabSetup& setup, int workers, strategy::ClusterSpec* cluster_out) {
  strategy::Plan p = strategy::parse_plan(setup.inputs.plan_text());
  if (!p.was_given("dp")) p.given.push_back("dp");
  p.dp = workers / (p.tp * p.pp);
  const strategy::ClusterSpec cluster = strategy::with_world(setup.base_cluster, workers);
  p = strategy::resolve(p, setup.model, workers);
  strategy::validate(p, setup.model, cluster);
  if (cluster_out) *cluster_out = cluster;
  return p;
}

std::vector<int> series_workers(const LabSetup& setup) {
  std::set<int> candidates;
  const int split = setup.plan.tp * setup.plan.pp;
  const int top = std::max(setup.world(), setup.base_cluster.devices());
  for (int w = split; w <= top; w *= 2) candidates.insert(w);
  candidates.insert(setup.world());
  std::vector<int> out;
  for (int w : candidates) {
    try {
      plan_at_workers(setup, w);
      out.push_back(w);
    } catch (const std::exception&) {
      // That worker count does not take this split (e.g. gbs not divisible): left out.
    }
  }
  return out;
}

}  // namespace parlab::gui
