#include "runtime/train/memory_report.h"

#include <fstream>
#include <sstream>

#include "runtime/comm/gloo/gloo_algorithms.h"
#include "runtime/model/compute_memory.h"
#include "runtime/train/trainer.h"
#include "strategy/ledger.h"

namespace parlab::train {

using model::MemoryCategory;

std::optional<double> MemoryReport::deviation(MemoryCategory c) const {
  const double l = ledger(c);
  if (!(l > 0)) return std::nullopt;
  return static_cast<double>(measured(c)) / l - 1.0;
}

std::optional<int64_t> MemoryReport::unexplained_resident_bytes() const {
  if (resident_peak_bytes <= 0 || resident_baseline_bytes <= 0) return std::nullopt;
  return resident_peak_bytes - resident_baseline_bytes - measured_peak_total_bytes - comm_scratch_bytes;
}

nlohmann::json MemoryReport::to_json() const {
  nlohmann::json cats = nlohmann::json::object();
  for (int i = 0; i < model::kMemoryCategories; ++i)
    cats[std::string(model::to_string(static_cast<MemoryCategory>(i)))] = {
        {"measured_peak_bytes", measured_peak_bytes[i]}, {"ledger_bytes", ledger_bytes[i]}};
  return {{"rank", rank},
          {"categories", cats},
          {"measured_peak_total_bytes", measured_peak_total_bytes},
          {"ledger_total_bytes", ledger_total_bytes},
          {"resident_peak_bytes", resident_peak_bytes},
          {"resident_baseline_bytes", resident_baseline_bytes},
          {"comm_scratch_bytes", comm_scratch_bytes}};
}

MemoryReport MemoryReport::from_json(const nlohmann::json& j) {
  try {
    MemoryReport r;
    r.rank = j.at("rank").get<int>();
    for (int i = 0; i < model::kMemoryCategories; ++i) {
      const nlohmann::json& c = j.at("categories").at(std::string(model::to_string(static_cast<MemoryCategory>(i))));
      r.measured_peak_bytes[i] = c.at("measured_peak_bytes").get<int64_t>();
      r.ledger_bytes[i] = c.at("ledger_bytes").get<double>();
    }
    r.measured_peak_total_bytes = j.at("measured_peak_total_bytes").get<int64_t>();
    r.ledger_total_bytes = j.at("ledger_total_bytes").get<double>();
    r.resident_peak_bytes = j.value("resident_peak_bytes", int64_t{0});
    r.resident_baseline_bytes = j.value("resident_baseline_bytes", int64_t{0});
    r.comm_scratch_bytes = j.value("comm_scratch_bytes", int64_t{0});
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("memory report", j.dump().substr(0, 120), std::string("malformed: ") + e.what());
  }
}

MemoryReport memory_report(const Trainer& trainer, const strategy::ClusterSpec& cluster) {
  MemoryReport r;
  r.rank = trainer.rank();
  // On a device the ledger's bytes are the device's: its compute memory's account
  // (model/compute_memory.h), not the host's, which then holds only host copies.
  const model::Model* device = trainer.state().device_model.get();
  const model::MemoryAccount* account = device ? model::device_account_of(*device) : nullptr;
  const model::MemoryUsage u = (account ? *account : trainer.memory()).usage();
  r.measured_peak_bytes = u.peak_bytes;
  r.measured_peak_total_bytes = u.peak_total_bytes;
  const strategy::Plan& plan = trainer.config().plan;
  const strategy::MemoryLedger l = strategy::compute_ledger(
      trainer.config().model, plan, strategy::with_world(cluster, plan.world()), trainer.rank());
  r.ledger_bytes = {l.params_bytes, l.grads_bytes, l.optimizer_bytes, l.activations_bytes, l.temp_bytes};
  r.ledger_total_bytes = l.total_bytes();
  for (const comm::Communicator* c : trainer.communicators())
    if (c != nullptr) r.comm_scratch_bytes += static_cast<int64_t>(comm::gloo_ring_scratch_bytes(*c));
  r.comm_scratch_bytes += trainer.bucket_ring_bytes();
  r.resident_peak_bytes = resident_peak_bytes();
  return r;
}

namespace {
// A "Vm...:  N kB" line of /proc/self/status in bytes, 0 if absent.
int64_t status_kib_field(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    std::istringstream fields(line.substr(key.size()));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}
}  // namespace

int64_t resident_peak_bytes() { return status_kib_field("VmHWM:"); }
int64_t resident_bytes() { return status_kib_field("VmRSS:"); }

}  // namespace parlab::train
