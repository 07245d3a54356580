#include "rubric/measures.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "rubric/checks.h"
#include "strategy/measures.h"

namespace parlab::rubric {
namespace {

using nlohmann::json;

const Proof* latest_scaling_report(const Evidence& e) {
  const Proof* best = nullptr;
  for (const Proof* p : e.trusted("scaling_report"))
    for (const json& row : p->evidence.value("rows", json::array()))
      if (row.contains("measured_step_seconds")) best = p;
  return best;
}

// From the decide experiment's proof: the planner's first choice among splits, measured.
std::optional<DecisionUtility> split_decision(const Evidence& e) {
  const auto proofs = e.trusted("decision_utility");
  if (proofs.empty()) return std::nullopt;
  const Proof* p = proofs.back();
  DecisionUtility d;
  d.proof = p->row.id;
  d.experiment = p->experiment;
  d.chosen_by = "planner";
  const json rows = p->evidence.value("candidates", json::array());
  const size_t chosen = p->evidence.value("chosen", size_t{0});
  std::optional<size_t> best;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!rows[i].contains("measured_step_seconds")) continue;
    ++d.candidates;
    if (!best || rows[i]["measured_step_seconds"].get<double>() < rows[*best]["measured_step_seconds"].get<double>())
      best = i;
  }
  if (!best || chosen >= rows.size() || !rows[chosen].contains("measured_step_seconds")) return std::nullopt;
  auto throughput = [](const json& row) {
    return row.value("global_batch", 0.0) / row["measured_step_seconds"].get<double>();
  };
  d.chosen = rows[chosen].value("name", std::string());
  d.best = rows[*best].value("name", std::string());
  d.chosen_samples_per_s = throughput(rows[chosen]);
  d.best_samples_per_s = throughput(rows[*best]);
  d.regret_percent = 100 * strategy::regret(rows[chosen]["measured_step_seconds"].get<double>(),
                                            rows[*best]["measured_step_seconds"].get<double>());
  return d;
}

// Without a decide proof: the worker counts of the latest scaling report as the candidates.
std::optional<DecisionUtility> decision_utility(const Evidence& e) {
  if (auto d = split_decision(e)) return d;
  const Proof* p = latest_scaling_report(e);
  if (!p) return std::nullopt;
  DecisionUtility d;
  d.proof = p->row.id;
  d.experiment = p->experiment;
  double best_pred = 0, best_meas = 0;
  std::map<std::string, double> measured;
  for (const json& row : p->evidence.value("rows", json::array())) {
    if (!row.contains("measured_step_seconds")) continue;
    const std::string label = std::to_string(row.value("workers", 0)) + " workers";
    const double b = row.value("global_batch", 0.0);
    const double meas = b / row["measured_step_seconds"].get<double>();
    const char* src = row.contains("simulated_step_seconds")  ? "simulated"
                      : row.contains("analytic_step_seconds") ? "analytic"
                                                              : nullptr;
    if (!src) continue;
    ++d.candidates;
    measured[label] = meas;
    const double pred = b / row[std::string(src) + "_step_seconds"].get<double>();
    if (pred > best_pred) best_pred = pred, d.chosen = label, d.chosen_by = src;
    if (meas > best_meas) best_meas = meas, d.best = label;
  }
  if (d.candidates == 0) return std::nullopt;
  d.chosen_samples_per_s = measured[d.chosen];
  d.best_samples_per_s = best_meas;
  d.regret_percent = 100.0 * strategy::regret(1 / d.chosen_samples_per_s, 1 / d.best_samples_per_s);
  return d;
}

// Split of a proof: its inputs' plan text, else the plan of the run it is about.
std::string proof_split(const Evidence& e, const Proof& p) {
  if (p.inputs.contains("plan") && p.inputs["plan"].is_string()) return split_of(p.inputs["plan"].get<std::string>());
  if (p.row.run_id)
    if (const db::RunRecord* r = e.run(*p.row.run_id)) {
      std::string text;
      for (const char* k : {"zero", "tp", "pp"})
        if (r->plan.contains(k) && r->plan[k].is_number())
          text += std::string(text.empty() ? "" : ",") + k + "=" + std::to_string(r->plan[k].get<int>());
      return split_of(text);
    }
  return "ddp";
}

std::vector<SliceRow> slices(const Evidence& e) {
  std::map<std::tuple<std::string, std::string, int>, SliceRow> rows;
  auto count = [&](const std::string& kind, const std::string& split, int workers, bool passed) {
    SliceRow& s = rows[{kind, split, workers}];
    s.proof_kind = kind, s.split = split, s.workers = workers;
    ++s.total;
    s.passed += passed;
  };
  for (const Proof& p : e.proofs) {
    if (!p.trusted) continue;
    const std::string split = proof_split(e, p);
    if (p.row.kind == "equivalence") {
      const double tol = p.inputs.value("tolerance", 1e-4);
      for (const auto& [k, v] : p.evidence.items()) {
        if (!v.is_object()) continue;
        int w = 0;
        try {
          w = std::stoi(k);
        } catch (const std::exception&) {
          continue;
        }
        const double worst = max_relative_difference(v);
        count(p.row.kind, split, w, worst >= 0 && worst <= tol);
      }
    } else if (p.row.kind == "kill_resume_bitwise" || p.row.kind == "kill_resume_elastic") {
      for (const json& t : p.evidence.value("trials", json::array()))
        count(p.row.kind, split, p.inputs.value("nproc", 0), t.value("passed", false));
    } else if (p.row.kind == "elastic_sampling" || p.row.kind == "hang_fallback") {
      count(p.row.kind, split, p.inputs.value("nproc", 0), p.row.passed);
    }
  }
  std::vector<SliceRow> out;
  for (auto& [k, v] : rows) out.push_back(v);
  return out;
}

}  // namespace

Measures compute_measures(const Evidence& e) {
  Measures m;
  m.decision = decision_utility(e);
  m.slices = slices(e);
  if (const Proof* p = latest_scaling_report(e))
    for (const json& row : p->evidence.value("rows", json::array()))
      if (row.contains("measured_step_seconds"))
        m.step_times.push_back({row.value("workers", 0), row["measured_step_seconds"].get<double>()});
  std::vector<double> restart, detection;
  for (const auto& [run, list] : e.incidents)
    for (const db::IncidentRecord& i : list) {
      if (i.kind == db::IncidentKind::kStraggler) continue;
      if (i.detection_seconds) detection.push_back(*i.detection_seconds);
      // fault -> training again = detection + (detected -> training again)
      if (i.restart_seconds) restart.push_back(i.detection_seconds.value_or(0) + *i.restart_seconds);
    }
  m.restarts = static_cast<int>(restart.size());
  m.detections = static_cast<int>(detection.size());
  if (!restart.empty())
    m.restart_p50_seconds = median(restart), m.restart_max_seconds = *std::max_element(restart.begin(), restart.end());
  if (!detection.empty())
    m.detection_p50_seconds = median(detection),
    m.detection_max_seconds = *std::max_element(detection.begin(), detection.end());
  return m;
}

}  // namespace parlab::rubric
