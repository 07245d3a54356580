// A calibration as JSON (results/calibration.json and `parlab calibrate --json`): every measured
// point, every fit and the calibrated cluster. Read back by load_stored_calibration (calibrate.cpp).
#include "experiments/lib/calibrate.h"
#include "strategy/io.h"

namespace parlab::experiments {

namespace {

// ZeRO's collectives as measured, and their own fits.
nlohmann::json sharded_to_json(const std::vector<ShardedPoint>& sharded) {
  nlohmann::json sharded_json = nlohmann::json::array();
  for (const auto& p : sharded)
    sharded_json.push_back({{"op", p.op},
                            {"ranks", p.ranks},
                            {"bytes", p.bytes},
                            {"seconds", p.seconds},
                            {"predicted_seconds", p.predicted_seconds},
                            {"min_chunk_bytes", p.min_chunk_bytes},
                            {"uneven_predicted_seconds", p.uneven_predicted_seconds},
                            {"fitted_seconds", p.fitted_seconds}});
  return sharded_json;
}

nlohmann::json sharded_fits_to_json(const std::vector<ShardedFit>& sharded_fits) {
  nlohmann::json sharded_fits_json = nlohmann::json::array();
  for (const auto& f : sharded_fits)
    sharded_fits_json.push_back({{"op", f.op},
                                 {"ranks", f.ranks},
                                 {"latency_seconds", f.latency_seconds},
                                 {"link_bytes_per_s", f.link_bytes_per_s},
                                 {"weighted_error", f.weighted_error}});
  return sharded_fits_json;
}

}  // namespace

nlohmann::json Calibration::to_json() const {
  nlohmann::json conc = nlohmann::json::array(), ar = nlohmann::json::array(), grid_json = nlohmann::json::array();
  for (const auto& c : concurrency)
    conc.push_back({{"processes", c.processes},
                    {"flops_per_s_each", c.flops_per_s_each},
                    {"aggregate_flops_per_s", c.aggregate_flops_per_s},
                    {"predicted_aggregate", c.predicted_aggregate}});
  for (const auto& a : allreduce)
    ar.push_back({{"ranks", a.ranks},
                  {"bytes", a.bytes},
                  {"seconds", a.seconds},
                  {"spread", a.spread},
                  {"fitted_seconds", a.fitted_seconds},
                  {"repeats", a.repeats},
                  {"judged", judged(a.bytes)}});
  nlohmann::json fits = nlohmann::json::array();
  for (const auto& f : ring_fits)
    fits.push_back({{"ranks", f.ranks},
                    {"latency_seconds", f.latency_seconds},
                    {"link_bytes_per_s", f.link_bytes_per_s},
                    {"weighted_error", f.weighted_error},
                    {"weighted_spread", f.weighted_spread}});
  nlohmann::json gloo_fits_json = nlohmann::json::array();
  for (const auto& f : gloo_fits)
    gloo_fits_json.push_back({{"ranks", f.ranks},
                              {"latency_seconds", f.latency_seconds},
                              {"link_bytes_per_s", f.link_bytes_per_s},
                              {"weighted_error", f.weighted_error}});
  const nlohmann::json sharded_json = sharded_to_json(sharded), sharded_fits_json = sharded_fits_to_json(sharded_fits);
  for (const auto& p : grid.points)
    grid_json.push_back({{"microbatch", p.microbatch},
                         {"hidden", p.hidden},
                         {"ffn", p.ffn},
                         {"flops_per_s", p.flops_per_s},
                         {"spread", p.spread},
                         {"forward_flops_per_s", p.forward_flops_per_s}});
  return {{"machine", machine},
          {"model", model},
          {"created_at", created_at},
          {"hardware_threads", hardware_threads},
          {"flops_per_s", flops_per_s},
          {"flops_spread", flops_spread},
          {"flops_per_s_bf16", flops_per_s_bf16},
          {"flops_bf16_spread", flops_bf16_spread},
          {"rate_grid", grid_json},
          {"concurrency", conc},
          {"optimizer_bytes_per_s", optimizer_bytes_per_s},
          {"optimizer_spread", optimizer_spread},
          {"memcpy_bytes_per_s", memcpy_bytes_per_s},
          {"allreduce", ar},
          {"ring_fits", fits},
          {"sharded", sharded_json},
          {"sharded_fits", sharded_fits_json},
          {"comm", "shm"},
          {"gloo_ring_fits", gloo_fits_json},
          {"latency_seconds", latency_seconds},
          {"link_bytes_per_s", link_bytes_per_s},
          {"fit_max_relative_error", fit_max_relative_error},
          {"fit_median_relative_error", fit_median_relative_error},
          {"comm_cpu_seconds_per_byte", comm_cpu_seconds_per_byte},
          {"load",
           {{"loadavg_before", load.loadavg_before},
            {"loadavg_after", load.loadavg_after},
            {"others_busy_cores", load.others_busy_cores}}},
          {"attempts", attempts},
          {"trusted", trusted()},
          {"warnings", warnings},
          {"cluster", strategy::to_json(cluster)}};
}

}  // namespace parlab::experiments
